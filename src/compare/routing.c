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

/* Does the reference choose other experts than its k best scores at some
 * position (a selection bias, or group limits, as DeepSeek-V3's router)?
 * Then the gap between its k-th and (k+1)-th score says nothing of how
 * near its choice was. */
static bool choice_not_topk(const float *ir, const float *scores, int64_t positions, int64_t e, int64_t k)
{
	for (int64_t p = 0; p < positions && k < e; p++) {
		const float *row = scores + p * e;
		for (int64_t i = 0; i < k; i++) {
			int64_t id = (int64_t)ir[p * k + i], above = 0;
			if (id < 0 || id >= e)
				return false;
			for (int64_t j = 0; j < e; j++)
				above += row[j] > row[id];
			if (above >= k)
				return true;
		}
	}
	return false;
}

/* How far the candidate's scores at one position moved toward its own
 * choice: its experts' rise less the reference's experts' (the ones the
 * other side did not choose).  Rounding that reversed a near choice must
 * have moved them so; a port choosing otherwise from the same scores has
 * not. */
static double toward(const float *ir, const float *ic, const float *sr, const float *sc, int64_t k, int64_t e)
{
	double d = 0;

	for (int64_t i = 0; i < k; i++) {
		int64_t a = (int64_t)ir[i], b = (int64_t)ic[i];
		bool a_kept = false, b_shared = false;
		for (int64_t j = 0; j < k; j++) {
			a_kept = a_kept || ic[j] == ir[i];
			b_shared = b_shared || ir[j] == ic[i];
		}
		if (!a_kept && a >= 0 && a < e)
			d -= (double)sc[a] - sr[a];
		if (!b_shared && b >= 0 && b < e)
			d += (double)sc[b] - sr[b];
	}
	return d;
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

/* Sums of a cell measured again over some of its positions: per position
 * (d.d, r.r, c.c, r.c) and over the whole. */
typedef struct resums {
	double *pos; /* 4 per position, owned */
	double sabs, worst;
	uint64_t n, ok;
} resums;

static int resums_init(resums *s, int64_t positions)
{
	memset(s, 0, sizeof *s);
	s->worst = -1;
	s->pos = calloc((size_t)positions * 4, sizeof *s->pos);
	return s->pos ? 0 : -1;
}

/* One pair of values r, x of position p, at element index. */
static void resums_add(resums *s, tb_cell_result *c, int64_t p, double r, double x, uint64_t index)
{
	double d = x - r;

	s->pos[4 * p] += d * d;
	s->pos[4 * p + 1] += r * r;
	s->pos[4 * p + 2] += x * x;
	s->pos[4 * p + 3] += r * x;
	s->sabs += fabs(d);
	s->ok += fabs(d) <= c->tol.atol + c->tol.rtol * fabs(r);
	if (fabs(d) > s->worst) {
		s->worst = fabs(d);
		c->m.worst_index = index;
		c->m.worst_ref = (float)r;
		c->m.worst_cand = (float)x;
	}
	s->n++;
}

/* The cell's metrics from the sums of the positions kept[] (its per-position
 * arrays fresh), then its status; the sums are freed. */
static void resums_finish(resums *s, tb_cell_result *c, const bool *kept)
{
	tb_metrics *m = &c->m;
	double sdd = 0, srr = 0, scc = 0, src = 0;

	m->first_bad_position = -1;
	m->pos_seen = 0;
	for (int64_t p = 0; p < m->n_pos; p++) {
		const double *q = s->pos + 4 * p;
		if (!kept[p])
			continue;
		sdd += q[0];
		srr += q[1];
		scc += q[2];
		src += q[3];
		m->pos_rel_l2[p] = tb_rel_l2(q[0], q[1]);
		m->pos_cos[p] = tb_cosine(q[3], q[1], q[2]);
		m->pos_norm_ratio[p] = tb_norm_ratio(q[2], q[1]);
		m->pos_seen++;
		if (m->first_bad_position < 0 && !(m->pos_rel_l2[p] <= c->tol.diverge))
			m->first_bad_position = p;
	}
	m->n = s->n;
	m->rel_l2 = tb_rel_l2(sdd, srr);
	m->cosine = tb_cosine(src, srr, scc);
	m->norm_ratio = tb_norm_ratio(scc, srr);
	m->max_abs = s->worst > 0 ? s->worst : 0;
	m->mean_abs = s->n ? s->sabs / (double)s->n : 0;
	m->allclose_frac = s->n ? (double)s->ok / (double)s->n : 1;
	free(s->pos);
	s->pos = NULL;
	tb_cell_judge(c);
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
	c->by_sets = true;
	c->first_flip = l->n_flipped ? l->flipped[0].pos : -1;
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
 * sets agree and that no earlier layer flipped (gone[]: the flip's error
 * reaches this router's scores too), ids and weights in the order each
 * side chose them. */
static int judge_weights(tb_cell_result *c, const tb_routing_layer *l, const bool *gone, const float *ir,
			 const float *ic, const float *wr, const float *wc)
{
	int64_t k = l->k;
	bool *kept = calloc((size_t)l->positions, sizeof *kept);
	resums s;

	if (!kept || fresh_positions(&c->m, l->positions) < 0 || resums_init(&s, l->positions) < 0) {
		free(kept);
		return -1;
	}
	for (int64_t p = 0; p < l->positions; p++) {
		if (!(kept[p] = !gone[p] && same_set(ir + p * k, ic + p * k, k)))
			continue;
		for (int64_t i = 0; i < k; i++) {
			int64_t j = 0;
			while (j < k && ic[p * k + j] != ir[p * k + i])
				j++;
			resums_add(&s, c, p, wr[p * k + i], wc[p * k + j], (uint64_t)(p * k + i));
		}
	}
	resums_finish(&s, c, kept);
	free(kept);
	return 0;
}

/* One layer's routing from its ids, and the two sides' router scores
 * (router and cand, or NULL) of e experts.  A differing position is a
 * flip at a near tie of the reference's k-th gap; and, where the
 * reference chooses other experts than its best scores somewhere
 * (choice_not_topk: that gap is not its choice's), when the router has
 * not diverged and its scores there moved toward the candidate's choice
 * (the gap reported is then how far). */
static int route_layer(tb_routing_layer *l, const float *ir, const float *ic, float *router, const float *cand,
		       int64_t e, double router_err, double margin, const bool *gone)
{
	bool biased = router && cand && choice_not_topk(ir, router, l->positions, e, l->k);

	for (int64_t p = 0; p < l->positions; p++) {
		double gap = NAN, scale = 0;
		bool tie;
		if (gone[p]) {
			l->excluded++;
			continue;
		}
		if (same_set(ir + p * l->k, ic + p * l->k, l->k)) {
			l->agree++;
			continue;
		}
		double moved = biased ? toward(ir + p * l->k, ic + p * l->k, router + p * e, cand + p * e, l->k, e) : NAN;
		if (router)
			gap = kth_gap(router + p * e, e, l->k, &scale);
		tie = gap <= margin * scale || gap <= ROUTER_ERROR_TIES * router_err;
		if (!tie && router_err > 0 && moved > 0) {
			tie = true;
			gap = moved;
		}
		if (tie ? add_pos(&l->flipped, &l->n_flipped, p, gap) < 0
			: add_pos(&l->disagree, &l->n_disagree, p, gap) < 0)
			return -1;
	}
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

/* A cell that diverged only after the first flipped position (first), at
 * no position by more than the flipped positions themselves (worst, their
 * largest rel_l2 here): the later positions attended to a flipped one, so
 * its error came sideways as well as down, and rounding, not the port, put
 * it there.  Close, the reason saying so.  A flip at position 0 leaves no
 * position before it to show the cell right otherwise: it stays. */
static void judge_leak(tb_cell_result *c, int64_t first, double worst)
{
	const tb_metrics *m = &c->m;
	double most = 0;

	if (c->status != TB_ST_DIVERGED || c->tol.absolute || m->mismatch || c->shape_mismatch || first < 1 ||
	    !(worst > 0) || m->first_bad_position <= first)
		return;
	for (int64_t p = 0; p < m->n_pos; p++)
		if (isfinite(m->pos_rel_l2[p]))
			most = fmax(most, m->pos_rel_l2[p]);
	if (!(most <= worst))
		return;
	c->status = TB_ST_CLOSE;
	snprintf(c->reason, sizeof c->reason,
		 "rel_l2 %.3g, off only after the flip at position %lld and by less than the flipped positions (%.3g): "
		 "later positions attend to them",
		 m->rel_l2, (long long)first, worst);
}

/* A cell's metrics again without the positions in out[] (a flip upstream
 * sent them down other experts: their error is the flip's, not this
 * cell's).  Rows of cols values, position row % n_pos.  Cells with NaN or
 * Inf, or read from a partial dump or a sketch, keep theirs. */
static int exclude_positions(const tb_pair *pr, tb_cell_result *c, const bool *out, tb_err *err)
{
	int64_t np = c->m.n_pos, cols, rows, dropped = 0;
	const tb_metrics *m = &c->m;
	bool *kept;
	float *a, *b;
	resums s;

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
	kept = malloc((size_t)np * sizeof *kept);
	a = malloc((size_t)cols * sizeof *a);
	b = malloc((size_t)cols * sizeof *b);
	if (!kept || !a || !b || resums_init(&s, np) < 0) {
		free(kept);
		free(a);
		free(b);
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	for (int64_t p = 0; p < np; p++)
		kept[p] = !out[p];
	int got = tb_tensor_acquire(pr->ref, err) == 0 ? 1 + (tb_tensor_acquire(pr->cand, err) == 0) : 0;
	if (got < 2) {
		if (got)
			tb_tensor_release(pr->ref);
		free(s.pos);
		free(kept);
		free(a);
		free(b);
		return -1;
	}
	for (int64_t row = 0; row < rows; row++) {
		if (out[row % np])
			continue;
		tb_tensor_read_f32(pr->ref, (uint64_t)(row * cols), (uint64_t)cols, a);
		tb_tensor_read_f32(pr->cand, (uint64_t)(row * cols), (uint64_t)cols, b);
		for (int64_t i = 0; i < cols; i++)
			resums_add(&s, c, row % np, a[i], b[i], (uint64_t)(row * cols + i));
	}
	tb_tensor_release(pr->ref);
	tb_tensor_release(pr->cand);
	int64_t first = -1;
	double worst = 0;
	for (int64_t p = 0; p < np; p++) {
		if (!out[p])
			continue;
		first = first < 0 ? p : first;
		worst = fmax(worst, isfinite(c->m.pos_rel_l2[p]) ? c->m.pos_rel_l2[p] : 0);
		c->m.pos_rel_l2[p] = c->m.pos_cos[p] = c->m.pos_norm_ratio[p] = NAN;
	}
	c->excluded_positions = dropped;
	exclude_logits(c, out);
	resums_finish(&s, c, kept);
	judge_leak(c, first, worst);
	free(kept);
	free(a);
	free(b);
	return 0;
}

static int compare_layer(const tb_pairing *p, tb_result *r, int layer, double margin, bool **gone,
			 int64_t *n_gone, tb_routing_layer *l, tb_err *err)
{
	const tb_pair *ids = whole_pair(p, layer, TB_TAP_MLP_TOPK_IDS), *w = whole_pair(p, layer, TB_TAP_MLP_TOPK_WEIGHTS);
	const tb_pair *rt = whole_pair(p, layer, TB_TAP_MLP_ROUTER);
	tb_cell_result *rc = result_cell(r, layer, rt ? TB_TAP_MLP_ROUTER : TB_TAP_MLP_ROUTER_PROBS);
	tb_cell_result *c = result_cell(r, layer, TB_TAP_MLP_TOPK_IDS);
	float *ir = NULL, *ic = NULL, *scores = NULL, *cscores = NULL, *wr = NULL, *wc = NULL;
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
	if (scores && rt->cand->numel == rt->ref->numel && !(cscores = load(rt->cand, err)))
		goto out;
	if (!*gone) {
		*gone = calloc((size_t)l->positions, sizeof **gone);
		*n_gone = l->positions;
	}
	if (!*gone || *n_gone != l->positions)
		goto oom_or_other;
	/* the router judged without the positions flipped upstream, before its error counts as noise */
	if (rc && scores && rc->m.n_pos == l->positions) {
		long at = tb_pairing_find(p, &rc->cell);
		if (exclude_positions(at >= 0 ? &p->pairs[at] : NULL, rc, *gone, err) < 0)
			goto out;
	}
	/* the router's own error is noise only while it agrees: a diverged router's is the port's */
	if (route_layer(l, ir, ic, scores, cscores, e, rc && scores && rc->status != TB_ST_DIVERGED ? rc->m.max_abs : 0,
			margin, *gone) < 0 ||
	    judge_ids(c, l) < 0)
		goto oom;
	if (w && w->ref->numel == ids->ref->numel && w->cand->numel == ids->ref->numel) {
		tb_cell_result *wcell = result_cell(r, layer, TB_TAP_MLP_TOPK_WEIGHTS);
		if (!(wr = load(w->ref, err)) || !(wc = load(w->cand, err)))
			goto out;
		if (wcell && judge_weights(wcell, l, *gone, ir, ic, wr, wc) < 0)
			goto oom;
	}
	for (size_t f = 0; f < l->n_flipped; f++)
		(*gone)[l->flipped[f].pos] = true;
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
	free(cscores);
	free(wr);
	free(wc);
	return rc_;
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
	if (out->n)
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

	if (!pr || l->k > TB_ROUTING_K_MAX || pos < 0 || pos >= l->positions)
		return tb_err_setc(err, TB_ERR_LIMIT, NULL, "no expert ids of layer %d at position %lld", l->layer,
				   (long long)pos);
	for (int s = 0; s < 2; s++) {
		tb_tensor *t = s ? pr->cand : pr->ref;
		if (tb_tensor_acquire(t, err) < 0)
			return -1;
		tb_tensor_read_f32(t, (uint64_t)(pos * l->k), (uint64_t)l->k, v);
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
