/*
 * heads: the one decision of an attention cell's head layout, for the
 * per-head diagnosis features and the TUI's per-head view.
 *
 * Counts given on the command line come first; the one not given is
 * derived from the widths of the layer's attn.q and attn.k (GQA).  With no
 * count given, a layer whose attn.q/attn.k are dumped with a head axis,
 * [.., S, H, D] or [.., H, S, D] (S from the layer's attn output, one axis
 * more than it), gives them.  Only the attention taps before o_proj have
 * heads (attn.q/k/v, q_rope/k_rope, core and other attn.X): o_proj mixes
 * them, so attn, attn.o and attn.resid get none, with a note saying which
 * taps to dump.  attn.k and attn.v have the key/value heads, the others the
 * query heads.  Pure: reads shapes, never tensor data.
 */
#ifndef TB_DIAG_HEADS_H
#define TB_DIAG_HEADS_H

#include <stdint.h>

#include "compare/compare.h"
#include "compare/inspect.h"

typedef struct tb_heads {
	int n;                 /* heads of this cell (query heads, or kv heads for attn.k/attn.v), 0: unknown */
	int q, kv;             /* query and key/value head counts, 0: unknown */
	int64_t head_dim;      /* 0 when n is 0 */
	tb_head_layout layout; /* where the heads are in the cell's tensor; TB_HEADS_NONE when n is 0 */
	const char *source;    /* "--heads", "--kv-heads", "inferred from attn.q/attn.k shapes", or NULL */
	char note[160];        /* why n is 0 for an attention tap, for people; "" otherwise */
} tb_heads;

/* The head layout of r->cells[cell]; given_q / given_kv: --heads /
 * --kv-heads, or 0 when not given.  Always fills *out. */
void tb_heads_infer(const tb_result *r, long cell, int given_q, int given_kv, tb_heads *out);

/* The head dims people's models use, commonest first: what the replays
 * and the RoPE pair features try when neither the shapes nor --heads say
 * which. */
#define TB_N_USUAL_HEAD_DIMS 12
extern const int tb_usual_head_dims[TB_N_USUAL_HEAD_DIMS];

#endif
