/*
 * sketch: a fingerprint of one tensor, small enough to carry where the
 * tensor cannot go, from which the metrics (doc/report.md) against another
 * tensor's fingerprint are estimated with a stated bound.
 *
 * One pass over the values, in float32 as tb_tensor_read_f32 gives them:
 *   - each side's statistics (finite count, sum, sum of squares, min, max,
 *     NaN and Inf counts), exact;
 *   - the sum of squares of each position (the second-to-last axis), in
 *     float;
 *   - a CountSketch of the whole tensor: k buckets, element i added with a
 *     random sign s(i), a bit of a hash of the seed and i's chunk of 64
 *     indices, into bucket (a(b) + i) mod k, where a(b) is a random
 *     rotation of i's block of k consecutive indices, so the sketch is
 *     linear: the sketch of c - r is the difference of the sketches, and
 *     shards sketched apart add up.  Two elements share a bucket with
 *     chance 1/k (never within a block), as with a bucket hashed per
 *     element, which is all the estimate's variance depends on, and each
 *     block's adds are one contiguous, vectorised run;
 *   - a CountSketch of each position the same way, kp buckets, over
 *     groups of kp columns, with a bit of another hash of the chunk for
 *     sign;
 *   - each column's (the last axis') sum over the rows, in float, so that
 *     two sketches tell the share of the error a per-channel offset
 *     explains;
 *   - a 64-bit hash of each block of values: the sum, modulo 2^64, of each
 *     value's float32 bits times odd numbers hashed from the seed, its
 *     place in its chunk and its chunk; equal hashes everywhere prove
 *     equal tensors (one differing value always changes its block's hash;
 *     several cancel by a tiny chance), and being a sum, the hashes of
 *     shares and shards add up.
 * One hash of each kind per chunk of 64 values, not one per value, whose
 * bits are as random: the exact layout is tbisect-dumps(5)'s.
 * Non-finite values count in the statistics and stay out of the sums.
 *
 * What two sketches say about a pair of tensors is compare/estimate.h's.
 *
 * A tb_sketch owns its arrays; tb_sketch_done releases them.
 */
#ifndef TB_SKETCH_H
#define TB_SKETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "tensor/tensor.h"

#define TB_SKETCH_VERSION 4 /* the only one read: others sign and hash values otherwise */
#define TB_SKETCH_BLOCK 65536 /* values per exact hash */

/* The shape of a sketch, which two sketches must share to be compared. */
typedef struct tb_sketch_params {
	uint64_t seed;
	uint64_t numel;
	uint32_t k;        /* whole-tensor buckets */
	int64_t n_pos;     /* positions (0: not an activation) */
	uint64_t row_len;  /* values per row (the last axis) when n_pos > 0 */
	uint32_t kp;       /* buckets per position */
} tb_sketch_params;

typedef struct tb_sketch {
	tb_sketch_params p;
	uint16_t rank, ranks; /* a rank's share of a tensor split on its last axis (ranks > 1), to be
			       * added to the other ranks' (tb_sketch_add); else 0 of 1 */
	uint64_t nan, inf, finite;
	double sum, sumsq, min, max;
	double *bucket;    /* k */
	float *pos_sumsq;  /* n_pos */
	float *pos_bucket; /* n_pos * kp */
	float *col_sum;    /* row_len when n_pos > 0: each column's sum over the rows */
	uint64_t n_blocks;
	uint64_t *hash;    /* n_blocks, of TB_SKETCH_BLOCK values each */
} tb_sketch;

/* The parameters tbisect sketches a tensor of this shape with. */
void tb_sketch_params_for(const tb_tensor *t, uint64_t seed, tb_sketch_params *p);
/* Allocate a zeroed sketch of these parameters; -1 when out of memory. */
int tb_sketch_alloc(tb_sketch *s, const tb_sketch_params *p);
void tb_sketch_done(tb_sketch *s);
/* Sketch t's values (acquires and releases t) on up to `threads` threads:
 * tb_sketch_jobs of one job with s's parameters.  s must be allocated; it
 * is replaced by the sketch. */
int tb_sketch_tensor(tb_tensor *t, tb_sketch *s, int threads, tb_err *err);
/* Sketch t as rank `rank` of `ranks` of a tensor split on t's axis
 * `axis`, in n_parts consecutive parts of widths width[] along it (one
 * part: the whole axis; more: a fused projection, whose parts are each
 * joined across the ranks and then put side by side): s is allocated
 * with the joined tensor's parameters, and t's values are folded in at
 * the joined tensor's indices, so that the ranks' sketches add up to the
 * joined tensor's (one thread). */
int tb_sketch_shard(tb_tensor *t, tb_sketch *s, int axis, const int64_t *width, int n_parts, int rank, int ranks,
		    tb_err *err);
/* A tensor to sketch with parameters p: whole (axis < 0), or as rank
 * `rank` of `ranks` of a tensor split on its axis `axis` in n_parts parts
 * of widths width[] (tb_sketch_shard; p is then the joined tensor's). */
typedef struct tb_sketch_job {
	tb_tensor *t;
	tb_sketch_params p;
	int axis;
	int64_t width[3];
	int n_parts, rank, ranks;
} tb_sketch_job;

/* Receives job `job`'s sketch, which is then its to free (also when it
 * fails: -1 with err set stops the sketching). */
typedef int (*tb_sketch_done_fn)(void *ctx, size_t job, tb_sketch *s, tb_err *err);

/* Sketch the jobs on up to `threads` threads, handing each job's sketch to
 * on_done in the jobs' order.  Each tensor is cut into parts of whole rows
 * (a rank's share is one part) that the threads take in turn, small
 * tensors one part each, and a tensor's parts' sketches are added in
 * order: the same sketch on any number of threads.  A few sketches wait in
 * memory at most, and a failure stops every thread (the first failure is
 * the one reported). */
int tb_sketch_jobs(const tb_sketch_job *jobs, size_t n, int threads, tb_sketch_done_fn on_done, void *ctx, tb_err *err);

/* Add from's sums into into (the sketches of disjoint parts of one tensor,
 * of one seed and parameters). */
void tb_sketch_add(tb_sketch *into, const tb_sketch *from);
/* Bytes the sketch takes in a .tbsk file, besides its name and shape. */
uint64_t tb_sketch_size(const tb_sketch_params *p);

/* Do two parameter sets allow a comparison?  When not, why in buf. */
bool tb_sketch_params_match(const tb_sketch_params *a, const tb_sketch_params *b, char *buf, size_t size);

#endif
