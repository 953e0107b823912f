#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare/logits.h"
#include "compare/routing.h"
#include "compare/selection.h"

/* A router tensor near a tie still tells its sides apart by this many
 * times its own largest difference (the router cell's max_abs). */
#define ROUTER_ERROR_TIES 4

/* The whole of a pair's side as float32 (ids and weights are small: S x k,
 * a router S x E); NULL and err on failure. */
static float *load(tb_tensor *t, tb_err *err)
{
	float *v = malloc((t->numel ? t->numel : 1) * sizeof *v);

	if (!v) {
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		return NULL;
	}
	if (tb_tensor_acquire(t, err) < 0) {
		free(v);
		return NULL;
	}
	tb_tensor_read_f32(t, 0, t->numel, v);
	tb_tensor_release(t);
	return v;
}

/* A side's whole shape (a partial dump's whole tensor's), squeezed. */
static int side_shape(const tb_tensor *t, int64_t *sh)
{
	return t->partial ? tb_shape_squeeze(t->partial->ndim, t->partial->shape, sh) : tb_tensor_squeezed(t, sh);
}

/* The length of a side's axis i from the end (0 the last), or 0. */
static int64_t side_dim(const tb_tensor *t, int i)
{
	int64_t sh[TB_MAX_DIMS];
	int nd = side_shape(t, sh);

	return nd > i ? sh[nd - 1 - i] : 0;
}

/* Does t hold every value of its tensor, or of its last position: not a
 * sketch, and not a partial dump but of all of them (llama.cpp's last
 * layer prints its one position whole) or of its last row whole (a
 * routing trace's last layer)? */
static bool whole_side(const tb_tensor *t)
{
	const tb_partial *pa = t ? t->partial : NULL;
	uint64_t n = 1, row;

	if (!t || t->sketch)
		return false;
	if (!pa)
		return true;
	for (int i = 0; i < pa->ndim; i++)
		n *= (uint64_t)pa->shape[i];
	row = pa->ndim ? (uint64_t)pa->shape[pa->ndim - 1] : 1;
	if (t->numel != pa->n || !(pa->n == n || (pa->n == row && pa->index[0] == n - row)))
		return false;
	for (uint64_t i = 1; i < pa->n; i++)
		if (pa->index[i] != pa->index[0] + i)
			return false;
	return true;
}

/* The pair of cell c when the result has it, or NULL. */
static const tb_pair *cell_pair(const tb_pairing *p, const tb_cell *c)
{
	long k = tb_pairing_find(p, c);

	return k < 0 ? NULL : &p->pairs[k];
}

/* The pair of (layer, tap) when both sides dumped it whole, else NULL. */
static const tb_pair *whole_pair(const tb_pairing *p, int layer, tb_tap_id id)
{
	tb_cell c;

	tb_cell_make_id(&c, layer, id);
	const tb_pair *pr = cell_pair(p, &c);
	return pr && whole_side(pr->ref) && whole_side(pr->cand) ? pr : NULL;
}

/* "NAME (DIR/FILE)" of a tensor, the last two parts of its file's path,
 * for a reason. */
static const char *named(const tb_tensor *t, char *buf, size_t size)
{
	const char *path = t->path ? t->path : "", *tail = path + strlen(path);

	for (int slashes = 0; tail > path && slashes < 2; tail--)
		if (tail[-1] == '/' && ++slashes == 2)
			break;
	snprintf(buf, size, "%.60s (%.80s)", t->name, tail);
	return buf;
}

/* A cell's reason, formatted (cut at its size). */
static void say(tb_cell_result *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->reason, sizeof c->reason, fmt, ap);
	va_end(ap);
}

static tb_cell_result *result_cell(tb_result *r, int layer, tb_tap_id id)
{
	for (size_t i = 0; i < r->n_cells; i++)
		if (r->cells[i].cell.layer == layer && r->cells[i].cell.id == id)
			return &r->cells[i];
	return NULL;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x < y) - (x > y); /* descending */
}

static bool same_set(const float *a, const float *b, int64_t k)
{
	for (int64_t i = 0; i < k; i++) {
		bool found = false;
		for (int64_t j = 0; j < k && !found; j++)
			found = a[i] == b[j];
		if (!found)
			return false;
	}
	return true;
}

/* The slot of ids (k of them) that holds expert id: the other side's row
 * of the reference's expert (the sets agree, so it is there). */
static int64_t slot_of(const float *ids, float id, int64_t k)
{
	int64_t j = 0;

	while (j < k - 1 && ids[j] != id)
		j++;
	return j;
}

/* The reference's k-th minus (k+1)-th score of one row of e, and the
 * largest magnitude there; row is overwritten. */
static double kth_gap(float *row, int64_t e, int64_t k, double *scale)
{
	double big = 0;

	for (int64_t i = 0; i < e; i++)
		big = fmax(big, fabs(row[i]));
	*scale = big;
	if (k >= e)
		return NAN;
	qsort(row, (size_t)e, sizeof *row, cmp_float);
	return (double)row[k - 1] - (double)row[k];
}

static int add_pos(tb_routed_pos **v, size_t *n, int64_t pos, double gap)
{
	tb_routed_pos *w = realloc(*v, (*n + 1) * sizeof **v);

	if (!w)
		return -1;
	*v = w;
	w[(*n)++] = (tb_routed_pos){pos, gap};
	return 0;
}

/* Per-position arrays of a cell judged again: n entries, each NaN. */
static int fresh_positions(tb_metrics *m, int64_t n)
{
	tb_metrics_done(m);
	m->pos_rel_l2 = malloc((size_t)n * sizeof *m->pos_rel_l2);
	m->pos_cos = malloc((size_t)n * sizeof *m->pos_cos);
	m->pos_norm_ratio = malloc((size_t)n * sizeof *m->pos_norm_ratio);
	if (!m->pos_rel_l2 || !m->pos_cos || !m->pos_norm_ratio) {
		tb_metrics_done(m);
		return -1;
	}
	for (int64_t i = 0; i < n; i++)
		m->pos_rel_l2[i] = m->pos_cos[i] = m->pos_norm_ratio[i] = NAN;
	m->n_pos = m->pos_seen = n;
	return 0;
}

/* A cell's metrics again from the sums of the positions kept[] of its
 * n_pos (the per-position profile as the comparison makes it,
 * tb_metrics_positions).  The worst element and the status are the
 * caller's: *worst is the position whose largest difference is the
 * largest kept one (-1 when none is kept).  0, or -1 when out of memory. */
static int finish_kept(tb_cell_result *c, const tb_run_sums *pos, const bool *kept, int64_t n_pos, int64_t *worst)
{
	tb_metrics *m = &c->m;
	double sdd = 0, srr = 0, scc = 0, src = 0, sad = 0;
	uint64_t close = 0, n = 0;

	*worst = -1;
	for (int64_t p = 0; p < n_pos; p++) {
		const tb_run_sums *q = &pos[p];
		if (!kept[p])
			continue;
		sdd += q->sdd;
		srr += q->srr;
		scc += q->scc;
		src += q->src;
		sad += q->sad;
		close += q->close;
		n += q->n;
		if (*worst < 0 || q->mx > pos[*worst].mx)
			*worst = p;
	}
	tb_metrics_done(m);
	if (tb_metrics_positions(m, pos, kept, n_pos, c->tol.diverge) < 0)
		return -1;
	m->n = n;
	m->rel_l2 = tb_rel_l2(sdd, srr);
	m->cosine = tb_cosine(src, srr, scc);
	m->norm_ratio = tb_norm_ratio(scc, srr);
	m->max_abs = *worst >= 0 ? pos[*worst].mx : 0;
	m->mean_abs = n ? sad / (double)n : 0;
	m->allclose_frac = n ? (double)close / (double)n : 1;
	return 0;
}

/* The status of a cell measured again, and why when nothing was left. */
static void judge_kept(tb_cell_result *c)
{
	tb_cell_judge(c);
	if (!c->m.n && c->status == TB_ST_MATCH)
		say(c, "no position compared: each left out (its experts differ, or flipped upstream)");
}

/* Fold position p's pairs a[i], b[i] (flat indices idx[i] of the cell)
 * into q, and make the largest difference the cell's worst element when
 * it is larger than *worst. */
static void fold_position(tb_cell_result *c, tb_run_sums *q, const float *a, const float *b, const uint64_t *idx,
			  size_t n, double *worst)
{
	tb_acc acc;

	tb_acc_init(&acc);
	tb_acc_run(&acc, a, b, n, 0, c->tol.atol, c->tol.rtol, q);
	if (n && acc.max_abs > *worst) {
		*worst = acc.max_abs;
		c->m.worst_index = idx[acc.worst];
		c->m.worst_ref = acc.worst_r;
		c->m.worst_cand = acc.worst_c;
	}
}

/* mlp.topk_ids judged by its sets: rel_l2 is the share of the positions
 * compared (not flipped upstream) whose sets differ beyond a near tie,
 * allclose the share that agree. */
static int judge_ids(tb_cell_result *c, const tb_routing_layer *l)
{
	tb_metrics *m = &c->m;
	int64_t compared = l->positions - l->excluded;

	if (fresh_positions(m, l->positions) < 0)
		return -1;
	for (int64_t i = 0; i < l->positions; i++)
		m->pos_rel_l2[i] = 0;
	for (size_t i = 0; i < l->n_disagree; i++)
		m->pos_rel_l2[l->disagree[i].pos - l->first] = 1;
	c->by_sets = true;
	free(c->flips);
	c->flips = l->n_flipped ? malloc(l->n_flipped * sizeof *c->flips) : NULL;
	c->n_flips = c->flips ? l->n_flipped : 0;
	if (l->n_flipped && !c->flips)
		return -1;
	for (size_t i = 0; i < c->n_flips; i++)
		c->flips[i] = l->flipped[i].pos;
	m->rel_l2 = compared ? (double)l->n_disagree / (double)compared : 0;
	m->allclose_frac = compared ? (double)l->agree / (double)compared : 1;
	m->cosine = m->norm_ratio = m->max_abs = m->mean_abs = NAN;
	m->first_bad_position = l->n_disagree ? l->disagree[0].pos - l->first : -1;
	if (l->n_disagree) {
		c->status = TB_ST_DIVERGED;
		snprintf(c->reason, sizeof c->reason, "expert sets differ at %zu of %lld positions, not near ties",
			 l->n_disagree + l->n_flipped, (long long)l->positions);
	} else if (l->n_flipped) {
		c->status = TB_ST_CLOSE;
		snprintf(c->reason, sizeof c->reason, "expert sets differ at %zu of %lld positions, each a near tie",
			 l->n_flipped, (long long)l->positions);
	} else if (!compared) {
		c->status = TB_ST_MATCH;
		snprintf(c->reason, sizeof c->reason, "no position compared: each flipped upstream");
	} else {
		c->status = TB_ST_MATCH;
		snprintf(c->reason, sizeof c->reason, "the expert sets agree at every position%s",
			 l->excluded ? " compared (the others flipped upstream)" : "");
	}
	return 0;
}

/* mlp.topk_weights compared aligned by expert id at the positions whose
 * sets agree and that no earlier flip sent elsewhere (gone[]: their router
 * saw another hidden state, so their weights differ though their sets may
 * not); ids and weights in the order each side chose them. */
static int judge_weights(tb_cell_result *c, const tb_routing_layer *l, const float *ir, const float *ic,
			 const float *wr, const float *wc, const bool *gone)
{
	int64_t k = l->k;
	bool *kept = calloc((size_t)l->positions, sizeof *kept);
	tb_run_sums *pos = calloc((size_t)l->positions, sizeof *pos);
	float *b = malloc((size_t)k * sizeof *b);
	uint64_t *idx = malloc((size_t)k * sizeof *idx);
	double worst = -1;
	int64_t at;
	int rc = -1;

	if (!kept || !pos || !b || !idx)
		goto out;
	for (int64_t p = 0; p < l->positions; p++) {
		if (!(kept[p] = !gone[p] && same_set(ir + p * k, ic + p * k, k)))
			continue;
		for (int64_t i = 0; i < k; i++) {
			b[i] = wc[p * k + slot_of(ic + p * k, ir[p * k + i], k)];
			idx[i] = (uint64_t)(p * k + i);
		}
		fold_position(c, &pos[p], wr + p * k, b, idx, (size_t)k, &worst);
	}
	if (finish_kept(c, pos, kept, l->positions, &at) < 0)
		goto out;
	judge_kept(c);
	rc = 0;
out:
	free(kept);
	free(pos);
	free(b);
	free(idx);
	return rc;
}

/* One layer's routing from its ids, and the reference's router scores
 * (router, or NULL) of e experts; gone[] the layer's positions flipped
 * upstream. */
static int route_layer(tb_routing_layer *l, const float *ir, const float *ic, float *router, int64_t e,
		       double router_err, double margin, const bool *gone)
{
	tb_select sel = {0};
	int64_t misses = 0;
	bool fitted = false;

	for (int64_t p = 0; p < l->positions; p++) {
		double gap = NAN, scale = 0;
		if (gone[p]) {
			l->excluded++;
			continue;
		}
		if (same_set(ir + p * l->k, ic + p * l->k, l->k)) {
			l->agree++;
			continue;
		}
		/* a router that chose by more than its scores' order (a selection bias, groups):
		 * the ties are those of the selection that gives the reference's ids */
		if (router && !fitted) {
			fitted = true;
			if (tb_select_fit(router, ir, l->positions, e, l->k, &sel, &misses) < 0)
				return -1;
		}
		if (router && (sel.bias || sel.groups))
			tb_select_row(&sel, router + p * e, NULL, &gap, &scale);
		else if (router)
			gap = kth_gap(router + p * e, e, l->k, &scale);
		bool tie = gap <= margin * scale || gap <= ROUTER_ERROR_TIES * router_err;
		if (tie ? add_pos(&l->flipped, &l->n_flipped, l->first + p, gap) < 0
			: add_pos(&l->disagree, &l->n_disagree, l->first + p, gap) < 0) {
			tb_select_free(&sel);
			return -1;
		}
	}
	tb_select_free(&sel);
	return 0;
}

/* The logits' KL and top-k agreement again without the positions in out[]. */
static void exclude_logits(tb_cell_result *c, const bool *out)
{
	tb_logit_metrics *lm = c->logits;
	double kl = 0, mx = 0, agree = 0, overlap = 0;
	int64_t kept = 0, last = -1;

	if (!lm || lm->n_pos != c->m.n_pos)
		return;
	for (int64_t p = 0; p < lm->n_pos; p++) {
		const tb_logit_row *lr = &lm->rows[p];
		if (out[p])
			continue;
		kl += lr->kl;
		mx = lr->kl > mx ? lr->kl : mx;
		agree += lr->top1[0] == lr->top1[1] && lr->top1[0] >= 0;
		overlap += lr->top5_common / (double)(lm->vocab < 5 ? lm->vocab : 5);
		kept++;
		last = p;
	}
	if (!kept)
		return;
	lm->kl_mean = kl / (double)kept;
	lm->kl_max = mx;
	lm->kl_last = lm->rows[last].kl;
	lm->top1_agree = agree / (double)kept;
	lm->top5_overlap = overlap / (double)kept;
}

/* The largest difference of position p's rows (row % np == p): the cell's
 * worst element once the positions that held it are left out. */
static int locate_worst(const tb_pair *pr, tb_cell_result *c, int64_t p, int64_t rows, int64_t cols, tb_err *err)
{
	int64_t np = c->m.n_pos;
	float *a = malloc((size_t)cols * sizeof *a), *b = malloc((size_t)cols * sizeof *b);
	double worst = -1;
	int rc = -1;

	if (!a || !b) {
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		goto out;
	}
	if (tb_tensor_acquire(pr->ref, err) < 0)
		goto out;
	if (tb_tensor_acquire(pr->cand, err) < 0) {
		tb_tensor_release(pr->ref);
		goto out;
	}
	for (int64_t row = p; row < rows; row += np) {
		tb_tensor_read_f32(pr->ref, (uint64_t)(row * cols), (uint64_t)cols, a);
		tb_tensor_read_f32(pr->cand, (uint64_t)(row * cols), (uint64_t)cols, b);
		for (int64_t i = 0; i < cols; i++) {
			double d = fabs((double)b[i] - a[i]);
			if (d > worst) {
				worst = d;
				c->m.worst_index = (uint64_t)(row * cols + i);
				c->m.worst_ref = a[i];
				c->m.worst_cand = b[i];
			}
		}
	}
	tb_tensor_release(pr->ref);
	tb_tensor_release(pr->cand);
	rc = 0;
out:
	free(a);
	free(b);
	return rc;
}

/* A cell's metrics again without the positions in out[] (a flip upstream
 * sent them down other experts: their error is the flip's, not this
 * cell's), from its per-position sums: only the position that now holds
 * the worst element is read again.  Rows of cols values, position
 * row % n_pos.  Cells with NaN or Inf, or read from a partial dump or a
 * sketch, keep theirs (they have no per-position sums either). */
static int exclude_positions(const tb_pair *pr, tb_cell_result *c, const bool *out, tb_err *err)
{
	int64_t np = c->m.n_pos, cols, rows, dropped = 0;
	const tb_metrics *m = &c->m;
	bool *kept;

	if (np <= 0 || !pr || !pr->ref || !pr->cand || pr->ref->partial || pr->cand->partial || pr->ref->sketch ||
	    pr->cand->sketch || m->nan[0] || m->nan[1] || m->inf[0] || m->inf[1] || c->shape_mismatch ||
	    pr->ref->numel != pr->cand->numel || !pr->ref->ndim)
		return 0;
	cols = pr->ref->shape[pr->ref->ndim - 1];
	rows = cols > 0 ? (int64_t)(pr->ref->numel / (uint64_t)cols) : 0;
	if (!rows || rows % np || (uint64_t)(rows * cols) != pr->ref->numel || !c->pos_sums)
		return 0;
	for (int64_t p = 0; p < np; p++)
		dropped += out[p];
	if (!dropped)
		return 0;
	if (!(kept = malloc((size_t)np * sizeof *kept)))
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	for (int64_t p = 0; p < np; p++)
		kept[p] = !out[p];
	int64_t was = (int64_t)(c->m.worst_index / (uint64_t)cols % (uint64_t)np), worst;
	int rc = finish_kept(c, c->pos_sums, kept, np, &worst);
	free(kept);
	if (rc < 0)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	c->excluded_positions = dropped;
	exclude_logits(c, out);
	if (worst >= 0 && out[was] && locate_worst(pr, c, worst, rows, cols, err) < 0)
		return -1;
	judge_kept(c);
	return 0;
}

/* The tensor a side dumped for (layer, id), or NULL. */
static tb_tensor *side_tensor(const tb_pairing *p, int layer, tb_tap_id id, int side)
{
	tb_cell c;

	tb_cell_make_id(&c, layer, id);
	const tb_pair *pr = cell_pair(p, &c);
	return pr ? side ? pr->cand : pr->ref : NULL;
}

/* Are a side's expert ids expert numbers its own router scores (when it
 * dumped one)?  0, or -1 and err naming the file: an id that is no
 * expert's would route nothing, and no comparison of it means anything. */
static int check_ids(const tb_pairing *p, const tb_routing_layer *l, const tb_tensor *t, const float *v, int side,
		     tb_err *err)
{
	const tb_tensor *rt = side_tensor(p, l->layer, TB_TAP_MLP_ROUTER, side);
	const tb_tensor *pr = side_tensor(p, l->layer, TB_TAP_MLP_ROUTER_PROBS, side);
	int64_t e = rt ? side_dim(rt, 0) : pr ? side_dim(pr, 0) : 0, n = l->positions * l->k;

	if (rt && pr && side_dim(pr, 0) != e)
		return tb_err_setc(err, TB_ERR_FORMAT, pr->path, "%s gives %lld experts probabilities, but %s scores %lld",
				   pr->name, (long long)side_dim(pr, 0), rt->name, (long long)e);
	if (e > 0 && l->k > e)
		return tb_err_setc(err, TB_ERR_FORMAT, t->path, "%s selects %lld experts per position of the %lld its router scores",
				   t->name, (long long)l->k, (long long)e);
	for (int64_t i = 0; i < n; i++) {
		if (v[i] >= 0 && v[i] == floorf(v[i]) && (e <= 0 ? v[i] < 16777216.0f : v[i] < (float)e))
			continue;
		if (e > 0 && v[i] >= e && v[i] == floorf(v[i]))
			return tb_err_setc(err, TB_ERR_FORMAT, t->path,
					   "%s names expert %.0f at position %lld, but its router scores %lld experts", t->name,
					   (double)v[i], (long long)(l->first + i / l->k), (long long)e);
		return tb_err_setc(err, TB_ERR_FORMAT, t->path, "%s holds %g at position %lld: no expert number", t->name,
				   (double)v[i], (long long)(l->first + i / l->k));
	}
	return 0;
}

/* Does t hold one combine weight per selected expert, rows aligned with
 * the ids ([.., S, k], or llama.cpp's [.., S, k, 1])? */
static bool weights_aligned(const tb_tensor *t, const tb_routing_layer *l)
{
	int64_t last = side_dim(t, 0);

	return t->numel == (uint64_t)(l->positions * l->k) && (last == l->k || (last == 1 && side_dim(t, 1) == l->k));
}

/* The taps of an MoE layer that llama.cpp's graph holds one row of per
 * selected expert, [.., S, k, F] (ffn_moe_gate, _up, the activation
 * between, _down, and _weighted; the combine weights' stages before the
 * last, one value per slot: tbisect-dumps(5), Mixture of experts). */
static const char *const slot_taps[] = {"mlp.gate",     "mlp.up",    "mlp.act",        "mlp.down",
					"mlp.weighted", "mlp.moe_w", "mlp.moe_w_norm", "mlp.moe_w_scaled"};

/* F when a side holds one row of F values per selected expert of each of
 * l's positions (one value: as the combine weights), else 0. */
static int64_t slot_width(const tb_tensor *t, const tb_routing_layer *l)
{
	int64_t sh[TB_MAX_DIMS];
	int nd = side_shape(t, sh);

	if (t->sketch)
		return 0;
	if (weights_aligned(t, l))
		return 1;
	if (nd < 2 || nd > 3 || sh[nd - 2] != l->k || (nd == 3 ? sh[0] : 1) != l->positions)
		return 0;
	return sh[nd - 1];
}

/* One side of a per-slot tensor read a position at a time. */
typedef struct slot_side {
	tb_tensor *t;
	const uint64_t *index; /* a partial dump's flat indices of its values, or NULL */
	uint64_t n, at;        /* its values; the first not yet passed */
	float *row;            /* one position's k rows */
	bool *has;             /* which of them were dumped */
} slot_side;

static void slot_read(slot_side *s, int64_t p, int64_t kf)
{
	uint64_t lo = (uint64_t)(p * kf), hi = lo + (uint64_t)kf;

	if (!s->index) {
		tb_tensor_read_f32(s->t, lo, (uint64_t)kf, s->row);
		for (int64_t i = 0; i < kf; i++)
			s->has[i] = true;
		return;
	}
	memset(s->has, 0, (size_t)kf * sizeof *s->has);
	while (s->at < s->n && s->index[s->at] < lo)
		s->at++;
	for (; s->at < s->n && s->index[s->at] < hi; s->at++) {
		tb_tensor_read_f32(s->t, s->at, 1, &s->row[s->index[s->at] - lo]);
		s->has[s->index[s->at] - lo] = true;
	}
}

/* A per-slot cell compared slot by expert id: at each position whose sets
 * agree (and that no flip upstream sent elsewhere), the candidate's row of
 * expert x against the reference's row of x.  0, 1 when a side is not per
 * slot (noted), -1 and err. */
static int judge_slots(tb_cell_result *c, const tb_pair *pr, const tb_routing_layer *l, const float *ir,
		       const float *ic, const bool *gone, tb_err *err)
{
	int64_t f = slot_width(pr->ref, l), fc = slot_width(pr->cand, l), k = l->k, kf = k * f;
	slot_side sd[2] = {{pr->ref, NULL, 0, 0, NULL, NULL}, {pr->cand, NULL, 0, 0, NULL, NULL}};
	bool *kept = NULL;
	tb_run_sums *pos = NULL;
	float *a = NULL, *b = NULL;
	uint64_t *idx = NULL;
	double worst = -1;
	int64_t at;
	int rc = -1;

	if (!f != !fc) {
		char who[160];
		c->status = TB_ST_MISSING;
		say(c, "not compared: %s holds one row per selected expert, the other side's is not so laid out",
		    named(f ? pr->ref : pr->cand, who, sizeof who));
		return 1;
	}
	if (!f || f != fc || c->m.nan[0] || c->m.nan[1] || c->m.inf[0] || c->m.inf[1])
		return 1; /* the elementwise judgement stands */
	for (int i = 0; i < 2; i++) {
		sd[i].index = sd[i].t->partial ? sd[i].t->partial->index : NULL;
		sd[i].n = sd[i].t->numel;
		sd[i].row = malloc((size_t)kf * sizeof *sd[i].row);
		sd[i].has = malloc((size_t)kf * sizeof *sd[i].has);
	}
	kept = calloc((size_t)l->positions, sizeof *kept);
	pos = calloc((size_t)l->positions, sizeof *pos);
	a = malloc((size_t)kf * sizeof *a);
	b = malloc((size_t)kf * sizeof *b);
	idx = malloc((size_t)kf * sizeof *idx);
	if (!sd[0].row || !sd[1].row || !sd[0].has || !sd[1].has || !kept || !pos || !a || !b || !idx) {
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		goto out;
	}
	if (tb_tensor_acquire(sd[0].t, err) < 0)
		goto out;
	if (tb_tensor_acquire(sd[1].t, err) < 0) {
		tb_tensor_release(sd[0].t);
		goto out;
	}
	for (int64_t p = 0; p < l->positions; p++) {
		if (gone[p] || !(kept[p] = same_set(ir + p * k, ic + p * k, k)))
			continue;
		size_t n = 0;
		slot_read(&sd[0], p, kf);
		slot_read(&sd[1], p, kf);
		for (int64_t i = 0; i < k; i++) {
			int64_t j = slot_of(ic + p * k, ir[p * k + i], k);
			for (int64_t x = 0; x < f; x++)
				if (sd[0].has[i * f + x] && sd[1].has[j * f + x]) {
					a[n] = sd[0].row[i * f + x];
					b[n] = sd[1].row[j * f + x];
					idx[n++] = (uint64_t)((p * k + i) * f + x);
				}
		}
		fold_position(c, &pos[p], a, b, idx, n, &worst);
	}
	tb_tensor_release(sd[0].t);
	tb_tensor_release(sd[1].t);
	if (finish_kept(c, pos, kept, l->positions, &at) < 0) {
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		goto out;
	}
	judge_kept(c);
	c->by_slots = true;
	char judged[sizeof c->reason];
	memcpy(judged, c->reason, sizeof judged);
	say(c, "%s; rows matched by expert id", judged);
	rc = 0;
out:
	free(pos);
	free(a);
	free(b);
	free(idx);
	free(kept);
	for (int i = 0; i < 2; i++) {
		free(sd[i].row);
		free(sd[i].has);
	}
	return rc;
}

/* Every per-slot cell of a layer compared slot by expert id.  0, or -1. */
static int judge_layer_slots(const tb_pairing *p, tb_result *r, const tb_routing_layer *l, const float *ir,
			     const float *ic, const bool *gone, tb_err *err)
{
	for (size_t i = 0; i < sizeof slot_taps / sizeof *slot_taps; i++) {
		tb_cell cell;
		tb_cell_make(&cell, l->layer, slot_taps[i]);
		const tb_pair *pr = cell_pair(p, &cell);
		long at = tb_result_find(r, &cell);
		if (!pr || !pr->ref || !pr->cand || at < 0 || r->cells[at].status == TB_ST_MISSING)
			continue;
		if (judge_slots(&r->cells[at], pr, l, ir, ic, gone, err) < 0)
			return -1;
	}
	return 0;
}

static int compare_layer(const tb_pairing *p, tb_result *r, int layer, double margin, bool **gone,
			 int64_t *n_gone, tb_routing_layer *l, tb_err *err)
{
	const tb_pair *ids = whole_pair(p, layer, TB_TAP_MLP_TOPK_IDS), *w = whole_pair(p, layer, TB_TAP_MLP_TOPK_WEIGHTS);
	const tb_pair *rt = whole_pair(p, layer, TB_TAP_MLP_ROUTER);
	tb_cell_result *rc = result_cell(r, layer, rt ? TB_TAP_MLP_ROUTER : TB_TAP_MLP_ROUTER_PROBS);
	tb_cell_result *c = result_cell(r, layer, TB_TAP_MLP_TOPK_IDS);
	tb_cell_result *wcell = result_cell(r, layer, TB_TAP_MLP_TOPK_WEIGHTS);
	float *ir = NULL, *ic = NULL, *scores = NULL, *wr = NULL, *wc = NULL;
	int64_t k = side_dim(ids->ref, 0), kc = side_dim(ids->cand, 0), e = 0;
	char a[160], b[160];
	int rc_ = -1;

	if (!rt)
		rt = whole_pair(p, layer, TB_TAP_MLP_ROUTER_PROBS);
	memset(l, 0, sizeof *l);
	l->layer = layer;
	if (c && k > 0 && kc > 0 && k != kc) {
		c->status = TB_ST_DIVERGED;
		say(c, "%lld experts selected per position by %s, %lld by %s", (long long)k, named(ids->ref, a, sizeof a),
		    (long long)kc, named(ids->cand, b, sizeof b));
		return 1;
	}
	if (!c || k <= 0 || ids->ref->numel != ids->cand->numel || ids->ref->numel % (uint64_t)k)
		return 1; /* not comparable as sets: the cell keeps its own judgement */
	l->k = k;
	l->positions = (int64_t)(ids->ref->numel / (uint64_t)k);
	/* one position after layers of several: the last, the one llama.cpp's
	 * last layer computes (and pairing reads the other side's at) */
	if (*gone && l->positions == 1 && *n_gone > 1)
		l->first = *n_gone - 1;
	else if (*gone && *n_gone != l->positions)
		return 1; /* another layer's positions: not comparable with them */
	if (!(ir = load(ids->ref, err)) || !(ic = load(ids->cand, err)) ||
	    check_ids(p, l, ids->ref, ir, 0, err) < 0 || check_ids(p, l, ids->cand, ic, 1, err) < 0)
		goto out;
	if (rt && (e = side_dim(rt->ref, 0)) > 0 && rt->ref->numel == (uint64_t)(e * l->positions) &&
	    !(scores = load(rt->ref, err)))
		goto out;
	if (!*gone) {
		*gone = calloc((size_t)l->positions, sizeof **gone);
		*n_gone = l->positions;
		if (!*gone)
			goto oom;
	}
	const bool *here = *gone + l->first;
	/* the router judged without the positions flipped upstream, before its error counts as noise */
	if (rc && scores && rc->m.n_pos == l->positions) {
		long at = tb_pairing_find(p, &rc->cell);
		if (exclude_positions(at >= 0 ? &p->pairs[at] : NULL, rc, here, err) < 0)
			goto out;
	}
	/* the router's own error is noise only while it agrees: a diverged router's is the port's */
	if (route_layer(l, ir, ic, scores, e, rc && scores && rc->status != TB_ST_DIVERGED ? rc->m.max_abs : 0, margin,
			here) < 0 ||
	    judge_ids(c, l) < 0)
		goto oom;
	for (size_t f = 0; f < l->n_flipped; f++)
		(*gone)[l->flipped[f].pos] = true;
	if (w && wcell && (!weights_aligned(w->ref, l) || !weights_aligned(w->cand, l))) {
		wcell->status = TB_ST_MISSING;
		say(wcell, "not compared: %s holds no combine weight per selected expert, rows aligned with the ids",
		    named(weights_aligned(w->ref, l) ? w->cand : w->ref, a, sizeof a));
	} else if (w && wcell) {
		if (!(wr = load(w->ref, err)) || !(wc = load(w->cand, err)))
			goto out;
		if (judge_weights(wcell, l, ir, ic, wr, wc, here) < 0)
			goto oom;
	}
	if (judge_layer_slots(p, r, l, ir, ic, here, err) < 0)
		goto out;
	rc_ = 0;
	goto out;
oom:
	tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
out:
	free(ir);
	free(ic);
	free(scores);
	free(wr);
	free(wc);
	return rc_;
}

/* Does a flip in layer's routing reach cell c?  Every cell after the
 * layer's expert ids does, but the routing cells, judged by their sets,
 * which leave flipped positions out already. */
static bool flip_reaches(const tb_cell_result *c, int layer)
{
	tb_cell ids;

	tb_cell_make_id(&ids, layer, TB_TAP_MLP_TOPK_IDS);
	return tb_cell_cmp(&c->cell, &ids) > 0 && c->cell.id != TB_TAP_MLP_TOPK_WEIGHTS &&
	       c->cell.id != TB_TAP_MLP_TOPK_IDS;
}

/* A later cell whose sides are a partial dump of one position, the last
 * (llama.cpp's last layer): not compared when that position flipped in an
 * earlier layer. */
static void last_only(const tb_pairing *p, const tb_routing *rt, tb_cell_result *c, int64_t last)
{
	const tb_pair *pr = cell_pair(p, &c->cell);

	int64_t sh[2][TB_MAX_DIMS];
	int nd[2];

	if (!pr || !pr->ref || !pr->cand || !(pr->ref->partial || pr->cand->partial))
		return;
	nd[0] = side_shape(pr->ref, sh[0]);
	nd[1] = side_shape(pr->cand, sh[1]);
	for (int i = 0; i < 2; i++)
		if (nd[i] >= 2 && sh[i][nd[i] - 2] != 1)
			return;
	for (size_t l = 0; l < rt->n; l++) {
		if (!flip_reaches(c, rt->v[l].layer))
			continue;
		for (size_t f = 0; f < rt->v[l].n_flipped; f++)
			if (rt->v[l].flipped[f].pos == last) {
				c->status = TB_ST_MATCH;
				c->excluded_positions = 1;
				say(c, "not compared: its one position, the last, flipped at layer %d", rt->v[l].layer);
				return;
			}
	}
}

/* Leave each layer's flipped positions out of every later cell: the error
 * a flip sends down the residual stream is rounding's, not the port's.  A
 * cell of one position after layers of several holds the last (llama.cpp's
 * last layer; pairing reads the other side there). */
static int exclude_flips(const tb_pairing *p, tb_result *r, const tb_routing *rt, tb_err *err)
{
	int64_t total = 0;

	for (size_t l = 0; l < rt->n; l++)
		if (rt->v[l].first + rt->v[l].positions > total)
			total = rt->v[l].first + rt->v[l].positions;
	for (size_t i = 0; i < r->n_cells; i++) {
		tb_cell_result *c = &r->cells[i];
		bool *out, any = false;
		if (c->m.n_pos <= 1 && c->status != TB_ST_MISSING && total > 1)
			last_only(p, rt, c, total - 1);
		if (c->m.n_pos <= 0 || c->status == TB_ST_MISSING || c->by_slots)
			continue;
		out = calloc((size_t)c->m.n_pos, sizeof *out);
		if (!out)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		int64_t first = c->m.n_pos == 1 ? total - 1 : 0;
		for (size_t l = 0; l < rt->n; l++) {
			if (!flip_reaches(c, rt->v[l].layer))
				continue;
			for (size_t f = 0; f < rt->v[l].n_flipped; f++) {
				int64_t at = rt->v[l].flipped[f].pos - first;
				if (at >= 0 && at < c->m.n_pos)
					any = out[at] = true;
			}
		}
		long k = any ? tb_pairing_find(p, &c->cell) : -1;
		int rc = any ? exclude_positions(k >= 0 ? &p->pairs[k] : NULL, c, out, err) : 0;
		free(out);
		if (rc < 0)
			return -1;
	}
	return 0;
}

int tb_routing_compute(const tb_pairing *p, tb_result *r, double flip_margin, tb_routing *out, tb_err *err)
{
	double margin = flip_margin > 0 ? flip_margin : TB_FLIP_MARGIN;
	bool *gone = NULL; /* positions flipped in an earlier layer */
	int64_t n_gone = 0;
	bool seen = false; /* a cell judged again */

	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < r->n_cells; i++) {
		const tb_cell_result *c = &r->cells[i];
		tb_routing_layer l;
		int k;
		if (c->cell.id != TB_TAP_MLP_TOPK_IDS || !whole_pair(p, c->cell.layer, TB_TAP_MLP_TOPK_IDS))
			continue;
		k = compare_layer(p, r, c->cell.layer, margin, &gone, &n_gone, &l, err);
		seen = true;
		if (k < 0) {
			free(gone);
			tb_routing_done(out);
			return -1;
		}
		if (k > 0)
			continue;
		tb_routing_layer *v = realloc(out->v, (out->n + 1) * sizeof *v);
		if (!v) {
			free(l.flipped);
			free(l.disagree);
			free(gone);
			tb_routing_done(out);
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		}
		out->v = v;
		out->v[out->n++] = l;
	}
	free(gone);
	if (out->n && exclude_flips(p, r, out, err) < 0) {
		tb_routing_done(out);
		return -1;
	}
	if (seen)
		tb_result_summarise(r);
	return 0;
}

const tb_routing_layer *tb_routing_layer_of(const tb_routing *rt, int layer)
{
	for (size_t i = 0; i < rt->n; i++)
		if (rt->v[i].layer == layer)
			return &rt->v[i];
	return NULL;
}

int tb_routing_chosen(const tb_pairing *p, const tb_routing_layer *l, int64_t pos, int ids[2][TB_ROUTING_K_MAX],
		      tb_err *err)
{
	const tb_pair *pr = whole_pair(p, l->layer, TB_TAP_MLP_TOPK_IDS);
	float v[TB_ROUTING_K_MAX];

	if (!pr || l->k > TB_ROUTING_K_MAX || pos < l->first || pos >= l->first + l->positions)
		return tb_err_setc(err, TB_ERR_LIMIT, NULL, "no expert ids of layer %d at position %lld", l->layer,
				   (long long)pos);
	for (int s = 0; s < 2; s++) {
		tb_tensor *t = s ? pr->cand : pr->ref;
		if (tb_tensor_acquire(t, err) < 0)
			return -1;
		tb_tensor_read_f32(t, (uint64_t)((pos - l->first) * l->k), (uint64_t)l->k, v);
		tb_tensor_release(t);
		for (int64_t j = 0; j < l->k; j++)
			ids[s][j] = (int)v[j];
	}
	return 0;
}

void tb_routing_done(tb_routing *rt)
{
	for (size_t i = 0; i < rt->n; i++) {
		free(rt->v[i].flipped);
		free(rt->v[i].disagree);
	}
	free(rt->v);
	rt->v = NULL;
	rt->n = 0;
}
