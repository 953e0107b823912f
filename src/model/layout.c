#include "config.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/sidecar.h"
#include "model/layout.h"
#include "model/trtllm.h"
#include "tensor/compose.h"
#include "tensor/view.h"

#define MAX_TAG 1000000
/* Room for a raw name (TB_MAX_NAME) and a suffix. */
#define NAME_ROOM 4200

/* A tensor of the tree with its tags stripped. */
typedef struct entry {
	tb_tensor *t;
	char *base; /* name without rank and step tags (owned) */
	int rank;   /* -1: untagged */
	int step;   /* -1: untagged */
	int phase;  /* 1: a disaggregated decode process's (pd_decode), whose steps follow the prefill's */
} entry;

/* The step in progress: what it made and what it keeps. */
typedef struct lay {
	tb_tree *tree;
	const tb_namer *namer;
	const tb_layout_opts *o;
	char shared[1024];
	entry *e;
	size_t n;
	tb_tensor **made;
	size_t n_made, cap_made;
	int64_t core_shard; /* one rank's attn.core width (core_width), once known */
	bool core_known;
} lay;

void tb_layout_opts_init(tb_layout_opts *o)
{
	memset(o, 0, sizeof *o);
	o->step = -1;
	o->rank = -1;
}

/* s[0..n) is a decimal number below MAX_TAG. */
static bool number(const char *s, size_t n, int *out)
{
	long v = 0;

	if (n == 0 || n > 6)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = (int)v;
	return v < MAX_TAG;
}

/* c[0..n) is word, an optional '_' or '-', and a number. */
static bool word_number(const char *c, size_t n, const char *word, int *out)
{
	size_t w = strlen(word);

	if (n <= w || strncmp(c, word, w))
		return false;
	if (c[w] == '_' || c[w] == '-')
		w++;
	return number(c + w, n - w, out);
}

/* The words a tag component starts with, as dumpers spell them (NULL-ended). */
static const char *const step_words[] = {"step", "forward_pass_id", "forward_pass", "fwd", NULL};
static const char *const rank_words[] = {"rank", "tp_rank", "tp", NULL};

/* Is the component c[0..n) one of words and a number (into *v)? */
static bool tag(const char *c, size_t n, const char *const *words, int *v)
{
	for (; *words; words++)
		if (word_number(c, n, *words, v))
			return true;
	return false;
}

/* A component that ends in a rank tag ("mlp_rank1", "out-tp-0", vLLM's
 * device "outputs_0_cuda_1", or "outputs_cpu": no rank): the length of
 * what precedes the tag, or 0. */
static size_t rank_suffix(const char *c, size_t n, int *rank)
{
	static const char *const words[] = {"rank", "tp"};
	size_t vllm = tb_vllm_record_stem(c, n, rank);

	if (vllm)
		return vllm;
	for (size_t i = n; i-- > 1;) {
		if (c[i - 1] != '_' && c[i - 1] != '-')
			continue;
		for (size_t k = 0; k < sizeof words / sizeof *words; k++)
			if (word_number(c + i, n - i, words[k], rank))
				return i - 1;
	}
	return 0;
}

/* name without its tags into base; the tags into rank, step and phase
 * (a component "pd_decode" or "pd_prefill": which process of a
 * prefill/decode-disaggregated server wrote it, formats/sglang.c). */
static void strip_tags(const char *name, char *base, size_t size, int *rank, int *step, int *phase)
{
	size_t len = 0;

	*rank = -1;
	*step = -1;
	*phase = 0;
	base[0] = '\0';
	while (*name) {
		size_t n = strcspn(name, "."), keep = n;
		int v;
		if ((n == 9 && !strncmp(name, "pd_decode", 9)) || (n == 10 && !strncmp(name, "pd_prefill", 10))) {
			*phase = n == 9;
			keep = 0;
		} else if (tag(name, n, step_words, &v)) {
			*step = v;
			keep = 0;
		} else if (tag(name, n, rank_words, &v)) {
			*rank = v;
			keep = 0;
		} else if ((keep = rank_suffix(name, n, &v)) > 0) {
			*rank = v;
		} else {
			keep = n;
		}
		if (keep > 0 && len + keep + 2 < size) {
			if (len)
				base[len++] = '.';
			memcpy(base + len, name, keep);
			len += keep;
			base[len] = '\0';
		}
		name += n;
		if (*name == '.')
			name++;
	}
}

/* Is a parallel axis of SGLang's dims DSL a tensor-parallel one? */
static bool tp_axis(const char *a, size_t n)
{
	static const char *const axes[] = {"tp", "attn_tp", "moe_tp", "etp"};

	for (size_t i = 0; i < sizeof axes / sizeof *axes; i++)
		if (n == strlen(axes[i]) && !strncmp(a, axes[i], n))
			return true;
	return false;
}

/* A dims spec: one token per dim, the split one marked [tp] (SGLang's DSL:
 * "t h[tp]", "t attn_h[attn_tp]", "t h[tp:partial]", fused "(a*b)[tp]",
 * then "# tp:replicated" and other notes after '#').  A dim whose
 * modifiers name a tensor-parallel axis with the qualifier "partial" makes
 * the ranks summed; with none marked, they are replicated.  Returns -1
 * with why (a static text) when the spec does not parse. */
static int parse_dims(const char *spec, tb_shard_kind *kind, int *axis, int *ndim, const char **why)
{
	const char *p = spec;
	int dims = 0;

	*axis = -1;
	*kind = TB_SHARD_REPLICATED;
	while (*p && *p != '#') {
		size_t n;
		if (*p == ' ') {
			p++;
			continue;
		}
		if (*p == '(') {
			n = strcspn(p, ")");
			if (!p[n]) {
				*why = "a '(' without ')'";
				return -1;
			}
			n++;
		} else {
			n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
		}
		if (n == 0) {
			*why = "a dim is not a name (write 's h[tp]', 'partial' or 'replicated')";
			return -1;
		}
		p += n;
		if (*p == '[') {
			const char *end = strchr(p, ']');
			if (!end) {
				*why = "a '[' without ']'";
				return -1;
			}
			for (const char *m = p + 1; m < end;) {
				size_t len = strcspn(m, ",]"), an = strcspn(m, ":,]");
				if (tp_axis(m, an)) {
					if (*axis >= 0) {
						*why = "more than one dim is split on tp";
						return -1;
					}
					*axis = dims;
					*kind = memmem(m, len, "partial", 7) ? TB_SHARD_PARTIAL : TB_SHARD_SPLIT;
				}
				m += len + (m[len] == ',');
			}
			p = end + 1;
		}
		if (*p && *p != ' ' && *p != '#') {
			*why = "unexpected text after a dim";
			return -1;
		}
		if (++dims > TB_MAX_DIMS) {
			*why = "more dims than a tensor can have";
			return -1;
		}
	}
	*ndim = dims;
	return 0;
}

int tb_shard_parse(const char *arg, tb_shard_rule *out, tb_err *err)
{
	const char *eq = strchr(arg, '='), *spec, *why = NULL;

	memset(out, 0, sizeof *out);
	if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof out->tap)
		return tb_err_setc(err, TB_ERR_USAGE, NULL, "--shard '%s': expected TAP=SPEC (attn.o=partial, mlp.act='s h[tp]')", arg);
	memcpy(out->tap, arg, (size_t)(eq - arg));
	if (!tb_tap_valid(out->tap))
		return tb_err_setc(err, TB_ERR_USAGE, NULL, "--shard '%s': unknown tap '%s'", arg, out->tap);
	spec = eq + 1;
	if (strlen(spec) >= sizeof out->spec)
		return tb_err_setc(err, TB_ERR_USAGE, NULL, "--shard '%s': spec too long", arg);
	strcpy(out->spec, spec);
	if (!strcmp(spec, "partial")) {
		out->kind = TB_SHARD_PARTIAL;
		return 0;
	}
	if (!strcmp(spec, "replicated")) {
		out->kind = TB_SHARD_REPLICATED;
		return 0;
	}
	if (parse_dims(spec, &out->kind, &out->axis, &out->ndim, &why) < 0)
		return tb_err_setc(err, TB_ERR_USAGE, NULL, "--shard '%s': %s", arg, why);
	if (out->axis < 0)
		return tb_err_setc(err, TB_ERR_USAGE, NULL, "--shard '%s': no dim is marked [tp] (or say partial / replicated)", arg);
	return 0;
}

static int keep_made(lay *L, tb_tensor *t, tb_err *err)
{
	if (L->n_made == L->cap_made) {
		size_t cap = L->cap_made ? 2 * L->cap_made : 64;
		tb_tensor **m = realloc(L->made, cap * sizeof *m);
		if (!m) {
			tb_view_free(t);
			return tb_err_setc(err, TB_ERR_NOMEM, L->tree->path, "out of memory");
		}
		L->made = m;
		L->cap_made = cap;
	}
	L->made[L->n_made++] = t;
	return 0;
}

typedef struct diff_ctx {
	bool same;  /* bit for bit, as float32 */
	double max; /* the largest |a - b| (infinite at a NaN) */
} diff_ctx;

static int diff_block(void *ctx, const float *x, const float *y, size_t n, uint64_t off)
{
	diff_ctx *d = ctx;

	(void)off;
	if (memcmp(x, y, n * sizeof *x))
		d->same = false;
	for (size_t k = 0; k < n; k++) {
		double e = fabs((double)x[k] - (double)y[k]);
		if (e > d->max || isnan(e))
			d->max = isnan(e) ? INFINITY : e;
	}
	return 0;
}

/* Are a and b equal value for value?  *max_diff: the largest |a - b|. */
static int same_values(tb_tensor *a, tb_tensor *b, bool *equal, double *max_diff, tb_err *err)
{
	diff_ctx d = {true, 0};
	const void *pa, *pb;
	bool bytes_equal;

	*equal = false;
	*max_diff = INFINITY;
	if (a->numel != b->numel || a->ndim != b->ndim || memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape))
		return 0;
	/* replicated ranks usually are: compare their bytes in place first */
	if (tb_tensor_acquire(a, err) < 0)
		return -1;
	if (tb_tensor_acquire(b, err) < 0) {
		tb_tensor_release(a);
		return -1;
	}
	pa = tb_tensor_data(a);
	pb = tb_tensor_data(b);
	bytes_equal = pa && pb && a->dtype == b->dtype && !memcmp(pa, pb, a->numel * tb_dtype_size(a->dtype));
	tb_tensor_release(a);
	tb_tensor_release(b);
	if (!bytes_equal && tb_tensor_pair_blocks(a, b, 0, diff_block, &d, err) < 0)
		return -1;
	*equal = d.same;
	*max_diff = d.max;
	return 0;
}

static void append(char *buf, size_t size, const char *text)
{
	size_t len = strlen(buf), add = strlen(text);

	if (len + 2 + add >= size)
		return; /* the first disagreements are enough to name */
	if (len) {
		memcpy(buf + len, "; ", 2);
		len += 2;
	}
	memcpy(buf + len, text, add + 1);
}

/* The cell an entry's base name (or its role) maps to, or an invalid cell. */
static tb_cell cell_of(const lay *L, const entry *e)
{
	tb_cell c;

	if (!tb_namer_map_role(L->namer, e->base, e->t->role, L->shared, &c, NULL, NULL, 0))
		tb_cell_make(&c, -1, "");
	return c;
}

typedef enum join_kind { JOIN_SPLIT, JOIN_PARTIAL, JOIN_REPLICATED, JOIN_AUTO, JOIN_FUSED } join_kind;

/* How the ranks of a tensor of this cell join (and on which axis). */
static join_kind join_of(const tb_layout_opts *o, const tb_cell *c, const tb_tensor *t, int *axis, const char **spec,
			 tb_err *err)
{
	*axis = t->ndim - 1;
	*spec = NULL;
	for (size_t i = 0; i < o->n_shards; i++) {
		const tb_shard_rule *r = &o->shards[i];
		if (strcmp(r->tap, c->tap))
			continue;
		*spec = r->spec;
		if (r->kind == TB_SHARD_PARTIAL)
			return JOIN_PARTIAL;
		if (r->kind == TB_SHARD_REPLICATED)
			return JOIN_REPLICATED;
		if (r->ndim != t->ndim) {
			char shape[128];
			tb_shape_format(t->ndim, t->shape, shape, sizeof shape);
			tb_err_setc(err, TB_ERR_FORMAT, t->path, "--shard %s='%s' names %d dims, but '%s' has shape %s", r->tap, r->spec,
				   r->ndim, t->name, shape);
			return -1;
		}
		*axis = r->axis;
		return r->kind == TB_SHARD_PARTIAL ? JOIN_PARTIAL : JOIN_SPLIT;
	}
	if (t->dims) {
		tb_shard_kind kind;
		int ndim;
		const char *why;
		*spec = t->dims;
		if (parse_dims(t->dims, &kind, axis, &ndim, &why) < 0 || ndim != t->ndim) {
			tb_err_setc(err, TB_ERR_FORMAT, t->path, "'%s': the dump's dims '%s' %s", t->name, t->dims,
				   ndim != t->ndim ? "do not name one dim per axis" : why);
			return -1;
		}
		return kind == TB_SHARD_PARTIAL ? JOIN_PARTIAL : kind == TB_SHARD_SPLIT ? JOIN_SPLIT : JOIN_REPLICATED;
	}
	switch (c->id) {
	case TB_TAP_ATTN_Q:
	case TB_TAP_ATTN_K:
	case TB_TAP_ATTN_V:
	case TB_TAP_ATTN_Q_ROPE:
	case TB_TAP_ATTN_K_ROPE:
	case TB_TAP_ATTN_CORE:
	case TB_TAP_MLP_GATE:
	case TB_TAP_MLP_UP:
	case TB_TAP_MLP_ACT:
		return JOIN_SPLIT;
	case TB_TAP_ATTN_O:
	case TB_TAP_MLP_DOWN:
	case TB_TAP_ATTN:
	case TB_TAP_MLP:
		return JOIN_AUTO;
	case TB_TAP_ATTN_QKV:
	case TB_TAP_MLP_GATE_UP:
		return JOIN_FUSED;
	default:
		return JOIN_REPLICATED;
	}
}

/* The width of one rank's shard of attn.core (any layer's: the head
 * counts are the model's), or 0; found once per tree. */
static int64_t core_width(lay *L)
{
	if (L->core_known)
		return L->core_shard;
	L->core_known = true;
	for (size_t i = 0; i < L->n; i++) {
		const entry *e = &L->e[i];
		/* NULL: an entry already joined into another; rank -1: joined */
		if (!e->base || e->t->ndim < 1 || cell_of(L, e).id != TB_TAP_ATTN_CORE)
			continue;
		int64_t w = e->t->shape[e->t->ndim - 1];
		L->core_shard = e->rank >= 0 ? w : w % L->tree->layout.ranks ? 0 : w / L->tree->layout.ranks;
		break;
	}
	return L->core_shard;
}

/* Column widths of one rank's shard t of a fused projection named base:
 * gate and up halves, or q, k and v in the proportion of the head counts
 * (else of the other tree's q and k widths, else q as wide as core, the
 * shard of attn.core beside it; 0: unknown). */
static int split_fused(const tb_layout_opts *o, const tb_tensor *t, const char *base, bool qkv, int64_t core,
		       int64_t *w, tb_err *err)
{
	int64_t width = t->shape[t->ndim - 1];

	if (!qkv) {
		if (width % 2)
			return tb_err_setc(err, TB_ERR_FORMAT, t->path, "'%s': a gate_up shard of odd width %lld", t->name, (long long)width);
		w[0] = w[1] = width / 2;
		return 0;
	}
	int64_t hq = o->heads, hkv = o->kv_heads;
	if (!(hq > 0 && hkv > 0)) {
		hq = o->q_width;
		hkv = o->kv_width;
	}
	if (hq > 0 && hkv > 0) {
		int64_t all = hq + 2 * hkv;
		if ((width * hkv) % all == 0) {
			w[1] = w[2] = width * hkv / all;
			w[0] = width - 2 * w[1];
			return 0;
		}
	}
	if (core > 0 && core < width && (width - core) % 2 == 0) {
		w[0] = core;
		w[1] = w[2] = (width - core) / 2;
		return 0;
	}
	return tb_err_setc(err, TB_ERR_USAGE, t->path,
			  "'%s': joining the shards of a fused qkv projection needs --heads and --kv-heads (or the attention output dumped beside it)",
			  base);
}

static bool head_counts(const tb_layout_opts *o)
{
	return (o->heads > 0 && o->kv_heads > 0) || (o->q_width > 0 && o->kv_width > 0);
}

static int fused_widths(lay *L, const entry *g, bool qkv, int64_t *w, tb_err *err)
{
	return split_fused(L->o, g->t, g->base, qkv, qkv && !head_counts(L->o) ? core_width(L) : 0, w, err);
}

/* The ranks g[0..n) of one fused projection: each shard cut into its
 * projections, each projection joined across ranks, then put side by side. */
static int join_fused(lay *L, entry *g, int n, tb_tensor **out, tb_err *err)
{
	tb_cell c = cell_of(L, g);
	tb_tap_id ids[TB_MAX_PARTS];
	int np = tb_tap_parts(c.id, ids);
	bool qkv = c.id == TB_TAP_ATTN_QKV;
	tb_tensor *proj[TB_MAX_PARTS], *cols[64];
	char tag[32], name[NAME_ROOM];

	if (n > 64)
		return tb_err_setc(err, TB_ERR_LIMIT, g->t->path, "'%s': more than 64 ranks", g->base);
	for (int k = 0; k < np; k++) {
		tb_tap_part_tag(ids[k], tag, sizeof tag);
		for (int r = 0; r < n; r++) {
			int64_t w[3] = {0, 0, 0}, at = 0;
			if (fused_widths(L, &g[r], qkv, w, err) < 0)
				return -1;
			for (int j = 0; j < k; j++)
				at += w[j];
			if (tb_view_columns(g[r].t, at, w[k], tag, &cols[r], err) < 0 ||
			    keep_made(L, cols[r], err) < 0)
				return -1;
		}
		snprintf(name, sizeof name, "%s%s", g->base, tag);
		if (tb_compose_concat(cols, n, g->t->ndim - 1, name, &proj[k], err) < 0 || keep_made(L, proj[k], err) < 0)
			return -1;
	}
	if (tb_compose_concat(proj, np, g->t->ndim - 1, g->base, out, err) < 0)
		return -1;
	return keep_made(L, *out, err);
}

/* One tensor's ranks g[0..n), in rank order, joined into *out. */
static int join_ranks(lay *L, entry *g, int n, tb_tensor **out, tb_err *err)
{
	tb_tensor *parts[n];
	tb_cell c = cell_of(L, g);
	int axis;
	const char *spec;
	join_kind kind = join_of(L->o, &c, g->t, &axis, &spec, err);
	char text[384];

	if ((int)kind < 0)
		return -1;
	for (int r = 0; r < n; r++)
		parts[r] = g[r].t;
	*out = parts[0];
	if (n == 1)
		return 0;
	if (kind == JOIN_FUSED)
		return join_fused(L, g, n, out, err);
	if (kind == JOIN_SPLIT) {
		if (tb_compose_concat(parts, n, axis, g->base, out, err) < 0)
			return -1;
		return keep_made(L, *out, err);
	}
	if (kind == JOIN_PARTIAL) {
		if (tb_compose_sum(parts, n, g->base, out, err) < 0)
			return -1;
		return keep_made(L, *out, err);
	}
	/* what a module was fed is no cell: its ranks are not checked */
	if (tb_name_is_aux(g->base))
		return 0;
	/* replicated, or row-parallel whose ranks tell which by their values */
	for (int r = 1; r < n; r++) {
		bool equal;
		double diff;
		if (same_values(parts[0], parts[r], &equal, &diff, err) < 0)
			return -1;
		if (equal)
			continue;
		if (kind == JOIN_AUTO && parts[0]->numel == parts[r]->numel) {
			/* ranks that differ hold partial sums (not yet all-reduced) */
			if (tb_compose_sum(parts, n, g->base, out, err) < 0)
				return -1;
			return keep_made(L, *out, err);
		}
		if (parts[0]->numel != parts[r]->numel)
			snprintf(text, sizeof text, "%s: rank %d's shape differs from rank 0's", g->base, r);
		else
			snprintf(text, sizeof text, "%s: ranks 0 and %d differ (max |diff| %.3g)", g->base, r, diff);
		append(L->tree->layout.replicas, sizeof L->tree->layout.replicas, text);
		break;
	}
	*out = parts[0];
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	const entry *x = a, *y = b;
	int c = strcmp(x->base, y->base);

	if (c)
		return c;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* A tree of one rank alone (o->rank): its rank tags must all be that
 * rank's, and name nothing to join. */
static int own_rank(lay *L, tb_err *err)
{
	for (size_t i = 0; i < L->n; i++) {
		if (L->e[i].rank >= 0 && L->e[i].rank != L->o->rank)
			return tb_err_setc(err, TB_ERR_USAGE, L->e[i].t->path, "'%s' is rank %d's, in a tree given as rank %d's alone (--rank)",
					  L->e[i].base, L->e[i].rank, L->o->rank);
		L->e[i].rank = -1;
	}
	return 0;
}

/* Join the ranks of every tensor; L->e then holds one entry per (base, step). */
static int join_all_ranks(lay *L, tb_err *err)
{
	int degree = 0;
	size_t w = 0;

	if (L->o->rank >= 0 && own_rank(L, err) < 0)
		return -1;
	for (size_t i = 0; i < L->n; i++)
		if (L->e[i].rank + 1 > degree)
			degree = L->e[i].rank + 1;
	if (degree == 0)
		return 0;
	L->tree->layout.ranks = degree;
	for (size_t i = 0; i < L->n;) {
		size_t j = i;
		while (j < L->n && !strcmp(L->e[j].base, L->e[i].base) && L->e[j].step == L->e[i].step)
			j++;
		entry *g = &L->e[i];
		int n = (int)(j - i);
		if (g[0].rank < 0 && n > 1)
			return tb_err_setc(err, TB_ERR_FORMAT, g[1].t->path, "'%s' is dumped both with and without a rank tag", g->base);
		if (g[0].rank >= 0) {
			/* a degree is known only from the ranks present: one short
			 * of them reads alike whether a file is lost or the dump
			 * mixes degrees */
			int r = 0;
			while (r < n && g[r].rank == r)
				r++;
			if (r < degree)
				return tb_err_setc(err, TB_ERR_FORMAT, g[r < n ? r : 0].t->path,
						  "'%s': rank %d is missing (the tree has ranks 0..%d), or the tree mixes tensor-parallel degrees",
						  g->base, r, degree - 1);
			tb_tensor *joined;
			if (join_ranks(L, g, n, &joined, err) < 0)
				return -1;
			g[0].t = joined;
		}
		for (size_t k = i + 1; k < j; k++) {
			free(L->e[k].base);
			L->e[k].base = NULL;
		}
		L->e[w] = g[0];
		L->e[w].rank = -1;
		if (w != i)
			L->e[i].base = NULL; /* moved: one owner for every name */
		w++;
		i = j;
	}
	L->n = w;
	return 0;
}

/* The steps present, as a bitmap over first..last. */
typedef struct step_set {
	int first, last, count;
} step_set;

static int check_steps(lay *L, step_set *s, tb_err *err)
{
	unsigned char *seen;

	s->first = MAX_TAG;
	s->last = -1;
	s->count = 0;
	for (size_t i = 0; i < L->n; i++) {
		if (L->e[i].step < 0)
			continue;
		if (L->e[i].step < s->first)
			s->first = L->e[i].step;
		if (L->e[i].step > s->last)
			s->last = L->e[i].step;
	}
	if (s->last < 0)
		return 0;
	seen = calloc((size_t)(s->last - s->first + 1), 1);
	if (!seen)
		return tb_err_setc(err, TB_ERR_NOMEM, L->tree->path, "out of memory");
	for (size_t i = 0; i < L->n; i++)
		if (L->e[i].step >= 0)
			seen[L->e[i].step - s->first] = 1;
	for (int k = s->first; k <= s->last; k++) {
		if (!seen[k - s->first]) {
			free(seen);
			return tb_err_setc(err, TB_ERR_FORMAT, L->tree->path, "step %d is missing: the dump has steps %d..%d with a gap", k,
					  s->first, s->last);
		}
		s->count++;
	}
	free(seen);
	return 0;
}

/* Decode steps that repeat the step before's tensors: more than half of
 * a step's tensors equal, value for value, the same tensor one step
 * earlier (CUDA-graph replays that never refreshed the dumped buffer). */
static int find_stale(lay *L, const step_set *s, tb_err *err)
{
	tb_tree_layout *lo = &L->tree->layout;
	int span = s->last - s->first + 1;
	int *same = calloc((size_t)span * 2, sizeof *same), *seen = same ? same + span : NULL;
	char list[96] = "", text[256];
	const char *example = NULL;
	int first_stale = -1;

	if (!same)
		return tb_err_setc(err, TB_ERR_NOMEM, L->tree->path, "out of memory");
	for (size_t i = 1; i < L->n; i++) {
		entry *a = &L->e[i - 1], *b = &L->e[i];
		bool equal;
		double diff;
		if (a->step < 0 || b->step != a->step + 1 || strcmp(a->base, b->base) || a->t->numel == 0)
			continue;
		if (same_values(a->t, b->t, &equal, &diff, err) < 0) {
			free(same);
			return -1;
		}
		if (a->t->numel != b->t->numel)
			continue;
		seen[b->step - s->first]++;
		same[b->step - s->first] += equal;
		if (equal && !example)
			example = b->base;
	}
	for (int k = 1; k < span; k++) {
		if (!seen[k] || same[k] * 2 <= seen[k])
			continue;
		lo->stale_steps++;
		if (first_stale < 0)
			first_stale = k + s->first;
		char one[16];
		snprintf(one, sizeof one, "%s%d", list[0] ? ", " : "", k + s->first);
		if (strlen(list) + strlen(one) + 1 < sizeof list)
			strcat(list, one);
	}
	if (lo->stale_steps) {
		snprintf(text, sizeof text, "step%s %s hold%s the previous step's tensors (%s and others): stale decode buffers",
			 lo->stale_steps > 1 ? "s" : "", list, lo->stale_steps > 1 ? "" : "s", example ? example : "?");
		snprintf(lo->stale, sizeof lo->stale, "%s", text);
	}
	free(same);
	return 0;
}

/* The axis decode steps join on: positions, the second-to-last axis of
 * activations ([S, H], [B, S, H]); the last of token ids ([B, S]) and of
 * other one-axis tensors (positions). */
static int seq_axis(const tb_tensor *t)
{
	if (t->ndim >= 1 && (t->ndim == 1 || tb_name_is_token_ids(t->name)))
		return t->ndim - 1;
	return t->ndim >= 2 ? t->ndim - 2 : -1;
}

/* Add an entry's tensor to the list under its stripped name: a tensor of
 * the tree whose name carried tags is listed as a copy named base. */
static int emit(lay *L, tb_tensor **out, size_t *n, const entry *e, tb_err *err)
{
	tb_tensor *v;

	if (!strcmp(e->t->name, e->base)) {
		out[(*n)++] = e->t;
		return 0;
	}
	v = malloc(sizeof *v);
	if (v) {
		*v = *e->t;
		v->name = strdup(e->base);
	}
	if (!v || !v->name) {
		free(v);
		return tb_err_setc(err, TB_ERR_NOMEM, L->tree->path, "out of memory");
	}
	if (keep_made(L, v, err) < 0)
		return -1;
	out[(*n)++] = v;
	return 0;
}

/* Keep one step (or stitch them all); entries without a step stay. */
/* A step at either end of the dump that holds only the logits: vLLM logs
 * a step's logits in the next step's folder, so the folder after the last
 * forward pass, or the one before the first it logged (log_step_ids),
 * holds nothing else once they are moved back.  Compared or stitched, it
 * would leave every other tap without that step: it is left out. */
static void drop_logits_steps(lay *L)
{
	for (;;) {
		int first = MAX_TAG, last = -1, edge = -1;
		size_t w = 0;

		for (size_t i = 0; i < L->n; i++) {
			if (L->e[i].step >= 0 && L->e[i].step < first)
				first = L->e[i].step;
			if (L->e[i].step > last)
				last = L->e[i].step;
		}
		if (last <= first)
			return;
		for (int k = 0; k < 2 && edge < 0; k++) {
			int step = k ? first : last;
			bool only = true;
			for (size_t i = 0; i < L->n && only; i++)
				only = L->e[i].step != step || cell_of(L, &L->e[i]).id == TB_TAP_LOGITS;
			if (only)
				edge = step;
		}
		if (edge < 0)
			return;
		for (size_t i = 0; i < L->n; i++) {
			if (L->e[i].step == edge)
				free(L->e[i].base);
			else
				L->e[w++] = L->e[i];
		}
		L->n = w;
		tb_tree_note(L->tree,
			     "step %d holds only the logits, of a forward pass the dump does not hold: left out", edge);
	}
}

static int resolve_steps(lay *L, tb_tensor ***list, size_t *n_list, tb_err *err)
{
	tb_tree_layout *lo = &L->tree->layout;
	step_set s;
	tb_tensor **out = malloc((L->n ? L->n : 1) * sizeof *out);
	size_t n = 0;

	if (!out)
		return tb_err_setc(err, TB_ERR_NOMEM, L->tree->path, "out of memory");
	drop_logits_steps(L);
	if (check_steps(L, &s, err) < 0) {
		free(out);
		return -1;
	}
	lo->step = -1;
	if (s.count > 0) {
		lo->n_steps = s.count;
		lo->first_step = s.first;
		if (find_stale(L, &s, err) < 0) {
			free(out);
			return -1;
		}
		if (!L->o->all_steps) {
			lo->step = L->o->step >= 0 ? L->o->step : s.first;
			if (lo->step < s.first || lo->step > s.last) {
				free(out);
				return tb_err_setc(err, TB_ERR_FORMAT, L->tree->path, "no step %d: the dump has steps %d..%d", lo->step, s.first,
						  s.last);
			}
		}
	}
	for (size_t i = 0; i < L->n;) {
		entry *g = &L->e[i];
		size_t j = i + 1;
		while (j < L->n && !strcmp(L->e[j].base, g->base))
			j++;
		if (g->step < 0 || !L->o->all_steps) {
			for (size_t k = i; k < j; k++)
				if ((L->e[k].step < 0 || L->e[k].step == lo->step) && emit(L, out, &n, &L->e[k], err) < 0) {
					free(out);
					return -1;
				}
		} else {
			int count = (int)(j - i), axis = seq_axis(g->t);
			tb_tensor *parts[count], *joined;
			if (count != s.count) {
				int want = s.first;
				for (size_t k = i; k < j && L->e[k].step == want; k++)
					want++;
				tb_tree_note(L->tree, "%s: not stitched, it has no step %d (the dump has steps %d..%d)", g->base,
					     want, s.first, s.last);
				i = j;
				continue;
			}
			if (axis < 0) {
				free(out);
				return tb_err_setc(err, TB_ERR_FORMAT, g->t->path, "'%s' has no positions axis to stitch its steps on", g->base);
			}
			for (int k = 0; k < count; k++)
				parts[k] = L->e[i + (size_t)k].t;
			if (!lo->first_len && axis < parts[0]->ndim)
				lo->first_len = (long)parts[0]->shape[axis];
			if (tb_compose_concat(parts, count, axis, g->base, &joined, err) < 0 ||
			    keep_made(L, joined, err) < 0) {
				free(out);
				return -1;
			}
			out[n++] = joined;
		}
		i = j;
	}
	*list = out;
	*n_list = n;
	return 0;
}

static bool vllm_logits(const char *base)
{
	const char *p = strstr(base, "logits_processor");

	return p && (p == base || p[-1] == '.') && (!strcmp(p + 16, "") || !strncmp(p + 16, ".outputs", 8));
}

/* A prefill process and a decode process count their steps each from 0:
 * the decode process's steps follow the prefill's, as they ran. */
static void decode_after_prefill(lay *L)
{
	int last = -1, first = MAX_TAG;

	for (size_t i = 0; i < L->n; i++) {
		if (L->e[i].step < 0)
			continue;
		if (L->e[i].phase && L->e[i].step < first)
			first = L->e[i].step;
		if (!L->e[i].phase && L->e[i].step > last)
			last = L->e[i].step;
	}
	if (first == MAX_TAG || last < 0)
		return;
	for (size_t i = 0; i < L->n; i++)
		if (L->e[i].phase && L->e[i].step >= 0)
			L->e[i].step += last + 1 - first;
	if (L->tree)
		tb_tree_note(L->tree, "the decode process's steps (pd_role=decode) follow the prefill process's: its step %d is "
			      "step %d here", first, last + 1);
}

/* A TensorRT-LLM debug-hook tree (model/trtllm.h): its module paths in
 * place of the hook's names, its top-level calls as steps; the inputs it
 * dumped again as outputs and what linear layers call inside are left
 * out, with a note.  -1 when out of memory. */
static int trtllm_names(lay *L, bool *tagged)
{
	tb_trtllm_name *nm = calloc(L->n ? L->n : 1, sizeof *nm);
	size_t w = 0, dropped = 0;
	int rc;

	if (!nm)
		return -1;
	for (size_t i = 0; i < L->n; i++)
		nm[i].in = L->e[i].base;
	rc = tb_trtllm_rename(nm, L->n);
	if (rc <= 0) {
		free(nm);
		return rc;
	}
	for (size_t i = 0; i < L->n; i++) {
		free(L->e[i].base);
		if (nm[i].internal) {
			dropped++;
			continue;
		}
		L->e[i].base = nm[i].out;
		if (nm[i].step >= 0)
			L->e[i].step = nm[i].step;
		L->e[w++] = L->e[i];
	}
	L->n = w;
	*tagged = true;
	free(nm);
	if (dropped && L->tree)
		tb_tree_note(L->tree, "%zu tensors of TensorRT-LLM's debug hook left out: inputs it dumped again as "
				      "outputs, and what linear layers call inside",
			     dropped);
	return 0;
}

/* Every tensor of tree with its tags stripped, into L->e, and the prefix
 * their names share, into L->shared; *tagged: whether any had a tag. */
static int read_entries(lay *L, const tb_tree *tree, bool *tagged, tb_err *err)
{
	const char **bases;

	*tagged = false;
	L->e = calloc(tree->n_tensors ? tree->n_tensors : 1, sizeof *L->e);
	if (!L->e)
		return tb_err_setc(err, TB_ERR_NOMEM, tree->path, "out of memory");
	for (size_t i = 0; i < tree->n_tensors; i++) {
		char base[NAME_ROOM];
		entry *e = &L->e[L->n];
		strip_tags(tree->tensors[i]->name, base, sizeof base, &e->rank, &e->step, &e->phase);
		e->t = tree->tensors[i];
		e->base = strdup(base[0] ? base : tree->tensors[i]->name);
		if (!e->base)
			return tb_err_setc(err, TB_ERR_NOMEM, tree->path, "out of memory");
		/* vLLM computes a step's logits after its step counter moved on,
		 * so they are logged in the next step's folder */
		if (e->step > 0 && vllm_logits(e->base))
			e->step--;
		L->n++;
		*tagged |= e->rank >= 0 || e->step >= 0;
	}
	decode_after_prefill(L);
	if (trtllm_names(L, tagged) < 0)
		return tb_err_setc(err, TB_ERR_NOMEM, tree->path, "out of memory");
	bases = malloc((L->n ? L->n : 1) * sizeof *bases);
	if (!bases)
		return tb_err_setc(err, TB_ERR_NOMEM, tree->path, "out of memory");
	for (size_t i = 0; i < L->n; i++)
		bases[i] = L->e[i].base;
	tb_common_prefix(bases, L->n, L->shared, sizeof L->shared);
	free(bases);
	return 0;
}

static void free_entries(lay *L)
{
	for (size_t i = 0; i < L->n; i++)
		free(L->e[i].base);
	free(L->e);
}

void tb_layout_qk_widths(const tb_tree *tree, const tb_namer *namer, int64_t *q, int64_t *kv)
{
	lay L = {.namer = namer};
	int64_t core = 0, qkv = 0;
	bool tagged;
	tb_err err;

	*q = *kv = 0;
	if (read_entries(&L, tree, &tagged, &err) == 0) {
		for (size_t i = 0; i < L.n && !(*q && *kv); i++) {
			const tb_tensor *t = L.e[i].t;
			tb_cell c = cell_of(&L, &L.e[i]);
			if (t->ndim < 1)
				continue;
			int64_t w = t->shape[t->ndim - 1];
			if (c.id == TB_TAP_ATTN_Q)
				*q = w;
			else if (c.id == TB_TAP_ATTN_K)
				*kv = w;
			else if (c.id == TB_TAP_ATTN_CORE)
				core = w;
			else if (c.id == TB_TAP_ATTN_QKV)
				qkv = w;
		}
		/* a fused tree: the attention output is as wide as q, which leaves
		 * k and v the rest of qkv (any tree's shard widths keep the proportion) */
		if (!*q && core > 0)
			*q = core;
		if (!*kv && *q > 0 && qkv > *q && (qkv - *q) % 2 == 0)
			*kv = (qkv - *q) / 2;
	}
	free_entries(&L);
}

bool tb_layout_has_steps(const tb_tree *tree)
{
	char base[NAME_ROOM];
	int rank, step, phase;

	for (size_t i = 0; i < tree->n_tensors; i++) {
		strip_tags(tree->tensors[i]->name, base, sizeof base, &rank, &step, &phase);
		if (step >= 0)
			return true;
	}
	return false;
}

int tb_layout_apply(tb_tree *tree, const tb_namer *namer, const tb_layout_opts *o, tb_err *err)
{
	lay L = {.tree = tree, .namer = namer, .o = o};
	bool tagged;
	tb_tensor **list = NULL;
	size_t n_list = 0;
	int rc = -1;

	memset(&tree->layout, 0, sizeof tree->layout);
	tree->layout.step = -1;
	if (read_entries(&L, tree, &tagged, err) < 0)
		goto out;
	if (!tagged) {
		rc = 0;
		goto out;
	}
	qsort(L.e, L.n, sizeof *L.e, cmp_entry);
	if (join_all_ranks(&L, err) < 0 || resolve_steps(&L, &list, &n_list, err) < 0)
		goto out;
	rc = tb_tree_set_tensors(tree, list, n_list, L.made, L.n_made, err);
	list = NULL;
	L.n_made = 0;
out:
	free(list);
	for (size_t i = 0; i < L.n_made; i++)
		tb_view_free(L.made[i]);
	free(L.made);
	free_entries(&L);
	return rc;
}

int tb_layout_rank_join(const tb_layout_opts *o, const tb_cell *c, const tb_tensor *t, tb_rank_join *j, tb_err *err)
{
	const char *spec;
	join_kind kind = join_of(o, c, t, &j->axis, &spec, err);
	bool qkv;

	j->n_parts = 1;
	j->partial = false;
	if ((int)kind < 0)
		return -1;
	switch (kind) {
	case JOIN_SPLIT:
		j->width[0] = t->shape[j->axis];
		return 0;
	case JOIN_PARTIAL:
		j->axis = -1;
		j->partial = true;
		return 0;
	case JOIN_FUSED:
		qkv = c->id == TB_TAP_ATTN_QKV;
		j->n_parts = qkv ? 3 : 2;
		return split_fused(o, t, t->name, qkv, 0, j->width, err);
	default:
		j->axis = -1;
		return 0;
	}
}
