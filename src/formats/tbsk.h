/*
 * tbsk: the .tbsk file, a tree's fingerprint (tbisect sketch): the
 * sketch.h fingerprint of each tensor with its name, the cell it mapped to
 * when sketched, its dtype and shape.  Little-endian:
 *
 *   "TBSKETCH" u32 version u32 tensors u64 seed
 *   per tensor: u16 len, name; u16 len, cell ("" when unmapped);
 *     u8 len, dtype name; u8 ndim, i64 shape[ndim];
 *     u64 numel u32 k i64 n_pos u64 row_len u32 kp; u16 rank u16 ranks
 *     (rank K of N: a share of a tensor split on its last axis, its
 *     numbers over that share; the shape and parameters the joined one's);
 *     u64 nan inf finite; f64 sum sumsq min max;
 *     f64 bucket[k]; f32 pos_sumsq[n_pos]; f32 pos_bucket[n_pos * kp];
 *     f32 col_sum[row_len] (n_pos > 0);
 *     u64 hash[ceil(numel / TB_SKETCH_BLOCK)]
 *   u64 checksum of every byte before it
 *
 * The reader (tb_fmt_tbsk in reader.h) gives each tensor its sketch in
 * place of values; the writer streams one tensor at a time.
 */
#ifndef TB_TBSK_H
#define TB_TBSK_H

#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "base/writefile.h"
#include "tensor/sketch.h"

typedef struct tb_tbsk_writer {
	tb_atomic file; /* written whole or not at all */
	uint64_t sum;   /* checksum so far */
	uint64_t bytes;
} tb_tbsk_writer;

/* What a sketch keeps of its tree as a whole, measured on the values. */
typedef struct tb_tbsk_tree {
	double tie;            /* tb_tree.tie, NaN when unknown */
	const int64_t *tokens; /* the token ids, or NULL */
	uint64_t n_tokens;
} tb_tbsk_tree;

/* Start writing path (a temporary beside it until tb_tbsk_end). */
int tb_tbsk_begin(tb_tbsk_writer *w, const char *path, uint64_t seed, uint32_t n_tensors, const tb_tbsk_tree *tree,
		  tb_err *err);
int tb_tbsk_add(tb_tbsk_writer *w, const tb_tensor *t, const char *cell, const tb_sketch *s, tb_err *err);
/* Finish: checksum, close, move into place; the bytes written in *size. */
int tb_tbsk_end(tb_tbsk_writer *w, uint64_t *size, tb_err *err);
/* Drop what was written (after an error). */
void tb_tbsk_abort(tb_tbsk_writer *w);

#endif
