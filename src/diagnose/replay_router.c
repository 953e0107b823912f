#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/replay_ops.h"

/* A router's weights: the scores of the chosen experts under a score
 * function, renormalised over the k chosen or not, times a scaling factor
 * (DeepSeek's routed_scaling_factor, fitted). */
typedef enum score_fn { SOFTMAX, SIGMOID, GIVEN, N_SCORES } score_fn;

static const char *const score_names[N_SCORES] = {"softmax", "sigmoid", "the dumped probabilities"};

typedef struct router_cfg {
	score_fn score;
	bool renorm;
	double scale;
	const double *bias; /* [e] added to the chosen scores before they are renormalised; NULL: none */
} router_cfg;

/* Scaling factors closer to each other than this are the same one. */
#define SAME_SCALE 1e-3

/* One side's tensors: scores [S, E], ids and weights [S, k]. */
typedef struct side {
	const float *scores, *ids, *weights;
	int64_t positions, e, k;
} side;

/* The weights cfg predicts for position p, before its scale. */
static bool predict(const side *s, int64_t p, const router_cfg *cfg, double *out)
{
	const float *row = s->scores + p * s->e;
	double top = -INFINITY, sum = 0, chosen = 0;

	score_fn fn = cfg->score;

	if (fn == SOFTMAX) {
		for (int64_t i = 0; i < s->e; i++)
			top = fmax(top, row[i]);
		for (int64_t i = 0; i < s->e; i++)
			sum += exp(row[i] - top);
	}
	for (int64_t j = 0; j < s->k; j++) {
		double id = s->ids[p * s->k + j];
		if (!(id >= 0 && id < (double)s->e))
			return false;
		double x = row[(int64_t)id];
		out[j] = fn == SOFTMAX ? exp(x - top) / sum : fn == SIGMOID ? 1 / (1 + exp(-x)) : x;
		out[j] += cfg->bias ? cfg->bias[(int64_t)id] : 0;
		chosen += out[j];
	}
	if (cfg->renorm && chosen > 0)
		for (int64_t j = 0; j < s->k; j++)
			out[j] /= chosen;
	return true;
}

/* rel_l2 of cfg against the side's weights; with fit, the scale that
 * fits best is found first (least squares) and stored in cfg. */
static double residual(const side *s, router_cfg *cfg, bool fit)
{
	double pw = 0, pp = 0, ww = 0, dd = 0, pred[64];

	for (int pass = fit ? 0 : 1; pass < 2; pass++) {
		for (int64_t p = 0; p < s->positions; p++) {
			if (!predict(s, p, cfg, pred))
				return INFINITY;
			for (int64_t j = 0; j < s->k; j++) {
				double w = s->weights[p * s->k + j];
				if (pass == 0) {
					pw += pred[j] * w;
					pp += pred[j] * pred[j];
				} else {
					double d = cfg->scale * pred[j] - w;
					dd += d * d;
					ww += w * w;
				}
			}
		}
		if (pass == 0)
			cfg->scale = pp > 0 ? pw / pp : 1;
	}
	return tb_rel_l2(dd, ww);
}

/* The reference's configuration: the score function and renormalisation
 * that reproduce its weights best, with the scale fitted. */
static router_cfg reference(const side *s, bool given, double *rel)
{
	router_cfg best = {GIVEN, false, 1, NULL}, c;

	*rel = INFINITY;
	for (int fn = given ? GIVEN : SOFTMAX; fn <= (given ? GIVEN : SIGMOID); fn++)
		for (int renorm = 0; renorm < 2; renorm++) {
			c = (router_cfg){(score_fn)fn, renorm, 1, NULL};
			double r = residual(s, &c, true);
			if (r < *rel) {
				*rel = r;
				best = c;
			}
		}
	return best;
}

/* Solve a[n][n] x = y in place (Gaussian elimination, partial pivoting);
 * false when singular. */
static bool solve(double *a, double *y, int64_t n)
{
	for (int64_t c = 0; c < n; c++) {
		int64_t piv = c;
		for (int64_t r = c + 1; r < n; r++)
			if (fabs(a[r * n + c]) > fabs(a[piv * n + c]))
				piv = r;
		if (!(fabs(a[piv * n + c]) > 1e-300))
			return false;
		for (int64_t j = 0; j < n; j++) {
			double t = a[c * n + j];
			a[c * n + j] = a[piv * n + j];
			a[piv * n + j] = t;
		}
		double t = y[c];
		y[c] = y[piv];
		y[piv] = t;
		for (int64_t r = c + 1; r < n; r++) {
			double f = a[r * n + c] / a[c * n + c];
			for (int64_t j = c; j < n; j++)
				a[r * n + j] -= f * a[c * n + j];
			y[r] -= f * y[c];
		}
	}
	for (int64_t c = n - 1; c >= 0; c--) {
		for (int64_t j = c + 1; j < n; j++)
			y[c] -= a[c * n + j] * y[j];
		y[c] /= a[c * n + c];
	}
	return true;
}

/* The per-expert offset b that, added to the chosen scores before the
 * reference's renormalisation and scale, reproduces the candidate's
 * weights best (least squares: renormalised, w_j (s_i + b_i) = w_i (s_j +
 * b_j) for the chosen i, j of a position; else w_i / scale - s_i), into
 * b[e].  A selection bias is not dumped: this is how a port that adds it
 * into the weights shows.  False when the positions do not pin it down. */
static bool fit_bias(const side *s, const router_cfg *ref, double *b)
{
	int64_t e = s->e;
	double *a = calloc((size_t)(e * e), sizeof *a), score[64];
	router_cfg plain = *ref;
	bool ok = a != NULL;

	plain.renorm = false;
	plain.bias = NULL;
	memset(b, 0, (size_t)e * sizeof *b);
	for (int64_t p = 0; ok && p < s->positions; p++) {
		const float *w = s->weights + p * s->k, *id = s->ids + p * s->k;
		if (!predict(s, p, &plain, score)) {
			ok = false;
			break;
		}
		for (int64_t j = 0; j < s->k; j++) {
			int64_t x = (int64_t)id[j];
			if (!ref->renorm) { /* one equation per weight: b_x = w / scale - s_x */
				a[x * e + x] += 1;
				b[x] += w[j] / ref->scale - score[j];
				continue;
			}
			for (int64_t i = 0; i < j; i++) { /* w_j b_y - w_i b_x = w_i s_x - w_j s_y, y = id[i] */
				int64_t y = (int64_t)id[i];
				double cy = w[j], cx = -w[i], rhs = w[i] * score[j] - w[j] * score[i];
				a[y * e + y] += cy * cy;
				a[x * e + x] += cx * cx;
				a[y * e + x] += cy * cx;
				a[x * e + y] += cy * cx;
				b[y] += cy * rhs;
				b[x] += cx * rhs;
			}
		}
	}
	/* experts never chosen: no offset */
	for (int64_t i = 0; ok && i < e; i++)
		if (a[i * e + i] == 0)
			a[i * e + i] = 1;
	ok = ok && solve(a, b, e);
	free(a);
	return ok;
}

static const char *scale_text(double s, char *buf, size_t size)
{
	snprintf(buf, size, "%.4g", s);
	return buf;
}

/* One change at a time to the reference's router, on the candidate. */
static void try_variants(const side *cand, const router_cfg *ref, bool given, tb_replay_best *best)
{
	router_cfg v;
	char a[32], b[32];

	if (!given) {
		v = *ref;
		v.score = ref->score == SOFTMAX ? SIGMOID : SOFTMAX;
		tb_replay_consider(best, residual(cand, &v, false), TB_CAUSE_MOE_ROUTING, "%s scores instead of %s",
				   score_names[v.score], score_names[ref->score]);
	}
	v = *ref;
	v.renorm = !ref->renorm;
	tb_replay_consider(best, residual(cand, &v, false), TB_CAUSE_MOE_ROUTING, "top-k weights %s",
			   v.renorm ? "renormalised (the reference: not)" : "not renormalised (the reference: renormalised)");
	double *bias = calloc((size_t)cand->e, sizeof *bias);
	if (bias && fit_bias(cand, ref, bias)) {
		double big = 0;
		for (int64_t i = 0; i < cand->e; i++)
			big = fmax(big, fabs(bias[i]));
		v = *ref;
		v.bias = bias;
		tb_replay_consider(best, residual(cand, &v, false), TB_CAUSE_MOE_ROUTING,
				   "selection bias added into the weights (fitted, largest %.3g)", big);
	}
	free(bias);
	v = *ref;
	double rel = residual(cand, &v, true);
	if (fabs(v.scale / ref->scale - 1) <= SAME_SCALE)
		return;
	if (fabs(ref->scale - 1) > SAME_SCALE && fabs(v.scale - 1) <= SAME_SCALE)
		tb_replay_consider(best, rel, TB_CAUSE_MOE_ROUTING, "routed scaling factor not applied (the reference: %s)",
				   scale_text(ref->scale, a, sizeof a));
	else if (fabs(ref->scale - 1) > SAME_SCALE && fabs(v.scale / (ref->scale * ref->scale) - 1) <= SAME_SCALE)
		tb_replay_consider(best, rel, TB_CAUSE_MOE_ROUTING, "routed scaling factor %s applied twice",
				   scale_text(ref->scale, a, sizeof a));
	else
		tb_replay_consider(best, rel, TB_CAUSE_MOE_ROUTING, "weights scaled by %s (the reference: %s)",
				   scale_text(v.scale, a, sizeof a), scale_text(ref->scale, b, sizeof b));
}

static void cfg_text(const router_cfg *c, char *buf, size_t size)
{
	char s[32];

	snprintf(buf, size, "%s, %s, scale %s", score_names[c->score], c->renorm ? "renormalised" : "not renormalised",
		 scale_text(c->scale, s, sizeof s));
}

int tb_replay_router(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	int layer = in->target->cell.layer;
	const tb_pair *scores = tb_replay_pair(in, layer, TB_TAP_MLP_ROUTER);
	const tb_pair *ids = tb_replay_pair(in, layer, TB_TAP_MLP_TOPK_IDS);
	const tb_pair *w = tb_replay_pair(in, layer, TB_TAP_MLP_TOPK_WEIGHTS);
	bool given = !scores, finite;
	tb_replay_sides v[3];
	side r, c;
	double ref_rel;
	char ref_name[64];
	tb_replay_best best = {"", TB_CAUSE_NONE, INFINITY};

	if (!scores)
		scores = tb_replay_pair(in, layer, TB_TAP_MLP_ROUTER_PROBS);
	if (!scores || !ids || !w) {
		snprintf(out->note, sizeof out->note,
			 "replaying mlp.topk_weights needs mlp.router (or mlp.router_probs) and mlp.topk_ids dumped on both "
			 "sides");
		return 0;
	}
	int64_t e = scores->ref->ndim ? scores->ref->shape[scores->ref->ndim - 1] : 0;
	int64_t k = ids->ref->ndim ? ids->ref->shape[ids->ref->ndim - 1] : 0;
	if (e <= 0 || k <= 0 || k > 64 || k > e || ids->ref->numel % (uint64_t)k ||
	    scores->ref->numel != ids->ref->numel / (uint64_t)k * (uint64_t)e || scores->cand->numel != scores->ref->numel ||
	    ids->cand->numel != ids->ref->numel || w->ref->numel != ids->ref->numel || w->cand->numel != ids->ref->numel) {
		snprintf(out->note, sizeof out->note,
			 "mlp.router, mlp.topk_ids and mlp.topk_weights differ in size: not one router's output");
		return 0;
	}
	out->tried = true;
	if (tb_replay_load_pairs((const tb_pair *const[]){scores, ids, w}, 3, v, &finite, err) < 0)
		return -1;
	if (!finite) {
		tb_replay_unload(v, 3);
		snprintf(out->note, sizeof out->note, "no replay from non-finite values");
		return 0;
	}
	r = (side){v[0].ref, v[1].ref, v[2].ref, (int64_t)(ids->ref->numel / (uint64_t)k), e, k};
	c = (side){v[0].cand, v[1].cand, v[2].cand, r.positions, e, k};
	router_cfg ref = reference(&r, given, &ref_rel);
	cfg_text(&ref, ref_name, sizeof ref_name);
	try_variants(&c, &ref, given, &best);
	router_cfg at_ref = ref;
	double cand_at_ref = residual(&c, &at_ref, false);
	tb_replay_unload(v, 3);
	tb_replay_decide(in, out, tb_replay_floor(w->ref, w->cand, 0x1p-20, 1),
			 &(tb_replay_fit){ref_name, ref_rel, cand_at_ref, best.name[0] ? best.name : NULL, best.cause,
					  best.rel_l2, 0});
	return 0;
}
