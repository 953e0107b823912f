#include "config.h"

#include <math.h>
#include <stdio.h>
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
} router_cfg;

/* Scaling factors closer to each other than this are the same one. */
#define SAME_SCALE 1e-3

/* One side's tensors: scores [S, E], ids and weights [S, k]. */
typedef struct side {
	const float *scores, *ids, *weights;
	int64_t positions, e, k;
} side;

/* The weights cfg predicts for position p, before its scale. */
static bool predict(const side *s, int64_t p, score_fn fn, bool renorm, double *out)
{
	const float *row = s->scores + p * s->e;
	double top = -INFINITY, sum = 0, chosen = 0;

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
		chosen += out[j];
	}
	if (renorm && chosen > 0)
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
			if (!predict(s, p, cfg->score, cfg->renorm, pred))
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
	router_cfg best = {GIVEN, false, 1}, c;

	*rel = INFINITY;
	for (int fn = given ? GIVEN : SOFTMAX; fn <= (given ? GIVEN : SIGMOID); fn++)
		for (int renorm = 0; renorm < 2; renorm++) {
			c = (router_cfg){(score_fn)fn, renorm, 1};
			double r = residual(s, &c, true);
			if (r < *rel) {
				*rel = r;
				best = c;
			}
		}
	return best;
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
					  best.rel_l2});
	return 0;
}
