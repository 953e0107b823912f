/*
 * layout: the tensor-parallel ranks and forward steps of a dump tree,
 * resolved after the tree is read and before it is paired.
 *
 * Dumpers write one tensor per rank and per forward pass: rank_K/ folders,
 * *_rankK files, tp-K, vLLM's cuda_K device suffix, step_N/ folders (the
 * readers of layouts that carry these in metadata, such as SGLang's rank
 * and forward pass id, name them rank_K and step_N too).  The layout step
 * strips the tags and
 *   - joins each tensor's ranks into one composite (compose.h): split
 *     tensors concatenated on their split axis, partial outputs summed,
 *     replicated ones checked equal (rank 0 is compared; a disagreement is
 *     kept in tree->layout.replicas);
 *   - keeps one step (--step K; the first by default), or stitches every
 *     step along the sequence axis (--steps all), and notes decode steps
 *     whose tensors equal the step before's (stale buffers).
 * How a tap's ranks join comes from the tap unless --shard says otherwise:
 * column-parallel outputs (attn.q/k/v, attn.core, mlp.gate/up/act) split on
 * their last axis, fused attn.qkv and mlp.gate_up per projection,
 * row-parallel outputs (attn.o, mlp.down, attn, mlp) are summed when their
 * ranks differ and taken as all-reduced when equal, the rest replicated.
 */
#ifndef TB_LAYOUT_H
#define TB_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "formats/tree.h"
#include "model/naming.h"
#include "model/taps.h"

typedef enum tb_shard_kind {
	TB_SHARD_SPLIT,      /* concatenated on axis */
	TB_SHARD_PARTIAL,    /* summed */
	TB_SHARD_REPLICATED, /* equal on every rank */
} tb_shard_kind;

/* One --shard TAP=SPEC. */
typedef struct tb_shard_rule {
	char tap[TB_TAP_LEN];
	tb_shard_kind kind;
	int axis, ndim; /* TB_SHARD_SPLIT: the [tp] dim and how many dims the spec names */
	char spec[96];  /* as written */
} tb_shard_rule;

/* "mlp.act=s h[tp]", "attn.o=partial", "embed=replicated". */
int tb_shard_parse(const char *arg, tb_shard_rule *out, tb_err *err);

typedef struct tb_layout_opts {
	int step;            /* the step to compare; -1: the first (see tb_session) */
	bool all_steps;      /* stitch every step along the sequence axis */
	const tb_shard_rule *shards;
	size_t n_shards;
	int heads, kv_heads; /* 0: unknown (to split a fused qkv's shards) */
	int64_t q_width, kv_width; /* else the other tree's q and k widths (0: unknown) */
	int rank;            /* the tree is this rank's alone (sketch --rank), or -1 */
} tb_layout_opts;

void tb_layout_opts_init(tb_layout_opts *o);

/* The last-axis widths of a tree's attn.q and attn.k tensors (of any layer,
 * rank or step; 0 when it has none), or of a fused tree's attn.core and
 * the rest of its attn.qkv: their proportion is the head counts', which is
 * how another tree's fused qkv shards split. */
void tb_layout_qk_widths(const tb_tree *tree, const tb_namer *namer, int64_t *q, int64_t *kv);

/* Does any tensor of the tree carry a step tag? */
bool tb_layout_has_steps(const tb_tree *tree);

/* Resolve the tree's ranks and steps in place (tb_tree_set_tensors) and
 * fill tree->layout; a tree with neither is left as it is.  Fails, naming
 * the tensor, on a missing rank, mixed degrees, shards that do not join, a
 * step gap or an absent --step. */
int tb_layout_apply(tb_tree *tree, const tb_namer *namer, const tb_layout_opts *o, tb_err *err);
/* How one rank's tensor takes part in the joined tensor: split on axis
 * `axis` in n_parts consecutive parts of the widths width[] (one part:
 * the whole axis; a fused projection's gate and up, or q, k and v, each
 * joined across the ranks and then put side by side), or whole (axis
 * -1: replicated, and row-parallel outputs taken as all-reduced). */
typedef struct tb_rank_join {
	int axis;
	int n_parts;
	int64_t width[3];
	bool partial; /* a partial sum (axis -1): the ranks' values add up, their norms do not */
} tb_rank_join;

/* How rank tensor t of cell c joins, for a sketch of that rank alone.
 * Refuses, naming the tensor, a fused qkv projection without the head
 * counts (--heads and --kv-heads, or the widths in o). */
int tb_layout_rank_join(const tb_layout_opts *o, const tb_cell *c, const tb_tensor *t, tb_rank_join *j, tb_err *err);

#endif
