#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare/inspect.h"

/* Elements decoded per block while streaming a pair. */
#define BLOCK (1u << 14)

typedef void (*block_fn)(void *ud, const float *r, const float *c, size_t n, uint64_t base);

typedef struct stream {
	const tb_cell_result *cell;
	const float *dr, *dc; /* in-place float32 data, when the tensors have it */
	float *br, *bc;       /* decode buffers otherwise */
	uint64_t n;           /* elements both sides have */
} stream;

static void cell_label(const tb_cell_result *c, char *buf, size_t size)
{
	tb_cell_name(&c->cell, buf, size);
}

/* Acquire both tensors.  Acquire is reference counted and thread-safe; the
 * const of the cell result only says the comparison does not change them. */
static int stream_open(stream *s, const tb_cell_result *c, tb_err *err)
{
	char name[TB_CELL_NAME_MAX];

	memset(s, 0, sizeof *s);
	s->cell = c;
	if (!c->ref || !c->cand) {
		cell_label(c, name, sizeof name);
		return tb_err_setc(err, TB_ERR_USAGE, NULL, "cell %s is present on one side only", name);
	}
	if (tb_tensor_acquire(c->ref, err) < 0)
		return -1;
	if (tb_tensor_acquire(c->cand, err) < 0) {
		tb_tensor_release(c->ref);
		return -1;
	}
	s->dr = tb_tensor_f32_direct(c->ref);
	s->dc = tb_tensor_f32_direct(c->cand);
	s->br = malloc(BLOCK * sizeof *s->br);
	s->bc = malloc(BLOCK * sizeof *s->bc);
	s->n = c->ref->numel < c->cand->numel ? c->ref->numel : c->cand->numel;
	if (!s->br || !s->bc) {
		free(s->br);
		free(s->bc);
		tb_tensor_release(c->ref);
		tb_tensor_release(c->cand);
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	return 0;
}

static void stream_close(stream *s)
{
	free(s->br);
	free(s->bc);
	tb_tensor_release(s->cell->ref);
	tb_tensor_release(s->cell->cand);
}

/* Hand elements [start, start+n) to fn, in blocks. */
static void stream_range(stream *s, uint64_t start, uint64_t n, block_fn fn, void *ud)
{
	if (start >= s->n)
		return;
	if (n > s->n - start)
		n = s->n - start;
	for (uint64_t off = 0; off < n; off += BLOCK) {
		size_t k = (size_t)(n - off < BLOCK ? n - off : BLOCK);
		uint64_t at = start + off;
		const float *r = s->dr ? s->dr + at : s->br, *c = s->dc ? s->dc + at : s->bc;
		if (!s->dr)
			tb_tensor_read_f32(s->cell->ref, at, k, s->br);
		if (!s->dc)
			tb_tensor_read_f32(s->cell->cand, at, k, s->bc);
		fn(ud, r, c, k, at);
	}
}

static double elem_diff(float r, float c)
{
	if (isfinite(r) && isfinite(c))
		return fabs((double)c - (double)r);
	if ((isnan(r) && isnan(c)) || (isinf(r) && r == c))
		return 0;
	return INFINITY;
}

/* The k worst elements seen so far, sorted worst first. */
typedef struct topk {
	tb_elem *v;
	size_t k, n;
} topk;

static void topk_offer(topk *t, uint64_t index, float r, float c, double d)
{
	size_t at;

	if (t->k == 0 || (t->n == t->k && !(d > t->v[t->n - 1].diff)))
		return;
	at = t->n < t->k ? t->n : t->k - 1;
	/* Indices arrive in increasing order, so an equal diff stays behind. */
	while (at > 0 && t->v[at - 1].diff < d) {
		t->v[at] = t->v[at - 1];
		at--;
	}
	t->v[at] = (tb_elem){index, r, c, d};
	if (t->n < t->k)
		t->n++;
}

typedef struct diff_pass {
	topk top;
	tb_diff_hist *hist;
} diff_pass;

static void hist_add(tb_diff_hist *h, float r, float c, double d)
{
	int e;

	if (!isfinite(r) || !isfinite(c)) {
		h->nonfinite++;
		return;
	}
	if (d == 0) {
		h->zero++;
		return;
	}
	/* The decade, corrected where log10 rounds across an exact power of ten. */
	e = (int)floor(log10(d));
	if (pow(10, e) > d)
		e--;
	else if (pow(10, e + 1) <= d)
		e++;
	e -= TB_HIST_LO;
	if (e < 0)
		h->below++;
	else if (e >= TB_HIST_BINS)
		h->above++;
	else
		h->bins[e]++;
}

static void diff_block(void *ud, const float *r, const float *c, size_t n, uint64_t base)
{
	diff_pass *p = ud;

	for (size_t i = 0; i < n; i++) {
		double d = elem_diff(r[i], c[i]);
		if (p->hist)
			hist_add(p->hist, r[i], c[i], d);
		topk_offer(&p->top, base + i, r[i], c[i], d);
	}
}

int tb_inspect_diff(const tb_cell_result *c, size_t k, tb_elem *worst, size_t *n_out, tb_diff_hist *hist,
		    tb_err *err)
{
	diff_pass p = {{worst, worst ? k : 0, 0}, hist};
	stream s;

	if (n_out)
		*n_out = 0;
	if (hist)
		memset(hist, 0, sizeof *hist);
	if (stream_open(&s, c, err) < 0)
		return -1;
	stream_range(&s, 0, s.n, diff_block, &p);
	stream_close(&s);
	if (n_out)
		*n_out = p.top.n;
	/* a partial dump's elements by their place in the whole tensor */
	for (size_t i = 0; tb_cell_partial(c) && i < p.top.n; i++)
		worst[i].index = tb_cell_partial(c)->index[worst[i].index];
	return 0;
}

/* Row length and positions as the comparison saw them: the last axis is a
 * row, the one before it the position (of the whole tensor, for a
 * partial dump). */
static int position_geometry(const tb_cell_result *c, uint64_t *row_len, int64_t *n_pos)
{
	int64_t sq[TB_MAX_DIMS];
	int nr = tb_shape_squeeze(c->ndim, c->shape, sq);

	if (nr < 2 || sq[nr - 1] <= 0 || sq[nr - 2] <= 0)
		return -1;
	*row_len = (uint64_t)sq[nr - 1];
	*n_pos = sq[nr - 2];
	return 0;
}

static void topk_block(void *ud, const float *r, const float *c, size_t n, uint64_t base)
{
	topk *t = ud;

	for (size_t i = 0; i < n; i++)
		topk_offer(t, base + i, r[i], c[i], elem_diff(r[i], c[i]));
}

/* A partial dump's elements of one position, offered by their place in
 * the whole tensor. */
typedef struct printed_pos {
	topk *top;
	const tb_partial *pa;
	uint64_t row_len, n_pos, pos;
} printed_pos;

static void printed_block(void *ud, const float *r, const float *c, size_t n, uint64_t base)
{
	printed_pos *pp = ud;

	for (size_t i = 0; i < n; i++) {
		uint64_t at = pp->pa->index[base + i];
		if (at / pp->row_len % pp->n_pos == pp->pos)
			topk_offer(pp->top, at, r[i], c[i], elem_diff(r[i], c[i]));
	}
}

int tb_inspect_position(const tb_cell_result *c, int64_t pos, size_t k, tb_elem *worst, size_t *n_out,
			tb_err *err)
{
	topk t = {worst, k, 0};
	uint64_t row_len;
	int64_t n_pos;
	char name[TB_CELL_NAME_MAX];
	stream s;

	*n_out = 0;
	if (stream_open(&s, c, err) < 0)
		return -1;
	if (position_geometry(c, &row_len, &n_pos) < 0 || pos < 0 || pos >= n_pos) {
		stream_close(&s);
		cell_label(c, name, sizeof name);
		return tb_err_setc(err, TB_ERR_USAGE, NULL, "cell %s has no position %lld", name, (long long)pos);
	}
	if (tb_cell_partial(c)) {
		printed_pos pp = {&t, tb_cell_partial(c), row_len, (uint64_t)n_pos, (uint64_t)pos};
		stream_range(&s, 0, s.n, printed_block, &pp);
	} else {
		for (uint64_t row = (uint64_t)pos; row * row_len < s.n; row += (uint64_t)n_pos)
			stream_range(&s, row * row_len, row_len, topk_block, &t);
	}
	stream_close(&s);
	*n_out = t.n;
	return 0;
}

tb_head_layout tb_head_layout_of(const tb_cell_result *c, int n_heads, int64_t head_dim)
{
	const tb_tensor *t = c->ref ? c->ref : c->cand;
	int64_t sq[TB_MAX_DIMS];
	int nr;

	if (!t || n_heads < 1 || head_dim < 1)
		return TB_HEADS_NONE;
	nr = tb_tensor_squeezed(t, sq);
	if (nr >= 2 && sq[nr - 1] == (int64_t)n_heads * head_dim)
		return TB_HEADS_LAST;
	if (nr >= 3 && sq[nr - 3] == n_heads && sq[nr - 1] == head_dim)
		return TB_HEADS_SPLIT;
	if (nr >= 3 && sq[nr - 2] == n_heads && sq[nr - 1] == head_dim)
		return TB_HEADS_INNER;
	return TB_HEADS_NONE;
}

typedef struct head_acc {
	double sdd, srr, scc, src, max_abs;
} head_acc;

typedef struct head_pass {
	head_acc *acc;
	int n_heads;
	uint64_t inner; /* elements per head block: head = (index / inner) % n_heads */
} head_pass;

static void head_block(void *ud, const float *r, const float *c, size_t n, uint64_t base)
{
	head_pass *p = ud;

	for (size_t i = 0; i < n; i++) {
		head_acc *a = &p->acc[((base + i) / p->inner) % (uint64_t)p->n_heads];
		double rv = r[i], cv = c[i], d = cv - rv;
		if (!isfinite(rv) || !isfinite(cv))
			continue;
		a->sdd += d * d;
		a->srr += rv * rv;
		a->scc += cv * cv;
		a->src += rv * cv;
		if (fabs(d) > a->max_abs)
			a->max_abs = fabs(d);
	}
}

int tb_inspect_heads(const tb_cell_result *c, int n_heads, int64_t head_dim, tb_head_metrics *out, tb_err *err)
{
	tb_head_layout lay = tb_head_layout_of(c, n_heads, head_dim);
	head_pass p = {NULL, n_heads, (uint64_t)head_dim};
	int64_t sq[TB_MAX_DIMS];
	char name[TB_CELL_NAME_MAX], shape[128];
	stream s;

	if (lay == TB_HEADS_NONE) {
		cell_label(c, name, sizeof name);
		if (c->ref)
			tb_shape_format(c->ref->ndim, c->ref->shape, shape, sizeof shape);
		else
			snprintf(shape, sizeof shape, "?");
		return tb_err_setc(err, TB_ERR_FORMAT, NULL, "cell %s: shape %s does not split into %d heads of %lld", name, shape,
				  n_heads, (long long)head_dim);
	}
	if (lay == TB_HEADS_SPLIT) {
		int nr = tb_tensor_squeezed(c->ref, sq);
		p.inner = (uint64_t)(sq[nr - 2] * head_dim);
	}
	p.acc = calloc((size_t)n_heads, sizeof *p.acc);
	if (!p.acc)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	if (stream_open(&s, c, err) < 0) {
		free(p.acc);
		return -1;
	}
	stream_range(&s, 0, s.n, head_block, &p);
	stream_close(&s);
	for (int h = 0; h < n_heads; h++) {
		const head_acc *a = &p.acc[h];
		out[h].rel_l2 = tb_rel_l2(a->sdd, a->srr);
		out[h].cosine = tb_cosine(a->src, a->srr, a->scc);
		out[h].norm_ratio = tb_norm_ratio(a->scc, a->srr);
		out[h].max_abs = a->max_abs;
	}
	free(p.acc);
	return 0;
}
