#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "diagnose/replay_ops.h"

/* An MoE layer's combine: mlp.experts (the routed experts' weighted sum)
 * and mlp.shared (the shared expert after its gate).  Their inputs (each
 * expert's output, the gate's logit) are not dumped, so the reference's
 * configuration is its own output as it is, and the variants are what a
 * port does to it at the combine: the shared expert left out, its gate
 * (Qwen2-MoE's sigmoid(x . w_gate), one factor per position) dropped or
 * applied twice, the routed sum scaled once more (DeepSeek's
 * routed_scaling_factor at the combine as well as in the weights). */

/* Factors this close to one another are one factor. */
#define SAME_FACTOR 1e-3

typedef struct rows {
	const float *ref, *cand;
	int64_t n, cols;
} rows;

/* Row p's least-squares factor f with cand = f ref. */
static double row_factor(const rows *d, int64_t p)
{
	double rc = 0, rr = 0;

	for (int64_t i = 0; i < d->cols; i++) {
		rc += (double)d->ref[p * d->cols + i] * d->cand[p * d->cols + i];
		rr += (double)d->ref[p * d->cols + i] * d->ref[p * d->cols + i];
	}
	return rr > 0 ? rc / rr : 0;
}

/* rel_l2 of cand against f(p) ref, f one factor per row (per_row) or
 * *one for all (fitted when fit), relative to the reference. */
static double residual(const rows *d, bool per_row, double *one, bool fit, double *lo, double *hi)
{
	double dd = 0, rr = 0, rc = 0;

	if (fit) {
		for (int64_t i = 0; i < d->n * d->cols; i++) {
			rc += (double)d->ref[i] * d->cand[i];
			rr += (double)d->ref[i] * d->ref[i];
		}
		*one = rr > 0 ? rc / rr : 0;
		rr = 0;
	}
	*lo = INFINITY;
	*hi = -INFINITY;
	for (int64_t p = 0; p < d->n; p++) {
		double f = per_row ? row_factor(d, p) : *one;
		*lo = fmin(*lo, f);
		*hi = fmax(*hi, f);
		for (int64_t i = 0; i < d->cols; i++) {
			double r = d->ref[p * d->cols + i], x = d->cand[p * d->cols + i] - f * r;
			dd += x * x;
			rr += r * r;
		}
	}
	return tb_rel_l2(dd, rr);
}

/* The shared expert's variants on the candidate. */
static void shared_variants(const rows *d, tb_replay_best *best)
{
	double one = 0, lo, hi, rel = residual(d, false, &one, false, &lo, &hi);

	tb_replay_consider(best, rel, TB_CAUSE_SHARED_EXPERT, "shared expert left out");
	rel = residual(d, true, &one, false, &lo, &hi);
	if (hi - lo <= SAME_FACTOR * fabs(hi))
		tb_replay_consider(best, rel, TB_CAUSE_SHARED_EXPERT, "shared expert scaled by %.4g", hi);
	else if (lo > 1) /* cand = ref / g, g = sigmoid(.) in (0, 1) */
		tb_replay_consider(best, rel, TB_CAUSE_SHARED_EXPERT, "shared expert's gate not applied");
	else if (lo > 0 && hi < 1) /* cand = ref g */
		tb_replay_consider(best, rel, TB_CAUSE_SHARED_EXPERT, "shared expert's gate applied twice");
	else
		tb_replay_consider(best, rel, TB_CAUSE_SHARED_EXPERT,
				   "shared expert's gate differs (a factor per position)");
}

/* The routed sum's variant: one factor more at the combine. */
static void experts_variants(const rows *d, tb_replay_best *best)
{
	double one, lo, hi, rel = residual(d, false, &one, true, &lo, &hi);

	tb_replay_consider(best, rel, TB_CAUSE_MOE_ROUTING, "routed experts' sum scaled by %.4g at the combine", one);
}

int tb_replay_combine(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	tb_tap_id id = in->target->cell.id;
	int layer = in->target->cell.layer;
	const tb_pair *t = tb_replay_pair(in, layer, id);
	const tb_cell_result *w = tb_result_cell(in->r, layer, TB_TAP_MLP_TOPK_WEIGHTS);
	const tb_pair *const p[1] = {t};
	tb_replay_best best = {"", TB_CAUSE_NONE, INFINITY};
	tb_replay_sides v;
	uint64_t n, cols;
	bool finite;

	if (!t) {
		snprintf(out->note, sizeof out->note, "replaying the combine needs %s dumped whole on both sides",
			 in->target->cell.tap);
		return 0;
	}
	/* a routed sum off by one factor is the combine's only while the weights it applies agree */
	if (id == TB_TAP_MLP_EXPERTS && (!w || (w->status != TB_ST_MATCH && w->status != TB_ST_CLOSE))) {
		snprintf(out->note, sizeof out->note,
			 "replay of mlp.experts: the combine is told apart only where mlp.topk_weights is dumped and "
			 "agrees");
		return 0;
	}
	if (!tb_replay_rows(out, p, 1, 2, &n, &cols))
		return 0;
	out->tried = true;
	if (tb_replay_load_pairs(p, 1, &v, &finite, err) < 0)
		return -1;
	if (!finite) {
		tb_replay_unload(&v, 1);
		snprintf(out->note, sizeof out->note, "no replay from non-finite values");
		return 0;
	}
	rows d = {v.ref, v.cand, (int64_t)n, (int64_t)cols};
	double one = 1, lo, hi, cand_at_ref = residual(&d, false, &one, false, &lo, &hi);
	if (id == TB_TAP_MLP_SHARED)
		shared_variants(&d, &best);
	else
		experts_variants(&d, &best);
	tb_replay_unload(&v, 1);
	tb_replay_decide(in, out, tb_replay_floor(t->ref, t->cand, 0x1p-20, 1),
			 &(tb_replay_fit){id == TB_TAP_MLP_SHARED ? "the reference's shared expert"
								  : "the reference's routed experts' sum",
					  0, cand_at_ref, best.name[0] ? best.name : NULL, best.cause, best.rel_l2, 0});
	return 0;
}
