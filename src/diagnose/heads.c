#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "diagnose/heads.h"

/* The sequence of a layer, read off its attention output [.., S, hidden]. */
typedef struct seq_info {
	int64_t len; /* S, 0: unknown (attn not dumped) */
	int rank;    /* the attention output's squeezed rank */
} seq_info;

/* The shape a cell reports (the reference's, else the candidate's); rank 0
 * when the cell is not dumped. */
static int shape_of(const tb_cell_result *c, int64_t *sq)
{
	const tb_tensor *t = c ? (c->ref ? c->ref : c->cand) : NULL;

	return t ? tb_tensor_squeezed(t, sq) : 0;
}

/* Heads on an axis of their own, [.., S, H, D] or [.., H, S, D]: one axis
 * more than the attention output, so a batch axis [B, S, hidden] is no
 * head axis.  0 when the shape has none. */
static int64_t axis_heads(const int64_t *sq, int nr, const seq_info *seq)
{
	if (seq->len <= 0 || nr < 3 || nr != seq->rank + 1)
		return 0;
	if (sq[nr - 3] == seq->len)
		return sq[nr - 2];
	if (sq[nr - 2] == seq->len)
		return sq[nr - 3];
	return 0;
}

static int count_of(int64_t n)
{
	return n > 0 && n <= INT_MAX ? (int)n : 0;
}

/* A dumped cell's heads on a head axis (0: none) and its channels per
 * position: heads x head_dim there, else the last axis. */
static int cell_heads(const tb_cell_result *c, const seq_info *seq, int64_t *width)
{
	int64_t sq[TB_MAX_DIMS], h;
	int nr = shape_of(c, sq);

	*width = 0;
	if (nr == 0)
		return 0;
	h = axis_heads(sq, nr, seq);
	*width = h > 0 ? h * sq[nr - 1] : sq[nr - 1];
	return count_of(h);
}

/* The count not given, from the other and the attn.q / attn.k widths
 * (GQA: kv = q * k_width / q_width); 0 when they do not tell. */
static int derive(int given, int64_t given_width, int64_t other_width)
{
	if (given_width <= 0 || other_width <= 0 || ((int64_t)given * other_width) % given_width != 0)
		return 0;
	return count_of((int64_t)given * other_width / given_width);
}

/* Split the cell's tensor into n heads: on its head axis when it has one,
 * else packed in the last axis.  Without an attention output to tell S, an
 * axis of n heads beside the last is taken for the head axis. */
static void split(const tb_cell_result *c, int n, const seq_info *seq, tb_heads *out)
{
	int64_t sq[TB_MAX_DIMS], axis, last;
	int nr = shape_of(c, sq);
	tb_head_layout lay = TB_HEADS_NONE;

	/* a few values of each axis, flattened: no head's channels together */
	if (tb_cell_partial(c)) {
		snprintf(out->note, sizeof out->note, "only some values were dumped: no heads to split");
		return;
	}
	if (nr > 0) {
		last = sq[nr - 1];
		axis = axis_heads(sq, nr, seq);
		if ((axis == n || (seq->len <= 0 && nr >= 3)) && (lay = tb_head_layout_of(c, n, last)) != TB_HEADS_NONE)
			out->head_dim = last;
		else if (axis == 0 && last % n == 0 && (lay = tb_head_layout_of(c, n, last / n)) == TB_HEADS_LAST)
			out->head_dim = last / n;
	}
	if (!out->head_dim) {
		snprintf(out->note, sizeof out->note, "the shape does not split into %d heads", n);
		return;
	}
	out->n = n;
	out->layout = lay;
}

const int tb_usual_head_dims[TB_N_USUAL_HEAD_DIMS] = {128, 64, 256, 96, 80, 32, 16, 8, 160, 112, 48, 192};

void tb_heads_infer(const tb_result *r, long cell, int given_q, int given_kv, tb_heads *out)
{
	const tb_cell_result *c, *q, *k;
	int64_t sq[TB_MAX_DIMS], qw, kw;
	seq_info seq = {0, 0};
	int nr, n, q_axis, k_axis;

	memset(out, 0, sizeof *out);
	if (cell < 0 || (size_t)cell >= r->n_cells)
		return;
	c = &r->cells[cell];
	if (c->cell.id != TB_TAP_ATTN && tb_cell_parent(&c->cell) != TB_TAP_ATTN)
		return;
	q = tb_result_cell(r, c->cell.layer, TB_TAP_ATTN_Q);
	k = tb_result_cell(r, c->cell.layer, TB_TAP_ATTN_K);
	nr = shape_of(tb_result_cell(r, c->cell.layer, TB_TAP_ATTN), sq);
	if (nr >= 2)
		seq = (seq_info){sq[nr - 2], nr};
	q_axis = cell_heads(q, &seq, &qw);
	k_axis = cell_heads(k, &seq, &kw);
	out->q = given_q;
	out->kv = given_kv;
	if (given_q || given_kv) {
		out->source = given_q ? "--heads" : "--kv-heads";
		if (!given_kv)
			out->kv = derive(given_q, qw, kw);
		if (!given_q)
			out->q = derive(given_kv, kw, qw);
		/* widths that do not tell: take it for no GQA */
		if (!out->kv)
			out->kv = out->q;
	} else {
		out->q = q_axis;
		out->kv = k_axis;
		if (out->q || out->kv)
			out->source = "inferred from attn.q/attn.k shapes";
	}
	/* o_proj sums every head into every channel: after it, channel slices
	 * are no heads, so none are claimed there (the layer's counts stay). */
	if (c->cell.id == TB_TAP_ATTN || c->cell.id == TB_TAP_ATTN_O || c->cell.id == TB_TAP_ATTN_RESID) {
		snprintf(out->note, sizeof out->note,
			 "no heads after o_proj, which mixes them; dump attn.q/attn.k/attn.v or attn.core (o_proj's input) for per-head numbers");
		return;
	}
	n = c->cell.id == TB_TAP_ATTN_K || c->cell.id == TB_TAP_ATTN_V ? out->kv : out->q;
	if (n <= 0) {
		snprintf(out->note, sizeof out->note,
			 "head count unknown: give --heads N (and --kv-heads N for GQA), or :heads N in the interactive view");
		return;
	}
	split(c, n, &seq, out);
}
