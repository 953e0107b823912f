/*
 * inspect: the numbers a drill-down into one cell needs that the one-pass
 * compare does not keep: the k worst elements, a log-scale histogram of
 * |cand - ref|, the worst channels of one position, and rel_l2 / cosine per
 * attention head.  Each call re-reads the cell's two tensors (acquire,
 * stream in blocks, release); nothing is cached.
 *
 * Called by the TUI's detail screen and, later, by diagnosis features that
 * want per-head structure.  Inputs are borrowed; outputs are caller arrays.
 */
#ifndef TB_INSPECT_H
#define TB_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include "compare/compare.h"
#include "base/error.h"

/* One compared element.  diff is |cand - ref|, +Inf when the two sides are
 * not both finite and not the same non-finite value (those rank worst). */
typedef struct tb_elem {
	uint64_t index; /* flat C-order index into the tensor */
	float ref, cand;
	double diff;
} tb_elem;

/* |diff| histogram by decades: bins[i] counts 10^(TB_HIST_LO+i) <= |d| < 10^(TB_HIST_LO+i+1). */
#define TB_HIST_LO (-10)
#define TB_HIST_BINS 14
typedef struct tb_diff_hist {
	uint64_t zero;              /* |d| == 0 */
	uint64_t below;             /* 0 < |d| < 10^TB_HIST_LO */
	uint64_t bins[TB_HIST_BINS];
	uint64_t above;             /* |d| >= 10^(TB_HIST_LO+TB_HIST_BINS) */
	uint64_t nonfinite;         /* either side NaN or Inf */
} tb_diff_hist;

/* The k worst elements, worst first (ties: lower index first), and the
 * histogram, in one pass.  worst may be NULL when k is 0; hist may be NULL.
 * *n_out: how many of worst were filled (<= k).  The cell must have both
 * sides. */
int tb_inspect_diff(const tb_cell_result *c, size_t k, tb_elem *worst, size_t *n_out, tb_diff_hist *hist,
		    tb_err *err);

/* The k worst channels of position pos (0 <= pos < c->m.n_pos): every row
 * of the activation whose position is pos, worst first. */
int tb_inspect_position(const tb_cell_result *c, int64_t pos, size_t k, tb_elem *worst, size_t *n_out,
			tb_err *err);

typedef struct tb_head_metrics {
	double rel_l2, cosine, norm_ratio, max_abs;
} tb_head_metrics;

/* Where the heads of an activation are, given its squeezed shape. */
typedef enum tb_head_layout {
	TB_HEADS_NONE,   /* the shape fits neither layout */
	TB_HEADS_LAST,   /* [..., S, n_heads * head_dim] (heads packed in the last axis) */
	TB_HEADS_SPLIT,  /* [..., n_heads, S, head_dim] */
	TB_HEADS_INNER,  /* [..., S, n_heads, head_dim] */
} tb_head_layout;

tb_head_layout tb_head_layout_of(const tb_cell_result *c, int n_heads, int64_t head_dim);

/* Per-head rel_l2, cosine, norm ratio and max |diff| over finite pairs
 * (out has n_heads entries).  Fails when the shape has no head layout. */
int tb_inspect_heads(const tb_cell_result *c, int n_heads, int64_t head_dim, tb_head_metrics *out, tb_err *err);

#endif
