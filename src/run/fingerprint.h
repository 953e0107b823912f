/*
 * fingerprint: `tbisect sketch`: a tree opened as any mode opens it (the
 * configuration's map, layout, step), each tensor sketched (sketch.h) in
 * one streaming pass and written to a .tbsk file (tbsk.h), which any mode
 * then takes in place of the tree.
 *
 * Where each host of a tensor-parallel dump holds only its own rank, each
 * sketches that rank (rank K of N): a tensor split on its last axis is
 * sketched as its share of the joined tensor, the rest whole; `sketch
 * merge` adds the shares up into the sketch of the joined tree (the sketch
 * is linear, so no host needs another's values).
 */
#ifndef TB_FINGERPRINT_H
#define TB_FINGERPRINT_H

#include <stdint.h>

#include "base/error.h"
#include "run/run.h"

/* The seed unless --seed says otherwise. */
#define TB_SKETCH_SEED 1

typedef struct tb_fingerprint_stats {
	size_t tensors;
	uint64_t tree_bytes;   /* the tensors' values as the tree holds them */
	uint64_t sketch_bytes; /* the .tbsk file */
	size_t partial;        /* a rank's partial sums, left out */
	char first_partial[128]; /* the first of them, "" when none */
} tb_fingerprint_stats;

/* Sketch the tree at path into out (a .tbsk file, replaced whole); ranks
 * > 1: the tree is rank `rank` of that many, and its partial sums are left
 * out (stats says how many): a rank's share of one is no sketch, as the
 * norms of the ranks' shares do not add up to the tensor's. */
int tb_run_sketch(const tb_run_config *cfg, const char *path, int rank, int ranks, const char *out, uint64_t seed,
		  tb_fingerprint_stats *stats, tb_err *err);
/* Merge the ranks' sketches (parts, n of them) into out, naming cells by
 * the configuration's map.  Every split tensor needs each rank once;
 * whole ones must agree (their hashes). */
int tb_run_sketch_merge(const tb_run_config *cfg, const char *const *parts, int n, const char *out,
			tb_fingerprint_stats *stats, tb_err *err);

#endif
