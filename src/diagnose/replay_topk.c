#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "compare/selection.h"
#include "diagnose/replay_ops.h"

/* A position's set counts as missed only where the selection's gap on the
 * side's own scores exceeds this many of their roundings (times the
 * largest selection score): nearer, the side's own arithmetic chose. */
#define TIE_ROUNDINGS 8
/* The share of positions a fitted selection may miss on the reference. */
#define IDS_FLOOR 0.01

typedef struct side {
	const float *scores, *ids;
	int64_t positions, k;
	double tie; /* relative */
} side;

/* The fraction of positions whose set s does not reproduce, ties aside. */
static double misses(const tb_select *s, const side *d)
{
	int64_t n = 0;

	if (s->k != d->k)
		return 1;
	for (int64_t p = 0; p < d->positions; p++) {
		double gap, scale;
		bool agrees = tb_select_agrees(s, d->scores + p * s->e, d->ids + p * d->k, &gap, &scale);
		if (gap > d->tie * scale && !agrees)
			n++;
	}
	return (double)n / (double)d->positions;
}

static void describe(const tb_select *s, char *buf, size_t size)
{
	char groups[48] = "";

	if (s->groups)
		snprintf(groups, sizeof groups, ", the best %d of %d groups", s->topk_groups, s->groups);
	bool biased = false;
	for (int64_t i = 0; s->bias && i < s->e; i++)
		biased |= s->bias[i] != 0;
	snprintf(buf, size, "top-%lld of %s%s%s", (long long)s->k, tb_score_fn_names[s->fn],
		 biased ? " plus a fitted bias" : "", groups);
}

/* The residual of selection v on the candidate.  The reference's bias is
 * known only as far as its own choices pin it down; one bias is fitted
 * to both, the reference under its selection and the candidate under v
 * (starting from the reference's): the worse side's misses. */
static double on_candidate(const tb_select *ref, const side *r, tb_select v, const side *c)
{
	tb_select rs = *ref;
	double *bias, *spare, worst;

	if (v.k != c->k)
		return 1;
	if (!v.bias)
		return misses(&v, c);
	bias = malloc((size_t)ref->e * sizeof *bias);
	spare = malloc((size_t)ref->e * sizeof *spare);
	if (!bias || !spare) {
		free(bias);
		free(spare);
		return misses(&v, c);
	}
	memcpy(bias, ref->bias, (size_t)ref->e * sizeof *bias);
	rs.bias = v.bias = bias;
	tb_select_fit_bias((const tb_select_set[]){{&rs, r->scores, r->ids, r->positions},
						   {&v, c->scores, c->ids, c->positions}},
			   2, spare);
	worst = fmax(misses(&rs, r), misses(&v, c));
	free(bias);
	free(spare);
	return worst;
}

/* Keep the variant in best, and in *exact how many reproduce the
 * candidate outright (no position missed). */
#define CONSIDER(rel, ...)                                                          \
	do {                                                                         \
		double rel_ = (rel);                                                 \
		*exact += rel_ == 0;                                                 \
		tb_replay_consider(best, rel_, TB_CAUSE_MOE_ROUTING, __VA_ARGS__);   \
	} while (0)

/* One change at a time to the reference's selection, on the candidate. */
static void try_variants(const tb_select *ref, const side *r, const side *cand, tb_replay_best *best, int *exact)
{
	tb_select v = *ref;

	if (cand->k != ref->k) {
		v.k = cand->k;
		CONSIDER(on_candidate(ref, r, v, cand), "top-%lld experts (the reference: top-%lld)",
			 (long long)cand->k, (long long)ref->k);
		return;
	}
	if (ref->groups) {
		v = *ref;
		v.groups = v.topk_groups = 0;
		CONSIDER(on_candidate(ref, r, v, cand),
			 "group-limited top-k ignored (the reference: %d of %d groups)", ref->topk_groups, ref->groups);
	}
	if (ref->bias) {
		v = *ref;
		v.bias = NULL;
		CONSIDER(misses(&v, cand), "selection bias ignored");
	}
	/* a score function changes the choice only with a bias or groups: else top-k is order alone */
	for (int fn = TB_SCORE_SIGMOID; fn < TB_N_SCORE_FNS && (ref->bias || ref->groups); fn++) {
		if (fn == (int)ref->fn)
			continue;
		v = *ref;
		v.fn = (tb_score_fn)fn;
		CONSIDER(on_candidate(ref, r, v, cand), "%s scores before the top-k (the reference: %s)",
			 tb_score_fn_names[fn], tb_score_fn_names[ref->fn]);
	}
}

#undef CONSIDER

int tb_replay_topk_ids(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	int layer = in->target->cell.layer;
	const tb_pair *scores = tb_replay_pair(in, layer, TB_TAP_MLP_ROUTER);
	const tb_pair *ids = tb_replay_pair(in, layer, TB_TAP_MLP_TOPK_IDS);
	tb_replay_best best = {"", TB_CAUSE_NONE, INFINITY};
	tb_replay_sides v[2];
	tb_select sel;
	int64_t missed;
	bool finite;
	char ref_name[64];

	if (!scores)
		scores = tb_replay_pair(in, layer, TB_TAP_MLP_ROUTER_PROBS);
	if (!scores || !ids) {
		snprintf(out->note, sizeof out->note,
			 "replaying mlp.topk_ids needs mlp.router (or mlp.router_probs) dumped on both sides");
		return 0;
	}
	int64_t e = scores->ref->ndim ? scores->ref->shape[scores->ref->ndim - 1] : 0;
	int64_t kr = ids->ref->ndim ? ids->ref->shape[ids->ref->ndim - 1] : 0;
	int64_t kc = ids->cand->ndim ? ids->cand->shape[ids->cand->ndim - 1] : 0;
	if (e > TB_SELECT_MAX_E) {
		snprintf(out->note, sizeof out->note, "no replay of a router of %lld experts (at most %d)",
			 (long long)e, TB_SELECT_MAX_E);
		return 0;
	}
	if (e <= 0 || kr <= 0 || kc <= 0 || kr > 64 || kc > 64 || kr >= e || kc >= e ||
	    ids->ref->numel % (uint64_t)kr || scores->ref->numel != ids->ref->numel / (uint64_t)kr * (uint64_t)e ||
	    scores->cand->numel != scores->ref->numel || ids->cand->numel != ids->ref->numel / (uint64_t)kr * (uint64_t)kc) {
		snprintf(out->note, sizeof out->note,
			 "mlp.router and mlp.topk_ids differ in size: not one router's output");
		return 0;
	}
	out->tried = true;
	if (tb_replay_load_pairs((const tb_pair *const[]){scores, ids}, 2, v, &finite, err) < 0)
		return -1;
	if (!finite) {
		tb_replay_unload(v, 2);
		snprintf(out->note, sizeof out->note, "no replay from non-finite values");
		return 0;
	}
	int64_t positions = (int64_t)(ids->ref->numel / (uint64_t)kr);
	side r = {v[0].ref, v[1].ref, positions, kr, TIE_ROUNDINGS * tb_replay_rounding(scores->ref)};
	side c = {v[0].cand, v[1].cand, positions, kc, TIE_ROUNDINGS * tb_replay_rounding(scores->cand)};
	if (tb_select_fit(r.scores, r.ids, positions, e, kr, &sel, &missed) < 0) {
		tb_replay_unload(v, 2);
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		return -1;
	}
	describe(&sel, ref_name, sizeof ref_name);
	int exact = 0;
	try_variants(&sel, &r, &c, &best, &exact);
	double ref_rel = misses(&sel, &r), cand_at_ref = on_candidate(&sel, &r, sel, &c);
	tb_select_free(&sel);
	tb_replay_unload(v, 2);
	/* a set is right or wrong: the floor is half a position's share, or one
	 * in a hundred where the reference's narrowest gaps ask more of the
	 * fitted bias than its fit reaches */
	tb_replay_decide(in, out, fmax(0.5 / (double)positions, IDS_FLOOR),
			 &(tb_replay_fit){ref_name, ref_rel, cand_at_ref, best.name[0] ? best.name : NULL, best.cause,
					  best.rel_l2, 0});
	if (out->cause && exact > 1) {
		/* the ids of few positions fit more than one change: none is confirmed */
		out->cause = NULL;
		out->variant[0] = 0;
		snprintf(out->note, sizeof out->note,
			 "replay of L%d.mlp.topk_ids: %d changes to the reference's selection (%s) reproduce the "
			 "candidate, %s among them: its %lld positions do not tell them apart",
			 layer, exact, ref_name, best.name, (long long)positions);
	}
	return 0;
}
