/*
 * estimate: the metrics (doc/report.md) for a pair of tensors, from their
 * sketches (tensor/sketch.h) alone.
 *
 * ||CS(d)||^2, the squared difference of the two CountSketches, estimates
 * ||d||^2 = ||c - r||^2 without bias, with variance at most 2 ||d||^4 / k;
 * the bound reported is TB_SKETCH_Z standard deviations of that (normal
 * approximation): the relative error of ||d||^2 is at most
 * eps = Z sqrt(2 / k), so ||d||^2 lies in [D / (1 + eps), D / (1 - eps)].
 * Norms are exact (the sketches' own sums of squares), equal block hashes
 * everywhere make the pair exact.
 */
#ifndef TB_ESTIMATE_H
#define TB_ESTIMATE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "tensor/sketch.h"

#define TB_SKETCH_Z 4.0

/* What two sketches of one shape say about the pair (r, c). */
typedef struct tb_sketch_estimate {
	bool exact;                /* every block hash equal: the tensors are equal */
	double rel_l2, rel_l2_lo, rel_l2_hi;
	double cosine, cosine_lo, cosine_hi;
	double norm_ratio;         /* exact */
	uint64_t mismatch;         /* NaN/Inf count differences: a lower bound of the mismatched pairs */
	double bias_frac;          /* the share of ||c - r||^2 a per-channel offset explains: the
				    * column sums' difference over the estimated ||c - r||^2 (at
				    * most 1); NaN without positions */
	double shift_frac;         /* of the positions but the first, the share whose candidate row
				    * has the reference's norm one position off and not its own (a
				    * token sequence shifted by one); NaN under 2 positions */
	double *pos_rel_l2;        /* n_pos each (malloc'd, the caller owns them), or NULL */
	double *pos_cos;
	double *pos_norm_ratio;
} tb_sketch_estimate;

/* Estimate; -1 (err) when the sketches do not share their parameters or
 * out of memory. */
int tb_sketch_compare(const tb_sketch *r, const tb_sketch *c, tb_sketch_estimate *e, tb_err *err);
/* The sketches of a pair of tensors of one shape, either of them (or both)
 * a sketch: s[i] is t[i]'s own, or one made alike into own[i] (on one
 * thread), which the caller frees with tb_sketch_done (own[] zeroed
 * first, so both can always be freed).  -1 (err) when a side cannot be
 * read. */
int tb_sketch_sides(tb_tensor *const t[2], const tb_sketch *s[2], tb_sketch own[2], tb_err *err);
/* The estimated rel_l2 of two tensors of one shape, either of them (or
 * both) a sketch: the other is sketched alike; *exact when every block
 * hash agrees (the tensors are equal, *rel 0).  -1 (err) when they cannot
 * be compared (other shapes or seeds, unreadable values). */
int tb_sketch_rel_l2(tb_tensor *ref, tb_tensor *cand, double *rel, bool *exact, tb_err *err);
/* Free the estimate's per-position arrays (unless their owner took them). */
void tb_sketch_estimate_done(tb_sketch_estimate *e);

#endif
