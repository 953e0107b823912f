#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare/logits.h"
#include "compare/routing.h"

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

/* The pair of (layer, tap) when both sides dumped it whole, else NULL. */
static const tb_pair *whole_pair(const tb_pairing *p, int layer, tb_tap_id id)
{
	tb_cell c;
	long k;

	tb_cell_make_id(&c, layer, id);
	k = tb_pairing_find(p, &c);
	if (k < 0)
		return NULL;
	const tb_pair *pr = &p->pairs[k];
	if (!pr->ref || !pr->cand || pr->ref->partial || pr->cand->partial || pr->ref->sketch || pr->cand->sketch)
		return NULL;
	return pr;
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

/* mlp.topk_ids judged by its sets: rel_l2 is the share of positions whose
 * sets differ beyond a near tie, allclose the share that agree. */
static int judge_ids(tb_cell_result *c, const tb_routing_layer *l)
{
	tb_metrics *m = &c->m;

	if (fresh_positions(m, l->positions) < 0)
		return -1;
	for (int64_t i = 0; i < l->positions; i++)
		m->pos_rel_l2[i] = 0;
	for (size_t i = 0; i < l->n_disagree; i++)
		m->pos_rel_l2[l->disagree[i].pos] = 1;
	m->rel_l2 = (double)l->n_disagree / (double)l->positions;
	m->allclose_frac = (double)l->agree / (double)l->positions;
	m->cosine = m->norm_ratio = m->max_abs = m->mean_abs = NAN;
	m->first_bad_position = l->n_disagree ? l->disagree[0].pos : -1;
	if (l->n_disagree) {
		c->status = TB_ST_DIVERGED;
		snprintf(c->reason, sizeof c->reason, "expert sets differ at %zu of %lld positions, not near ties",
			 l->n_disagree + l->n_flipped, (long long)l->positions);
	} else if (l->n_flipped) {
		c->status = TB_ST_CLOSE;
		snprintf(c->reason, sizeof c->reason, "expert sets differ at %zu of %lld positions, each a near tie",
			 l->n_flipped, (long long)l->positions);
	} else {
		c->status = TB_ST_MATCH;
		snprintf(c->reason, sizeof c->reason, "the expert sets agree at every position%s",
			 l->excluded ? " compared (the others flipped upstream)" : "");
	}
	return 0;
}

/* mlp.topk_weights compared aligned by expert id at the positions whose
 * sets agree (ids and weights in the order each side chose them). */
static int judge_weights(tb_cell_result *c, const tb_routing_layer *l, const float *ir, const float *ic,
			 const float *wr, const float *wc)
{
	tb_metrics *m = &c->m;
	double sdd = 0, srr = 0, scc = 0, src = 0, sabs = 0, worst = -1;
	uint64_t n = 0, ok = 0;
	int64_t k = l->k;

	if (fresh_positions(m, l->positions) < 0)
		return -1;
	m->pos_seen = 0;
	for (int64_t p = 0; p < l->positions; p++) {
		double pd = 0, pr = 0, pc = 0, px = 0;
		if (!same_set(ir + p * k, ic + p * k, k))
			continue;
		for (int64_t i = 0; i < k; i++) {
			int64_t j = 0;
			while (j < k && ic[p * k + j] != ir[p * k + i])
				j++;
			double r = wr[p * k + i], x = wc[p * k + j], d = x - r;
			pd += d * d;
			pr += r * r;
			pc += x * x;
			px += r * x;
			sabs += fabs(d);
			ok += fabs(d) <= c->tol.atol + c->tol.rtol * fabs(r);
			if (fabs(d) > worst) {
				worst = fabs(d);
				m->worst_index = (uint64_t)(p * k + i);
				m->worst_ref = (float)r;
				m->worst_cand = (float)x;
			}
			n++;
		}
		sdd += pd;
		srr += pr;
		scc += pc;
		src += px;
		m->pos_rel_l2[p] = tb_rel_l2(pd, pr);
		m->pos_cos[p] = tb_cosine(px, pr, pc);
		m->pos_norm_ratio[p] = tb_norm_ratio(pc, pr);
		m->pos_seen++;
	}
	m->n = n;
	m->rel_l2 = tb_rel_l2(sdd, srr);
	m->cosine = tb_cosine(src, srr, scc);
	m->norm_ratio = tb_norm_ratio(scc, srr);
	m->max_abs = worst > 0 ? worst : 0;
	m->mean_abs = n ? sabs / (double)n : 0;
	m->allclose_frac = n ? (double)ok / (double)n : 1;
	m->first_bad_position = -1;
	for (int64_t p = 0; p < l->positions && m->first_bad_position < 0; p++)
		if (m->pos_rel_l2[p] > c->tol.diverge)
			m->first_bad_position = p;
	tb_cell_judge(c);
	return 0;
}

/* One layer's routing from its ids, and the reference's router scores
 * (router, or NULL) of e experts. */
static int route_layer(tb_routing_layer *l, const float *ir, const float *ic, float *router, int64_t e,
		       double router_err, double margin, const bool *gone)
{
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
		if (router)
			gap = kth_gap(router + p * e, e, l->k, &scale);
		bool tie = gap <= margin * scale || gap <= ROUTER_ERROR_TIES * router_err;
		if (tie ? add_pos(&l->flipped, &l->n_flipped, p, gap) < 0
			: add_pos(&l->disagree, &l->n_disagree, p, gap) < 0)
			return -1;
	}
	return 0;
}

static int compare_layer(const tb_pairing *p, tb_result *r, int layer, double margin, bool **gone,
			 int64_t *n_gone, tb_routing_layer *l, tb_err *err)
{
	const tb_pair *ids = whole_pair(p, layer, TB_TAP_MLP_TOPK_IDS), *w = whole_pair(p, layer, TB_TAP_MLP_TOPK_WEIGHTS);
	const tb_pair *rt = whole_pair(p, layer, TB_TAP_MLP_ROUTER);
	const tb_cell_result *rc = result_cell(r, layer, rt ? TB_TAP_MLP_ROUTER : TB_TAP_MLP_ROUTER_PROBS);
	tb_cell_result *c = result_cell(r, layer, TB_TAP_MLP_TOPK_IDS);
	float *ir = NULL, *ic = NULL, *scores = NULL, *wr = NULL, *wc = NULL;
	int64_t k = ids->ref->ndim ? ids->ref->shape[ids->ref->ndim - 1] : 0, e = 0;
	int rc_ = -1;

	if (!rt)
		rt = whole_pair(p, layer, TB_TAP_MLP_ROUTER_PROBS);
	memset(l, 0, sizeof *l);
	l->layer = layer;
	if (!c || k <= 0 || ids->ref->numel != ids->cand->numel || ids->ref->numel % (uint64_t)k ||
	    (ids->cand->ndim && ids->cand->shape[ids->cand->ndim - 1] != k))
		return 1; /* not comparable as sets: the cell keeps its own judgement */
	l->k = k;
	l->positions = (int64_t)(ids->ref->numel / (uint64_t)k);
	if (!(ir = load(ids->ref, err)) || !(ic = load(ids->cand, err)))
		goto out;
	if (rt && rt->ref->ndim && (e = rt->ref->shape[rt->ref->ndim - 1]) > 0 &&
	    rt->ref->numel == (uint64_t)(e * l->positions) && !(scores = load(rt->ref, err)))
		goto out;
	if (!*gone) {
		*gone = calloc((size_t)l->positions, sizeof **gone);
		*n_gone = l->positions;
	}
	if (!*gone || *n_gone != l->positions)
		goto oom_or_other;
	/* a router that diverged itself explains the sets it chose: no near tie */
	if (route_layer(l, ir, ic, scores, e, rc && scores && rc->status != TB_ST_DIVERGED ? rc->m.max_abs : 0, margin,
			*gone) < 0 ||
	    judge_ids(c, l) < 0)
		goto oom;
	for (size_t f = 0; f < l->n_flipped; f++)
		(*gone)[l->flipped[f].pos] = true;
	if (w && w->ref->numel == ids->ref->numel && w->cand->numel == ids->ref->numel) {
		tb_cell_result *wcell = result_cell(r, layer, TB_TAP_MLP_TOPK_WEIGHTS);
		if (!(wr = load(w->ref, err)) || !(wc = load(w->cand, err)))
			goto out;
		if (wcell && judge_weights(wcell, l, ir, ic, wr, wc) < 0)
			goto oom;
	}
	rc_ = 0;
	goto out;
oom_or_other:
	if (*gone) { /* another layer's positions: not comparable with them */
		rc_ = 1;
		goto out;
	}
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

/* A cell's metrics again without the positions in out[] (a flip upstream
 * sent them down other experts: their error is the flip's, not this
 * cell's).  Rows of cols values, position row % n_pos.  Cells with NaN or
 * Inf, or read from a partial dump or a sketch, keep theirs. */
static int exclude_positions(const tb_pair *pr, tb_cell_result *c, const bool *out, tb_err *err)
{
	tb_metrics *m = &c->m;
	int64_t np = m->n_pos, cols, rows;
	double sdd = 0, srr = 0, scc = 0, src = 0, sabs = 0, worst = -1, *pos;
	uint64_t n = 0, ok = 0;
	float *a = NULL, *b = NULL;
	int64_t dropped = 0;

	if (np <= 0 || !pr || !pr->ref || !pr->cand || pr->ref->partial || pr->cand->partial || pr->ref->sketch ||
	    pr->cand->sketch || m->nan[0] || m->nan[1] || m->inf[0] || m->inf[1] || c->shape_mismatch ||
	    pr->ref->numel != pr->cand->numel || !pr->ref->ndim)
		return 0;
	cols = pr->ref->shape[pr->ref->ndim - 1];
	rows = cols > 0 ? (int64_t)(pr->ref->numel / (uint64_t)cols) : 0;
	if (!rows || rows % np || (uint64_t)(rows * cols) != pr->ref->numel)
		return 0;
	for (int64_t p = 0; p < np; p++)
		dropped += out[p];
	if (!dropped)
		return 0;
	pos = calloc((size_t)np * 4, sizeof *pos);
	a = malloc((size_t)cols * sizeof *a);
	b = malloc((size_t)cols * sizeof *b);
	if (!pos || !a || !b) {
		free(pos);
		free(a);
		free(b);
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	if (tb_tensor_acquire(pr->ref, err) < 0) {
		free(pos);
		free(a);
		free(b);
		return -1;
	}
	if (tb_tensor_acquire(pr->cand, err) < 0) {
		tb_tensor_release(pr->ref);
		free(pos);
		free(a);
		free(b);
		return -1;
	}
	for (int64_t row = 0; row < rows; row++) {
		int64_t p = row % np;
		if (out[p])
			continue;
		tb_tensor_read_f32(pr->ref, (uint64_t)(row * cols), (uint64_t)cols, a);
		tb_tensor_read_f32(pr->cand, (uint64_t)(row * cols), (uint64_t)cols, b);
		for (int64_t i = 0; i < cols; i++) {
			double r = a[i], x = b[i], d = x - r;
			pos[4 * p] += d * d;
			pos[4 * p + 1] += r * r;
			pos[4 * p + 2] += x * x;
			pos[4 * p + 3] += r * x;
			sabs += fabs(d);
			ok += fabs(d) <= c->tol.atol + c->tol.rtol * fabs(r);
			if (fabs(d) > worst) {
				worst = fabs(d);
				m->worst_index = (uint64_t)(row * cols + i);
				m->worst_ref = a[i];
				m->worst_cand = b[i];
			}
			n++;
		}
	}
	tb_tensor_release(pr->ref);
	tb_tensor_release(pr->cand);
	m->first_bad_position = -1;
	for (int64_t p = 0; p < np; p++) {
		if (out[p]) {
			m->pos_rel_l2[p] = m->pos_cos[p] = m->pos_norm_ratio[p] = NAN;
			continue;
		}
		sdd += pos[4 * p];
		srr += pos[4 * p + 1];
		scc += pos[4 * p + 2];
		src += pos[4 * p + 3];
		m->pos_rel_l2[p] = tb_rel_l2(pos[4 * p], pos[4 * p + 1]);
		m->pos_cos[p] = tb_cosine(pos[4 * p + 3], pos[4 * p + 1], pos[4 * p + 2]);
		m->pos_norm_ratio[p] = tb_norm_ratio(pos[4 * p + 2], pos[4 * p + 1]);
		if (m->first_bad_position < 0 && !(m->pos_rel_l2[p] <= c->tol.diverge))
			m->first_bad_position = p;
	}
	free(pos);
	free(a);
	free(b);
	m->n = n;
	m->rel_l2 = tb_rel_l2(sdd, srr);
	m->cosine = tb_cosine(src, srr, scc);
	m->norm_ratio = tb_norm_ratio(scc, srr);
	m->max_abs = worst > 0 ? worst : 0;
	m->mean_abs = n ? sabs / (double)n : 0;
	m->allclose_frac = n ? (double)ok / (double)n : 1;
	m->pos_seen = np - dropped;
	c->excluded_positions = dropped;
	if (c->logits && c->logits->n_pos == np) {
		tb_logit_metrics *lm = c->logits;
		double kl = 0, mx = 0, agree = 0, overlap = 0;
		int64_t kept = 0, last = -1;
		for (int64_t p = 0; p < np; p++) {
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
		if (kept) {
			lm->kl_mean = kl / (double)kept;
			lm->kl_max = mx;
			lm->kl_last = lm->rows[last].kl;
			lm->top1_agree = agree / (double)kept;
			lm->top5_overlap = overlap / (double)kept;
		}
	}
	tb_cell_judge(c);
	return 0;
}

/* Leave each layer's flipped positions out of every later cell: the error
 * a flip sends down the residual stream is rounding's, not the port's. */
static int exclude_flips(const tb_pairing *p, tb_result *r, const tb_routing *rt, tb_err *err)
{
	for (size_t i = 0; i < r->n_cells; i++) {
		tb_cell_result *c = &r->cells[i];
		bool *out, any = false;
		if (c->m.n_pos <= 0)
			continue;
		out = calloc((size_t)c->m.n_pos, sizeof *out);
		if (!out)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		for (size_t l = 0; l < rt->n; l++) {
			tb_cell ids;
			tb_cell_make_id(&ids, rt->v[l].layer, TB_TAP_MLP_TOPK_IDS);
			/* the routing cells are judged by their sets, which leave them out already */
			if (tb_cell_cmp(&c->cell, &ids) <= 0 || c->cell.id == TB_TAP_MLP_TOPK_WEIGHTS ||
			    c->cell.id == TB_TAP_MLP_TOPK_IDS)
				continue;
			for (size_t f = 0; f < rt->v[l].n_flipped; f++)
				if (rt->v[l].flipped[f].pos < c->m.n_pos)
					any = out[rt->v[l].flipped[f].pos] = true;
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

	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < r->n_cells; i++) {
		const tb_cell_result *c = &r->cells[i];
		tb_routing_layer l;
		int k;
		if (c->cell.id != TB_TAP_MLP_TOPK_IDS || !whole_pair(p, c->cell.layer, TB_TAP_MLP_TOPK_IDS))
			continue;
		k = compare_layer(p, r, c->cell.layer, margin, &gone, &n_gone, &l, err);
		if (k < 0) {
			free(gone);
			tb_routing_free(out);
			return -1;
		}
		if (k > 0)
			continue;
		tb_routing_layer *v = realloc(out->v, (out->n + 1) * sizeof *v);
		if (!v) {
			free(l.flipped);
			free(l.disagree);
			free(gone);
			tb_routing_free(out);
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		}
		out->v = v;
		out->v[out->n++] = l;
	}
	free(gone);
	if (out->n && exclude_flips(p, r, out, err) < 0) {
		tb_routing_free(out);
		return -1;
	}
	if (out->n)
		tb_result_summarise(r);
	return 0;
}

void tb_routing_free(tb_routing *rt)
{
	for (size_t i = 0; i < rt->n; i++) {
		free(rt->v[i].flipped);
		free(rt->v[i].disagree);
	}
	free(rt->v);
	rt->v = NULL;
	rt->n = 0;
}
