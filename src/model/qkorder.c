#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/qkorder.h"
#include "tensor/compose.h"

/* Where a llama.cpp query or key's elements go in the other side's order. */
typedef struct qk_map {
	int64_t S, H, hd;
	bool heads_first; /* the other side is [heads, S, d] */
	bool undo;        /* put each head's channels back in Hugging Face's order */
	bool gguf;        /* g is llama.cpp's (else only the axes differ) */
	bool g_split;     /* g is [S, heads, d] (else [S, heads*d]) */
} qk_map;

/* The whole tensor's shape (a partial dump's whole one), squeezed. */
static int squeezed(const tb_tensor *t, int64_t *out)
{
	return t->partial ? tb_shape_squeeze(t->partial->ndim, t->partial->shape, out) : tb_tensor_squeezed(t, out);
}

/* g's elements in o's order, g's heads of hd channels; gguf: g is
 * llama.cpp's (hd even, o not llama.cpp's). */
static bool make_map(const tb_tensor *g, const tb_tensor *o, int64_t hd, bool gguf, qk_map *m)
{
	int64_t sg[TB_MAX_DIMS], so[TB_MAX_DIMS];
	int ng = squeezed(g, sg), no = squeezed(o, so);

	memset(m, 0, sizeof *m);
	m->hd = hd;
	m->gguf = gguf;
	m->g_split = ng == 3;
	if (m->hd < 1 || (gguf && (m->hd < 2 || m->hd % 2 || o->gguf_qk_head_dim)) || o->partial)
		return false;
	if (ng == 2 && sg[1] % m->hd == 0) {
		m->S = sg[0];
		m->H = sg[1] / m->hd;
	} else if (ng == 3 && sg[2] == m->hd) {
		m->S = sg[0];
		m->H = sg[1];
	} else {
		return false;
	}
	if (no == 2)
		return so[0] == m->S && so[1] == m->H * m->hd;
	if (no != 3 || so[2] != m->hd)
		return false;
	/* Hugging Face's RoPE output is [1, heads, S, d]: read so when both fit */
	if (so[0] == m->H && so[1] == m->S) {
		m->heads_first = true;
		return true;
	}
	return so[0] == m->S && so[1] == m->H;
}

bool tb_qkorder_fits(const tb_tensor *g, const tb_tensor *o)
{
	qk_map m;

	return make_map(g, o, g->gguf_qk_head_dim, true, &m);
}

/* The other side's flat index of g's flat element gi. */
static uint64_t target(const qk_map *m, uint64_t gi)
{
	uint64_t C = (uint64_t)(m->H * m->hd), s = gi / C, c = gi % C, h = c / (uint64_t)m->hd,
		 j = c % (uint64_t)m->hd;

	if (m->undo)
		j = j % 2 == 0 ? j / 2 : (uint64_t)m->hd / 2 + j / 2;
	return m->heads_first ? (h * (uint64_t)m->S + s) * (uint64_t)m->hd + j : s * C + h * (uint64_t)m->hd + j;
}

static const char *note_of(const qk_map *m)
{
	if (!m->gguf)
		return m->heads_first ? (m->g_split ? "[S, heads, d] read as [heads, S, d]" : "[S, heads*d] read as [heads, S, d]")
				      : (m->g_split ? "[S, heads, d] read as [S, heads*d]" : "[S, heads*d] read as [S, heads, d]");
	if (m->undo)
		return m->heads_first ? "llama.cpp's channels of each head put back in Hugging Face's order (undoing the "
					"permutation convert_hf_to_gguf applies for llama.cpp's RoPE), and its [S, heads, d] "
					"read as [heads, S, d]"
				      : "llama.cpp's channels of each head put back in Hugging Face's order (undoing the "
					"permutation convert_hf_to_gguf applies for llama.cpp's RoPE)";
	return m->heads_first ? "llama.cpp's channels in their own order (they agree better so than with "
				"convert_hf_to_gguf's permutation undone), its [S, heads, d] read as [heads, S, d]"
			      : "llama.cpp's channels in their own order (they agree better so than with "
				"convert_hf_to_gguf's permutation undone)";
}

/* pairs (target, source) sorted by target */
typedef struct moved {
	uint64_t to, from;
} moved;

static int cmp_moved(const void *a, const void *b)
{
	const moved *x = a, *y = b;

	return (x->to > y->to) - (x->to < y->to);
}

static int partial_view(tb_tensor *g, const tb_tensor *o, const qk_map *m, tb_tensor **out, tb_err *err)
{
	const tb_partial *pa = g->partial;
	uint64_t n = pa->n, *order = malloc(n ? n * sizeof *order : 1), *index = malloc(n ? n * sizeof *index : 1);
	moved *mv = malloc(n ? n * sizeof *mv : 1);
	int rc;

	if (!order || !mv || !index) {
		rc = tb_err_setc(err, TB_ERR_NOMEM, g->path, "out of memory");
		goto out;
	}
	for (uint64_t k = 0; k < n; k++)
		mv[k] = (moved){target(m, pa->index[k]), k};
	qsort(mv, n, sizeof *mv, cmp_moved);
	for (uint64_t k = 0; k < n; k++) {
		order[k] = mv[k].from;
		index[k] = mv[k].to;
	}
	rc = tb_compose_partial(g, order, index, n, o->ndim, o->shape, g->name, out, err);
out:
	free(order);
	free(index);
	free(mv);
	return rc;
}

static int whole_view(tb_tensor *g, const tb_tensor *o, const qk_map *m, tb_tensor **out, tb_err *err)
{
	uint64_t *inv = malloc(g->numel ? g->numel * sizeof *inv : 1);
	int rc;

	if (!inv)
		return tb_err_setc(err, TB_ERR_NOMEM, g->path, "out of memory");
	for (uint64_t i = 0; i < g->numel; i++)
		inv[target(m, i)] = i;
	rc = tb_compose_gather_as(g, inv, o->ndim, o->shape, g->name, out, err);
	free(inv);
	return rc;
}

static int view(tb_tensor *g, const tb_tensor *o, qk_map *m, tb_tensor **out, tb_err *err)
{
	int rc = g->partial ? partial_view(g, o, m, out, err) : whole_view(g, o, m, out, err);

	if (rc == 0)
		(*out)->note = note_of(m);
	return rc;
}

int tb_qkorder_view(tb_tensor *g, const tb_tensor *o, bool undo, tb_tensor **out, tb_err *err)
{
	qk_map m;

	*out = NULL;
	if (!make_map(g, o, g->gguf_qk_head_dim, true, &m))
		return tb_err_setc(err, TB_ERR_FORMAT, g->path, "'%s' cannot be read in the order of '%s'", g->name, o->name);
	m.undo = undo;
	return view(g, o, &m, out, err);
}

/* The channels per head two tensors of one head cell say they have: the
 * last axis of one laid out as [S, heads, d] or [heads, S, d]; 0 when
 * neither says, or they disagree. */
static int64_t head_dim(const tb_tensor *a, const tb_tensor *b)
{
	int64_t sa[TB_MAX_DIMS], sb[TB_MAX_DIMS];
	int na = squeezed(a, sa), nb = squeezed(b, sb);

	if (na == 3 && nb == 3)
		return sa[2] == sb[2] ? sa[2] : 0;
	return na == 3 ? sa[2] : nb == 3 ? sb[2] : 0;
}

int tb_heads_view(tb_tensor *a, tb_tensor *b, tb_tensor **which, tb_tensor **out, tb_err *err)
{
	int64_t sa[TB_MAX_DIMS], sb[TB_MAX_DIMS];
	int na = squeezed(a, sa), nb = squeezed(b, sb);
	int64_t hd = head_dim(a, b);
	qk_map m;

	*out = NULL;
	*which = NULL;
	if (hd < 1 || a->gguf_qk_head_dim || b->gguf_qk_head_dim || a->sketch || b->sketch ||
	    (na == nb && !memcmp(sa, sb, (size_t)na * sizeof *sa)))
		return 0;
	/* the side whose positions come first, seen in the other's layout */
	if (!b->partial && make_map(b, a, hd, false, &m)) {
		*which = b;
		return view(b, a, &m, out, err);
	}
	if (!a->partial && make_map(a, b, hd, false, &m)) {
		*which = a;
		return view(a, b, &m, out, err);
	}
	return 0;
}

/* Values read whole into a malloc'd buffer, or NULL. */
static float *read_all(tb_tensor *t)
{
	tb_err err;
	float *v = malloc(t->numel ? t->numel * sizeof *v : 1);

	if (!v || tb_tensor_acquire(t, &err) < 0) {
		free(v);
		return NULL;
	}
	tb_tensor_read_f32(t, 0, t->numel, v);
	tb_tensor_release(t);
	return v;
}

double tb_qkorder_rel_l2(tb_tensor *v, tb_tensor *o)
{
	float *a = read_all(v), *b = read_all(o);
	double d = 0, r = 0;

	if (!a || !b) {
		free(a);
		free(b);
		return NAN;
	}
	for (uint64_t k = 0; k < v->numel; k++) {
		uint64_t at = v->partial ? v->partial->index[k] : k;
		double x = a[k], y = at < o->numel ? b[at] : NAN;
		d += (x - y) * (x - y);
		r += y * y;
	}
	free(a);
	free(b);
	return r > 0 ? sqrt(d / r) : NAN;
}
