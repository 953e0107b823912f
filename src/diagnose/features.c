#include "config.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/features.h"
#include "compare/pairstat.h"
#include "diagnose/heads.h"
#include "diagnose/softcap.h"
#include "diagnose/ropeband.h"

const tb_feature_info tb_feature_table[TB_F_COUNT] = {
#define TB_FEATURE_INFO(id, name, unit, meaning) [TB_F_##id] = {name, unit, meaning},
	TB_FEATURES(TB_FEATURE_INFO)
#undef TB_FEATURE_INFO
};

/* Similarity that counts as "the same row / head". */
#define SAME_COS 0.98
/* How much the error must jump at a window boundary, and how exact the
 * positions before it must be (a window changes nothing there: what they
 * may carry is the error of the cell's inputs, a precision floor). */
#define WINDOW_JUMP 10.0
#define WINDOW_EXACT 1e-4
/* Positions after a flipped one in which a leak through attention first shows (flips_before). */
#define LEAK_SPAN 8
/* The length-free features (early_cos, early_log_norm_ratio, early_pos1_share)
 * read positions 1 to EARLY_POS - 1: a causal attention computes the same
 * there whatever the length, and most prompts have them. */
#define EARLY_POS 16

int tb_feature_lookup(const char *name)
{
	for (int i = 0; i < TB_F_COUNT; i++)
		if (!strcmp(tb_feature_table[i].name, name))
			return i;
	return -1;
}

static bool compared(const tb_cell_result *c)
{
	return c && c->ref && c->cand;
}

static bool ok_status(const tb_cell_result *c)
{
	return c->status == TB_ST_MATCH || c->status == TB_ST_CLOSE;
}

/* 1/0 for a sibling's state, NaN when it was not dumped on both sides. */
static double sibling_ok(const tb_result *r, int layer, tb_tap_id tap)
{
	const tb_cell_result *c = tb_result_cell(r, layer, tap);

	return compared(c) ? ok_status(c) : NAN;
}

/* c is a sub-tap of group cell g (L3.attn.o of L3.attn): part of g, not upstream of it. */
static bool in_group(const tb_cell_result *c, const tb_cell_result *g)
{
	tb_tap_id parent = tb_cell_parent(&c->cell);

	return parent && c->cell.layer == g->cell.layer && parent == g->cell.id;
}

/* The target layer's MoE cells (NaN where not dumped on both sides). */
static void moe_where(const tb_result *r, int layer, double *v)
{
	const tb_cell_result *ids = tb_result_cell(r, layer, TB_TAP_MLP_TOPK_IDS);

	v[TB_F_MOE_ROUTER_OK] = sibling_ok(r, layer, TB_TAP_MLP_ROUTER);
	if (isnan(v[TB_F_MOE_ROUTER_OK]))
		v[TB_F_MOE_ROUTER_OK] = sibling_ok(r, layer, TB_TAP_MLP_ROUTER_PROBS);
	v[TB_F_MOE_IDS_OK] = sibling_ok(r, layer, TB_TAP_MLP_TOPK_IDS);
	v[TB_F_MOE_WEIGHTS_OK] = sibling_ok(r, layer, TB_TAP_MLP_TOPK_WEIGHTS);
	v[TB_F_MOE_EXPERTS_OK] = sibling_ok(r, layer, TB_TAP_MLP_EXPERTS);
	/* DeepSeek's shared experts, or Qwen2-MoE's shared expert before its gate */
	const tb_cell_result *sh = tb_result_cell(r, layer, TB_TAP_MLP_SHARED);
	tb_cell se;
	long k;
	tb_cell_make(&se, layer, "mlp.shared_pre");
	k = tb_result_find(r, &se);
	v[TB_F_MOE_SHARED_ONE_SIDE] = (sh && !sh->ref != !sh->cand) ||
				      (k >= 0 && !r->cells[k].ref != !r->cells[k].cand);
	/* judged by its sets (compare/routing.h): the share of compared positions that agree */
	v[TB_F_MOE_AGREE] = compared(ids) ? ids->m.allclose_frac : NAN;
}

/* The first position flipped at a near tie in an MoE layer upstream of the
 * target, and whether the target goes bad just after a flipped position.
 * A flip reaches other positions only through attention, so the error must
 * be born in an attention cell or a block (where attention is not dumped);
 * one born in a norm or an MLP is that op's own.  Through attention the
 * positions right after a flipped one see it most: the first bad position
 * comes within LEAK_SPAN after one. */
static void flips_before(const tb_result *r, long target, double *v)
{
	const tb_cell_result *t = &r->cells[target];
	tb_tap_id tap = t->cell.id;
	bool mixes = tap == TB_TAP_ATTN || tb_cell_parent(&t->cell) == TB_TAP_ATTN || tap == TB_TAP_BLOCK, leak = false;
	int64_t first = -1, bad = t->m.first_bad_position;

	for (long i = 0; i < target; i++) {
		const tb_cell_result *c = &r->cells[i];
		for (size_t f = 0; c->by_sets && f < c->n_flips; f++) {
			first = first < 0 || c->flips[f] < first ? c->flips[f] : first;
			leak |= c->flips[f] < bad && bad <= c->flips[f] + LEAK_SPAN;
		}
	}
	v[TB_F_FLIP_POS] = first >= 0 ? (double)first : NAN;
	v[TB_F_FLIP_LEAK] = mixes && leak;
}

static void where(const tb_result *r, long target, double *v)
{
	const tb_cell_result *t = &r->cells[target];
	tb_tap_id tap = t->cell.id, parent = tb_cell_parent(&t->cell);
	bool exact = true, ok = true;

	v[TB_F_LAYER] = t->cell.layer;
	v[TB_F_AT_EMBED] = tap == TB_TAP_EMBED;
	v[TB_F_AT_ATTN_NORM] = tap == TB_TAP_ATTN_NORM;
	v[TB_F_AT_ATTN] = tap == TB_TAP_ATTN;
	v[TB_F_AT_ATTN_SUB] = parent == TB_TAP_ATTN;
	v[TB_F_AT_QK_SUB] = tap == TB_TAP_ATTN_Q || tap == TB_TAP_ATTN_K;
	v[TB_F_AT_MLP_NORM] = tap == TB_TAP_MLP_NORM;
	v[TB_F_AT_MLP] = tap == TB_TAP_MLP;
	v[TB_F_AT_MLP_SUB] = parent == TB_TAP_MLP;
	v[TB_F_AT_MOE_ROUTER] = tap == TB_TAP_MLP_ROUTER || tap == TB_TAP_MLP_ROUTER_PROBS;
	v[TB_F_AT_MOE_IDS] = tap == TB_TAP_MLP_TOPK_IDS;
	v[TB_F_AT_MOE_WEIGHTS] = tap == TB_TAP_MLP_TOPK_WEIGHTS;
	v[TB_F_AT_MOE_EXPERTS] = tap == TB_TAP_MLP_EXPERTS;
	v[TB_F_AT_MOE_SHARED] = tap == TB_TAP_MLP_SHARED;
	v[TB_F_AT_BLOCK] = tap == TB_TAP_BLOCK;
	v[TB_F_AT_FINAL_NORM] = tap == TB_TAP_FINAL_NORM;
	v[TB_F_AT_LOGITS] = tap == TB_TAP_LOGITS;
	v[TB_F_AT_NORM] = v[TB_F_AT_ATTN_NORM] || v[TB_F_AT_MLP_NORM] || v[TB_F_AT_FINAL_NORM];
	v[TB_F_FIRST_LAYER] = t->cell.layer == 0;
	v[TB_F_DEEP] = t->cell.layer > 0;
	for (long i = 0; i < target; i++) {
		const tb_cell_result *c = &r->cells[i];
		if (!compared(c) || in_group(c, t))
			continue;
		exact = exact && c->status == TB_ST_MATCH;
		ok = ok && ok_status(c);
	}
	v[TB_F_UPSTREAM_EXACT] = exact;
	v[TB_F_UPSTREAM_OK] = ok;
	flips_before(r, target, v);
	if (t->cell.layer >= 0) {
		v[TB_F_ATTN_OK] = sibling_ok(r, t->cell.layer, TB_TAP_ATTN);
		v[TB_F_MLP_OK] = sibling_ok(r, t->cell.layer, TB_TAP_MLP);
		v[TB_F_ATTN_NORM_OK] = sibling_ok(r, t->cell.layer, TB_TAP_ATTN_NORM);
		v[TB_F_MLP_NORM_OK] = sibling_ok(r, t->cell.layer, TB_TAP_MLP_NORM);
		v[TB_F_SIBLINGS_OK] = v[TB_F_ATTN_OK] == 1 && v[TB_F_MLP_OK] == 1;
		moe_where(r, t->cell.layer, v);
		v[TB_F_ATTN_SUB_BAD] = 0;
		for (size_t i = 0; i < r->n_cells; i++) {
			const tb_cell_result *c = &r->cells[i];
			if (c->cell.layer == t->cell.layer &&
			    (c->cell.id == TB_TAP_ATTN_Q || c->cell.id == TB_TAP_ATTN_K) && c->status == TB_ST_DIVERGED)
				v[TB_F_ATTN_SUB_BAD] = 1;
		}
	}
}

static void global_counts(const tb_result *r, double *v)
{
	size_t compared_n = 0, div = 0, close = 0;
	bool only_logits = true, only_fl = true, fn_div = false, lg_div = false, nan_any = false;
	const tb_cell_result *fn = tb_result_cell(r, -1, TB_TAP_FINAL_NORM), *em = tb_result_cell(r, -1, TB_TAP_EMBED);

	for (size_t i = 0; i < r->n_cells; i++) {
		const tb_cell_result *c = &r->cells[i];
		if (!compared(c))
			continue;
		compared_n++;
		close += c->status == TB_ST_CLOSE;
		nan_any = nan_any || c->m.mismatch > 0;
		if (c->status != TB_ST_DIVERGED)
			continue;
		div++;
		bool is_lg = c->cell.id == TB_TAP_LOGITS, is_fn = c->cell.id == TB_TAP_FINAL_NORM;
		lg_div = lg_div || is_lg;
		fn_div = fn_div || is_fn;
		only_logits = only_logits && is_lg;
		only_fl = only_fl && (is_lg || is_fn);
	}
	v[TB_F_N_LAYERS] = r->n_layers;
	v[TB_F_N_DIVERGED] = (double)div;
	v[TB_F_N_CLOSE] = (double)close;
	v[TB_F_N_COMPARED] = (double)compared_n;
	v[TB_F_CLOSE_FRAC] = compared_n ? (double)close / (double)compared_n : 0;
	v[TB_F_DIVERGED_FRAC] = compared_n ? (double)div / (double)compared_n : 0;
	v[TB_F_NONE_DIVERGED] = div == 0;
	v[TB_F_ONLY_LOGITS] = div > 0 && only_logits;
	v[TB_F_ONLY_FINAL_AND_LOGITS] = div > 0 && only_fl && fn_div && lg_div;
	v[TB_F_FINAL_NORM_OK] = compared(fn) ? ok_status(fn) : NAN;
	v[TB_F_FINAL_NORM_REL_L2] = compared(fn) ? fn->m.rel_l2 : NAN;
	v[TB_F_EMBED_REL] = compared(em) ? em->m.rel_l2 : NAN;
	v[TB_F_EMBED_COS] = compared(em) ? em->m.cosine : NAN;
	v[TB_F_NAN_ANY] = nan_any;
	v[TB_F_NAN_FIRST] = 0;
	for (size_t i = 0; i < r->n_cells && !v[TB_F_NAN_FIRST]; i++)
		if (compared(&r->cells[i]))
			v[TB_F_NAN_FIRST] = (double)r->cells[i].m.mismatch;
}

static void scale_and_direction(const tb_cell_result *t, double *v)
{
	const tb_metrics *m = &t->m;
	int64_t h = t->ndim > 0 ? t->shape[t->ndim - 1] : 0;

	v[TB_F_REL_L2] = m->rel_l2;
	v[TB_F_COSINE] = m->cosine;
	v[TB_F_NORM_RATIO] = m->norm_ratio;
	v[TB_F_LOG_NORM_RATIO] = fabs(log(m->norm_ratio));
	v[TB_F_ALLCLOSE_FRAC] = m->allclose_frac;
	v[TB_F_MISMATCH] = (double)m->mismatch;
	if (h > 0) {
		double s = m->norm_ratio >= 1 ? m->norm_ratio : 1 / m->norm_ratio;
		v[TB_F_SCALE_VS_SQRT_H] = s / sqrt((double)h);
	}
	if (t->logits) {
		v[TB_F_KL_MEAN] = t->logits->kl_mean;
		v[TB_F_TOP1_AGREE] = t->logits->top1_agree;
	}
}

/* Least-squares slope of log e[p] against log p over p in [lo, hi). */
static double log_slope(const double *e, int64_t lo, int64_t hi)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0;
	int64_t n = 0;

	for (int64_t p = lo; p < hi; p++) {
		if (!(e[p] > 0) || !isfinite(e[p]))
			continue;
		double x = log((double)p), y = log(e[p]);
		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
		n++;
	}
	return n >= 3 && n * sxx - sx * sx > 0 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : NAN;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Was position p's row dumped?  A partial dump prints some rows only; the
 * profile holds NaN for the others. */
static bool seen_at(const double *e, int64_t p)
{
	return !isnan(e[p]);
}

/* max(e[1..4]) / median(e[1..S-1]) over the positions dumped: how much of
 * its final size the error already has right after position 0. */
static double early_ratio(const double *e, int64_t S)
{
	double *sorted, early = NAN, med;
	int64_t n = 0;

	if (S < 6)
		return NAN;
	sorted = malloc((size_t)(S - 1) * sizeof *sorted);
	if (!sorted)
		return NAN;
	for (int64_t p = 1; p < S; p++) {
		if (!seen_at(e, p))
			continue;
		sorted[n] = isfinite(e[p]) ? e[p] : INFINITY;
		if (p <= 4)
			early = isnan(early) ? sorted[n] : fmax(early, sorted[n]);
		n++;
	}
	qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
	med = n >= 5 ? sorted[(n - 1) / 2] : NAN;
	free(sorted);
	return med > 0 ? early / med : NAN;
}

/* The mean of a per-position measure over positions 1 to n - 1: under a
 * causal mask they see the same keys at any length, where the whole
 * tensor's cosine and norm ratio drift as positions are added (an error
 * that grows with position weighs more). */
static double early_mean(const tb_metrics *m, const double *x, int64_t n)
{
	double sum = 0;
	int64_t k = 0;

	for (int64_t p = 1; p < n; p++) {
		if (!seen_at(m->pos_rel_l2, p) || !isfinite(x[p]))
			continue;
		sum += x[p];
		k++;
	}
	return k ? sum / (double)k : NAN;
}

/* e[1] over the largest of e[1..n-1]: pos1_share without the later
 * positions, whose largest error only grows as more are added. */
static double early_pos1_share(const double *e, int64_t n)
{
	double mx = 0;

	for (int64_t p = 1; p < n; p++)
		if (seen_at(e, p))
			mx = isfinite(e[p]) ? fmax(mx, e[p]) : INFINITY;
	return n > 1 && mx > 0 && isfinite(mx) ? e[1] / mx : NAN;
}

static void position_profile(const tb_cell_result *t, double input_rel, double *v)
{
	const tb_metrics *m = &t->m;
	int64_t S = m->n_pos, bad = 0, ratios = 0;
	double d = t->tol.diverge, mx = 0, rs = 0, rss = 0;
	if (S <= 0 || m->pos_seen <= 0)
		return;
	v[TB_F_N_POS] = (double)S;
	v[TB_F_POS0_REL] = m->pos_rel_l2[0];
	v[TB_F_POS0_OK] = seen_at(m->pos_rel_l2, 0) ? m->pos_rel_l2[0] <= d : NAN;
	v[TB_F_POS1_REL] = S > 1 ? m->pos_rel_l2[1] : NAN;
	v[TB_F_FIRST_BAD_POS] = (double)m->first_bad_position;
	v[TB_F_LAST_POS_OK] = seen_at(m->pos_rel_l2, S - 1) ? m->pos_rel_l2[S - 1] <= d : NAN;
	v[TB_F_POS_COS_MIN] = 1;
	for (int64_t p = 0; p < S; p++) {
		double e = m->pos_rel_l2[p];
		if (!seen_at(m->pos_rel_l2, p))
			continue;
		bad += !(e <= d);
		if (e > mx || isnan(e))
			mx = isnan(e) ? INFINITY : e;
		if (m->pos_cos[p] < v[TB_F_POS_COS_MIN])
			v[TB_F_POS_COS_MIN] = m->pos_cos[p];
		if (isfinite(m->pos_norm_ratio[p])) {
			ratios++;
			rs += m->pos_norm_ratio[p];
			rss += m->pos_norm_ratio[p] * m->pos_norm_ratio[p];
		}
	}
	v[TB_F_POS_MAX_REL] = mx;
	if (mx > 0)
		v[TB_F_POS0_SHARE] = v[TB_F_POS0_REL] / mx;
	if (S > 1 && mx > 0 && isfinite(mx))
		v[TB_F_POS1_SHARE] = m->pos_rel_l2[1] / mx;
	v[TB_F_BAD_POS_FRAC] = (double)bad / (double)m->pos_seen;
	v[TB_F_LATE_ONLY] = m->first_bad_position >= 100;
	v[TB_F_EARLY_SMALL] = S > 1 && m->pos_rel_l2[1] < 0.1 * mx;
	v[TB_F_POS_GROWTH] = log_slope(m->pos_rel_l2, 1, S);
	v[TB_F_EARLY_RATIO] = early_ratio(m->pos_rel_l2, S);
	v[TB_F_EARLY_GROWTH] = log_slope(m->pos_rel_l2, 1, S < 9 ? S : 9);
	v[TB_F_EARLY_COS] = early_mean(m, m->pos_cos, S < EARLY_POS ? S : EARLY_POS);
	v[TB_F_EARLY_LOG_NORM_RATIO] = fabs(log(early_mean(m, m->pos_norm_ratio, S < EARLY_POS ? S : EARLY_POS)));
	v[TB_F_EARLY_POS1_SHARE] = early_pos1_share(m->pos_rel_l2, S < EARLY_POS ? S : EARLY_POS);
	if (v[TB_F_EARLY_LOG_NORM_RATIO] > 0)
		v[TB_F_EARLY_TURN_RATIO] = (1 - v[TB_F_EARLY_COS]) /
					   (v[TB_F_EARLY_LOG_NORM_RATIO] * v[TB_F_EARLY_LOG_NORM_RATIO]);
	if (ratios > 0) {
		double mean = rs / (double)ratios;
		v[TB_F_SCALE_MEAN] = mean;
		v[TB_F_SCALE_SPREAD] = mean > 0 ? sqrt(fmax(0, rss / (double)ratios - mean * mean)) / mean : NAN;
	}
	/* non-causal attention: the last position sees everything either way,
	 * so it is computed alike, to the dtypes' rounding (a dropped sink
	 * also fades along the positions but still weighs on the last) */
	if (S >= 3) {
		int64_t before_bad = 0, before = 0;
		double exact = fmax(WINDOW_EXACT, fmax(2 * input_rel, (tb_dtype_rounding(t->ref->dtype) +
									 tb_dtype_rounding(t->cand->dtype)) / sqrt(3)));
		for (int64_t p = 0; p < S - 1; p++) {
			before += seen_at(m->pos_rel_l2, p);
			before_bad += seen_at(m->pos_rel_l2, p) && !(m->pos_rel_l2[p] <= d);
		}
		v[TB_F_MASK_PATTERN] = v[TB_F_LAST_POS_OK] == 1 && m->pos_rel_l2[S - 1] <= exact && before >= 2 &&
				       before_bad >= before * 8 / 10;
	}
	/* A window: exact (or nearly) below W, a jump at W, off after it.  A
	 * smooth rise (RoPE base) crosses --diverge somewhere too, but
	 * without the jump. */
	v[TB_F_WINDOW] = -1;
	if (m->first_bad_position >= 2) {
		int64_t w = m->first_bad_position, after = 0, later = 0;
		double before = 0;
		for (int64_t p = 0; p < w; p++)
			before = seen_at(m->pos_rel_l2, p) ? fmax(before, m->pos_rel_l2[p]) : before;
		for (int64_t p = w; p < S; p++) {
			later += seen_at(m->pos_rel_l2, p);
			after += seen_at(m->pos_rel_l2, p) && !(m->pos_rel_l2[p] <= d);
		}
		if (after >= later * 8 / 10 && m->pos_rel_l2[w] >= WINDOW_JUMP * before &&
		    before <= fmax(WINDOW_EXACT, 2 * input_rel))
			v[TB_F_WINDOW] = (double)w;
	}
}

/* Where the decode steps start (the first step's length, when every step
 * was stitched) and whether the target goes bad exactly there; or which
 * decode step is compared alone. */
static void decode_steps(const tb_session *s, const tb_cell_result *t, double *v)
{
	const tb_metrics *m = &t->m;
	long start = s->cand->layout.first_len ? s->cand->layout.first_len : s->ref->layout.first_len;
	const tb_tree_layout *l = &s->cand->layout;

	if (l->n_steps > 1 && l->step > l->first_step)
		v[TB_F_DECODE_STEP] = l->step;

	if (start > 0 && (s->cand->layout.n_steps > 1 || s->ref->layout.n_steps > 1)) {
		v[TB_F_DECODE_START] = (double)start;
		v[TB_F_FROM_DECODE] = m->first_bad_position == start;
	}
}

/* Per-head agreement and the head x head similarity (sgemm). */
static void head_features(const tb_cell_result *t, const tb_heads *hs, double *v)
{
	int heads = hs->n;
	int64_t K, sq[TB_MAX_DIMS];
	uint64_t inner, numel = t->ref->numel;
	float *r = NULL, *c = NULL, *A = NULL, *B = NULL, *G = NULL;
	double *nr = NULL, *nc = NULL;
	int ok = 0, perm = 0;
	tb_err err;

	if (heads <= 1 || numel != t->cand->numel || t->shape_mismatch)
		return;
	/* Elements run in blocks of inner that belong to one head, heads in turn. */
	inner = (uint64_t)hs->head_dim;
	if (hs->layout == TB_HEADS_SPLIT)
		inner *= (uint64_t)sq[tb_tensor_squeezed(t->ref, sq) - 2];
	K = (int64_t)(numel / (uint64_t)heads);
	r = tb_tensor_load_f32(t->ref, &err);
	c = r ? tb_tensor_load_f32(t->cand, &err) : NULL;
	A = malloc((size_t)(heads * K) * sizeof *A);
	B = malloc((size_t)(heads * K) * sizeof *B);
	G = malloc((size_t)heads * heads * sizeof *G);
	nr = calloc((size_t)heads, sizeof *nr);
	nc = calloc((size_t)heads, sizeof *nc);
	if (!r || !c || !A || !B || !G || !nr || !nc)
		goto out;
	/* Gather each head's elements, in order, into a row: [heads, K]. */
	for (uint64_t i = 0; i < numel; i++) {
		uint64_t h = i / inner % (uint64_t)heads;
		uint64_t at = h * (uint64_t)K + i / (inner * (uint64_t)heads) * inner + i % inner;
		A[at] = isfinite(r[i]) ? r[i] : 0;
		B[at] = isfinite(c[i]) ? c[i] : 0;
	}
	for (int64_t h = 0; h < heads; h++) {
		double dd = 0, rr = 0;
		for (int64_t k = 0; k < K; k++) {
			double d = (double)B[h * K + k] - A[h * K + k];
			dd += d * d;
			rr += (double)A[h * K + k] * A[h * K + k];
			nc[h] += (double)B[h * K + k] * B[h * K + k];
		}
		nr[h] = rr;
		ok += tb_rel_l2(dd, rr) <= t->tol.diverge;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, heads, heads, (int)K, 1.0f, A, (int)K, B, (int)K, 0.0f, G,
		    heads);
	for (int j = 0; j < heads; j++) {
		int best = -1;
		double best_cos = -2, own = 0;
		for (int i = 0; i < heads; i++) {
			double cs = nr[i] > 0 && nc[j] > 0 ? G[i * heads + j] / sqrt(nr[i] * nc[j]) : 0;
			if (i == j)
				own = cs;
			if (cs > best_cos) {
				best_cos = cs;
				best = i;
			}
		}
		perm += best != j && best_cos > SAME_COS && own < SAME_COS;
	}
	v[TB_F_HEADS] = heads;
	v[TB_F_HEAD_OK_FRAC] = (double)ok / heads;
	v[TB_F_HEAD_PERM] = perm;
out:
	free(r);
	free(c);
	free(A);
	free(B);
	free(G);
	free(nr);
	free(nc);
}

/* Rows [S, H] of an activation (first batch entry). */
static bool rows_of(const tb_cell_result *t, int64_t *S, int64_t *H)
{
	int64_t sh[TB_MAX_DIMS];
	int n = tb_tensor_squeezed(t->ref, sh);

	if (n < 2 || t->shape_mismatch)
		return false;
	*H = sh[n - 1];
	*S = sh[n - 2];
	return *S > 1 && *H > 0;
}

/* The whole tensor's [S, H] of t (a partial dump's whole shape). */
static bool whole_rows(const tb_tensor *t, int64_t *S, int64_t *H)
{
	int64_t sh[TB_MAX_DIMS];

	if ((t->partial ? tb_shape_squeeze(t->partial->ndim, t->partial->shape, sh) : tb_tensor_squeezed(t, sh)) != 2)
		return false;
	*S = sh[0];
	*H = sh[1];
	return *S > 1 && *H > 0;
}

/* embed_shift for a partial dump against a whole tensor, whatever their
 * lengths (a sequence one token short is the shift's own signature): each
 * printed row p against the whole side's rows p - 1, p and p + 1, at the
 * columns printed. */
static void partial_embed_shift(const tb_cell_result *t, double *v)
{
	const tb_tensor *pt = t->cand->partial ? t->cand : t->ref, *wt = pt == t->cand ? t->ref : t->cand;
	const tb_partial *pa = pt->partial;
	int64_t Sp, Sw, H, Hw;
	float *pv = NULL, *w = NULL;
	double shifted[2] = {0, 0}, rows[2] = {0, 0};
	tb_err err;

	if (wt->partial || !whole_rows(pt, &Sp, &H) || !whole_rows(wt, &Sw, &Hw) || H != Hw || pt->numel != pa->n)
		return;
	pv = tb_tensor_load_f32(pt, &err);
	w = pv ? tb_tensor_load_f32(wt, &err) : NULL;
	for (uint64_t i = 0; w && i < pa->n;) {
		int64_t p = (int64_t)(pa->index[i] / (uint64_t)H);
		uint64_t end = i;
		double cs[3], pp = 0;
		while (end < pa->n && (int64_t)(pa->index[end] / (uint64_t)H) == p)
			end++;
		for (uint64_t k = i; k < end; k++)
			pp += isfinite(pv[k]) ? (double)pv[k] * pv[k] : 0;
		/* cosine of the printed row with the whole side's rows p - 1, p, p + 1 at its columns */
		for (int d = 0; d < 3; d++) {
			int64_t q = p + d - 1;
			double dot = 0, qq = 0;
			cs[d] = NAN;
			if (q < 0 || q >= Sw || !(pp > 0))
				continue;
			for (uint64_t k = i; k < end; k++) {
				double a = isfinite(pv[k]) ? pv[k] : 0, b = w[q * H + (int64_t)(pa->index[k] % (uint64_t)H)];
				b = isfinite(b) ? b : 0;
				dot += a * b;
				qq += b * b;
			}
			cs[d] = qq > 0 ? dot / sqrt(pp * qq) : 0;
		}
		/* the candidate's row p is the reference's p - 1 (d = 0) or p + 1 (d = 2) */
		for (int d = 0; d < 3; d += 2) {
			if (isnan(cs[d]))
				continue;
			rows[d / 2]++;
			shifted[d / 2] += cs[d] > SAME_COS && !(cs[1] >= cs[d]);
		}
		i = end;
	}
	if (rows[0] > 0 || rows[1] > 0)
		v[TB_F_EMBED_SHIFT] = fmax(rows[0] > 0 ? shifted[0] / rows[0] : 0, rows[1] > 0 ? shifted[1] / rows[1] : 0);
	free(pv);
	free(w);
}

/* embed_shift of two whole embeddings one position apart in length (a
 * BOS one side prepends, or a first token it drops): the share of the
 * shorter side's rows p that match the longer side's p + 1 (the longer
 * one's first row extra) or p (its last row extra), whichever is more. */
static void length_embed_shift(const tb_cell_result *t, double *v)
{
	int64_t Sr, Hr, Sc, Hc, S, H;
	float *r = NULL, *c = NULL;
	const float *sh, *lo;
	double at[2] = {0, 0};
	tb_err err;

	if (t->ref->partial || t->cand->partial || !whole_rows(t->ref, &Sr, &Hr) || !whole_rows(t->cand, &Sc, &Hc) ||
	    Hr != Hc || (Sr - Sc != 1 && Sc - Sr != 1))
		return;
	r = tb_tensor_load_f32(t->ref, &err);
	c = r ? tb_tensor_load_f32(t->cand, &err) : NULL;
	if (!c)
		goto out;
	H = Hr;
	S = Sr < Sc ? Sr : Sc;
	sh = Sr < Sc ? r : c;
	lo = Sr < Sc ? c : r;
	for (int64_t p = 0; p < S; p++) {
		for (int d = 0; d < 2; d++) {
			const float *a = sh + p * H, *b = lo + (p + 1 - d) * H;
			double ab = 0, aa = 0, bb = 0;
			for (int64_t k = 0; k < H; k++) {
				double x = isfinite(a[k]) ? a[k] : 0, y = isfinite(b[k]) ? b[k] : 0;
				ab += x * y;
				aa += x * x;
				bb += y * y;
			}
			at[d] += aa > 0 && bb > 0 && ab / sqrt(aa * bb) > SAME_COS;
		}
	}
	v[TB_F_EMBED_SHIFT] = fmax(at[0], at[1]) / (double)S;
out:
	free(r);
	free(c);
}

/* Which reference row does each candidate row of the embedding look like? */
static void embed_shift(const tb_cell_result *t, double *v)
{
	int64_t S, H;
	float *r = NULL, *c = NULL, *G = NULL;
	double best[2] = {0, 0};
	tb_err err;

	if (t->m.estimated) { /* from the sketches' row norms */
		v[TB_F_EMBED_SHIFT] = t->m.shift_frac;
		return;
	}
	if (t->ref->partial || t->cand->partial) {
		partial_embed_shift(t, v);
		return;
	}
	if (t->shape_mismatch) {
		length_embed_shift(t, v);
		return;
	}
	if (!rows_of(t, &S, &H))
		return;
	r = tb_tensor_load_f32(t->ref, &err);
	c = r ? tb_tensor_load_f32(t->cand, &err) : NULL;
	G = malloc((size_t)(S * S) * sizeof *G);
	if (!r || !c || !G)
		goto out;
	for (int64_t i = 0; i < S * H; i++) {
		if (!isfinite(r[i]))
			r[i] = 0;
		if (!isfinite(c[i]))
			c[i] = 0;
	}
	/* G[p][q] = cand_p . ref_q */
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)S, (int)S, (int)H, 1.0f, c, (int)H, r, (int)H, 0.0f,
		    G, (int)S);
	for (int64_t p = 0; p < S; p++) {
		double nc = cblas_sdot((int)H, c + p * H, 1, c + p * H, 1);
		for (int d = 0; d < 2; d++) {
			int64_t q = d ? p - 1 : p + 1;
			if (q < 0 || q >= S)
				continue;
			double nq = cblas_sdot((int)H, r + q * H, 1, r + q * H, 1);
			double nown = cblas_sdot((int)H, r + p * H, 1, r + p * H, 1);
			double cs = nc > 0 && nq > 0 ? G[p * S + q] / sqrt(nc * nq) : 0;
			double own = nc > 0 && nown > 0 ? G[p * S + p] / sqrt(nc * nown) : 0;
			best[d] += cs > SAME_COS && cs > own;
		}
	}
	v[TB_F_EMBED_SHIFT] = fmax(best[0], best[1]) / (double)(S - 1);
out:
	free(r);
	free(c);
	free(G);
}

typedef struct bias_ctx {
	double *sum; /* per channel: sum of the finite differences */
	double total; /* sum of their squares */
	int64_t H;
} bias_ctx;

static int bias_block(void *ctx, const float *r, const float *c, size_t n, uint64_t off)
{
	bias_ctx *bc = ctx;
	uint64_t h = off % (uint64_t)bc->H;
	double total = 0;

	/* a row's stretch at a time, so the per-element loop vectorises */
	for (size_t i = 0; i < n;) {
		size_t len = (uint64_t)bc->H - h < n - i ? (size_t)((uint64_t)bc->H - h) : n - i;
		double *sum = bc->sum + h;
#pragma omp simd reduction(+ : total)
		for (size_t k = 0; k < len; k++) {
			double d = (double)c[i + k] - r[i + k];
			d = isfinite(d) ? d : 0;
			sum[k] += d;
			total += d * d;
		}
		i += len;
		h = 0;
	}
	bc->total += total;
	return 0;
}

/* The share of the error a per-channel offset explains, from what a
 * partial dump printed: each value's channel is its place in the whole
 * tensor's last axis, and each channel's offset is the mean over the rows
 * it was printed in. */
static void partial_bias_fraction(const tb_cell_result *t, const tb_partial *pa, double *v)
{
	int64_t H = pa->shape[pa->ndim - 1];
	uint64_t n = pa->n;
	float *r = malloc(n ? 2 * n * sizeof *r : 1);
	double *sum = calloc((size_t)(H > 0 ? H : 1), sizeof *sum), *cnt = calloc((size_t)(H > 0 ? H : 1), sizeof *cnt);
	double total = 0, explained = 0;
	tb_err err;

	if (H <= 0 || !r || !sum || !cnt || tb_tensor_acquire(t->ref, &err) < 0)
		goto out;
	if (tb_tensor_acquire(t->cand, &err) < 0) {
		tb_tensor_release(t->ref);
		goto out;
	}
	tb_tensor_read_f32(t->ref, 0, n, r);
	tb_tensor_read_f32(t->cand, 0, n, r + n);
	tb_tensor_release(t->ref);
	tb_tensor_release(t->cand);
	for (uint64_t i = 0; i < n; i++) {
		double d = (double)r[n + i] - r[i];
		uint64_t h = pa->index[i] % (uint64_t)H;
		d = isfinite(d) ? d : 0;
		sum[h] += d;
		cnt[h]++;
		total += d * d;
	}
	for (int64_t h = 0; h < H; h++)
		explained += cnt[h] > 1 ? sum[h] * sum[h] / cnt[h] : 0;
	v[TB_F_BIAS_FRAC] = total > 0 ? explained / total : NAN;
out:
	free(r);
	free(sum);
	free(cnt);
}

/* Share of the error a per-channel constant offset explains.  Streamed a
 * block at a time: the target may be the logits, far larger than a row. */
static void bias_fraction(const tb_cell_result *t, double *v)
{
	int64_t S, H;
	double explained = 0;
	bias_ctx bc;
	tb_err err;

	if (t->m.estimated) { /* from the sketches' column sums */
		v[TB_F_BIAS_FRAC] = t->m.bias_frac;
		return;
	}
	if (tb_cell_partial(t)) {
		if (t->m.pos_seen > 1 && !t->shape_mismatch)
			partial_bias_fraction(t, tb_cell_partial(t), v);
		return;
	}
	if (!rows_of(t, &S, &H))
		return;
	bc = (bias_ctx){calloc((size_t)H, sizeof *bc.sum), 0, H};
	if (bc.sum && tb_tensor_pair_blocks(t->ref, t->cand, 0, bias_block, &bc, &err) == 0) {
		double rows = (double)(t->ref->numel / (uint64_t)H);
		for (int64_t h = 0; h < H; h++)
			explained += bc.sum[h] * bc.sum[h] / rows;
		v[TB_F_BIAS_FRAC] = bc.total > 0 ? explained / bc.total : NAN;
	}
	free(bc.sum);
}

/* The S x S logits of the prompt's own tokens, l[p][q] = logits[p][tok[q]]
 * (malloc'd): the logits are read element by element, never whole. */
static float *gather_logits(const tb_tensor *lg, int64_t S, int64_t V, const int64_t *tok, tb_err *err)
{
	float *l = malloc((size_t)(S * S) * sizeof *l);

	if (!l || tb_tensor_acquire(lg, err) < 0) {
		free(l);
		return NULL;
	}
	for (int64_t p = 0; p < S; p++)
		for (int64_t q = 0; q < S; q++)
			tb_tensor_read_f32(lg, (uint64_t)(p * V + tok[q]), 1, &l[p * S + q]);
	tb_tensor_release(lg);
	return l;
}

double tb_features_tie(const tb_tensor *fn, const tb_tensor *emb, const tb_tensor *lg, const int64_t *tok, size_t n_tok)
{
	float *x = NULL, *e = NULL, *l = NULL, *P = NULL;
	int64_t S, H, V, shx[TB_MAX_DIMS], shl[TB_MAX_DIMS];
	int nx = tb_tensor_squeezed(fn, shx), nl = tb_tensor_squeezed(lg, shl);
	double sp = 0, so = 0, spp = 0, soo = 0, spo = 0, res = NAN;
	tb_err err;

	if (nx != 2 || nl != 2 || emb->numel != fn->numel)
		return NAN;
	S = shx[0];
	H = shx[1];
	V = shl[1];
	if (shl[0] != S || S < 2 || (size_t)S > n_tok)
		return NAN;
	for (int64_t q = 0; q < S; q++)
		if (tok[q] < 0 || tok[q] >= V)
			return NAN;
	x = tb_tensor_load_f32(fn, &err);
	e = x ? tb_tensor_load_f32(emb, &err) : NULL;
	l = e ? gather_logits(lg, S, V, tok, &err) : NULL;
	P = malloc((size_t)(S * S) * sizeof *P);
	if (!x || !e || !l || !P)
		goto out;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)S, (int)S, (int)H, 1.0f, x, (int)H, e, (int)H, 0.0f,
		    P, (int)S);
	for (int64_t p = 0; p < S; p++)
		for (int64_t q = 0; q < S; q++) {
			double a = P[p * S + q], b = l[p * S + q];
			sp += a;
			so += b;
			spp += a * a;
			soo += b * b;
			spo += a * b;
		}
	{
		double n = (double)(S * S), cov = spo / n - sp / n * so / n;
		double va = spp / n - sp / n * sp / n, vb = soo / n - so / n * so / n;
		if (va > 0 && vb > 0)
			res = cov / sqrt(va * vb);
	}
out:
	free(x);
	free(e);
	free(l);
	free(P);
	return res;
}

static void tie_features(const tb_diag_input *in, double *v)
{
	const tb_result *r = in->result;
	const tb_cell_result *fn = tb_result_cell(r, -1, TB_TAP_FINAL_NORM), *em = tb_result_cell(r, -1, TB_TAP_EMBED);
	const tb_cell_result *lg = tb_result_cell(r, -1, TB_TAP_LOGITS);
	size_t n;
	int64_t *tok;

	if (!compared(fn) || !compared(em) || !compared(lg))
		return;
	tok = tb_tree_token_ids(in->session->ref, &n);
	if (!tok)
		return;
	/* a sketch measured its own tree's on the values */
	v[TB_F_TIE_REF] = fn->ref->sketch ? in->session->ref->tie
					  : tb_features_tie(fn->ref, em->ref, lg->ref, tok, n);
	v[TB_F_TIE_CAND] = fn->cand->sketch ? in->session->cand->tie
					    : tb_features_tie(fn->cand, em->cand, lg->cand,
							      tok, n);
	free(tok);
}

/* Rows of the logits the soft-cap fit reads, spread over the positions:
 * a C is pinned down by a few rows' large logits. */
#define SOFTCAP_ROWS 16

/* Is one side's logits the other's soft-capped (final-softcap)?  Only when
 * final_norm agrees: then lm_head's output differs by lm_head or after it. */
static void softcap_features(const tb_diag_input *in, const tb_cell_result *t, double *v)
{
	const tb_cell_result *fn = tb_result_cell(in->result, -1, TB_TAP_FINAL_NORM);
	int64_t S, V;
	uint64_t step;
	float *r = NULL, *c = NULL;
	size_t n = 0;
	tb_softcap sc;
	tb_err err;

	if (!compared(fn) || !ok_status(fn) || !whole_rows(t->ref, &S, &V) || !whole_rows(t->cand, &S, &V) ||
	    t->ref->numel != t->cand->numel)
		return;
	step = S > SOFTCAP_ROWS ? (uint64_t)S / SOFTCAP_ROWS : 1;
	r = malloc((size_t)(SOFTCAP_ROWS + 1) * (size_t)V * sizeof *r);
	c = malloc((size_t)(SOFTCAP_ROWS + 1) * (size_t)V * sizeof *c);
	if (!r || !c || tb_tensor_acquire(t->ref, &err) < 0)
		goto out;
	if (tb_tensor_acquire(t->cand, &err) < 0) {
		tb_tensor_release(t->ref);
		goto out;
	}
	for (uint64_t p = 0; p < (uint64_t)S && n < (size_t)SOFTCAP_ROWS * (size_t)V; p += step, n += (size_t)V) {
		tb_tensor_read_f32(t->ref, p * (uint64_t)V, (uint64_t)V, r + n);
		tb_tensor_read_f32(t->cand, p * (uint64_t)V, (uint64_t)V, c + n);
	}
	tb_tensor_release(t->ref);
	tb_tensor_release(t->cand);
	for (size_t i = 0; i < n; i++)
		if (!isfinite(r[i]) || !isfinite(c[i]))
			goto out;
	v[TB_F_LOGIT_MAX_REF] = v[TB_F_LOGIT_MAX_CAND] = 0;
	for (size_t i = 0; i < n; i++) {
		v[TB_F_LOGIT_MAX_REF] = fmax(v[TB_F_LOGIT_MAX_REF], fabs(r[i]));
		v[TB_F_LOGIT_MAX_CAND] = fmax(v[TB_F_LOGIT_MAX_CAND], fabs(c[i]));
	}
	tb_softcap_fit(r, c, n, &sc);
	if (isnan(sc.rel_l2))
		goto out;
	v[TB_F_SOFTCAP_REL] = sc.rel_l2;
	v[TB_F_SOFTCAP_GAIN] = sc.rel_l2 > 0 ? t->m.rel_l2 / sc.rel_l2 : INFINITY;
	v[TB_F_SOFTCAP_CAP] = sc.cap;
	v[TB_F_SOFTCAP_CAND] = sc.capped_side == 1;
out:
	free(r);
	free(c);
}

/* A sub-tap (q, k after RoPE; the MLP's gate or activation) diverges
 * first when the bug is in attention or the MLP, but the group's output
 * shows the pattern the rules know: profile that one when it diverged
 * too. */
static const tb_cell_result *profile_cell(const tb_result *r, const tb_cell_result *t)
{
	tb_tap_id parent = tb_cell_parent(&t->cell);
	const tb_cell_result *a;

	if (parent != TB_TAP_ATTN && parent != TB_TAP_MLP)
		return t;
	a = tb_result_cell(r, t->cell.layer, parent);
	return compared(a) && a->status == TB_ST_DIVERGED ? a : t;
}

long tb_features_measured(const tb_result *r, long target)
{
	if (target < 0 || (size_t)target >= r->n_cells)
		return -1;
	return profile_cell(r, &r->cells[target]) - r->cells;
}

/* A rotation keeps each position's norm up to the dtypes' rounding: each
 * side's norm moves by at most half a unit of its dtype (2^-9 in bf16). */
static void sub_tap_features(const tb_cell_result *t, double *v)
{
	const tb_metrics *m = &t->m;
	bool kept = m->n_pos > 0;
	double tol = fmax(1e-3, (tb_dtype_rounding(t->ref->dtype) + tb_dtype_rounding(t->cand->dtype)) / 2);

	if (m->n_pos <= 0)
		return;
	v[TB_F_SUB_POS0_OK] = seen_at(m->pos_rel_l2, 0) ? m->pos_rel_l2[0] <= t->tol.diverge : NAN;
	/* a partial dump printed some channels of each head: a rotation keeps
	 * the norm of channel pairs it may not have printed both of */
	if (tb_cell_partial(t))
		return;
	for (int64_t p = 0; p < m->n_pos && kept; p++)
		kept = fabs(m->pos_norm_ratio[p] - 1) < tol;
	v[TB_F_SUB_NORM_KEPT] = kept;
}

/* The RoPE pair features of a query or key after RoPE: attn.q_rope,
 * attn.k_rope, or attn.q, attn.k of a dump without them (written after
 * RoPE).  S: the positions of the layer's attention output. */
static void rope_features(const tb_result *r, const tb_cell_result *t, int head_dim, double *v)
{
	tb_tap_id tap = t->cell.id, before = tap == TB_TAP_ATTN_Q_ROPE ? TB_TAP_ATTN_Q : TB_TAP_ATTN_K;
	bool roped = tap == TB_TAP_ATTN_Q_ROPE || tap == TB_TAP_ATTN_K_ROPE;
	const tb_cell_result *a = tb_result_cell(r, t->cell.layer, TB_TAP_ATTN), *pre;
	int64_t S, H;
	tb_rope_diff d;

	if (!roped && (tap != TB_TAP_ATTN_Q && tap != TB_TAP_ATTN_K))
		return;
	if (!roped && compared(tb_result_cell(r, t->cell.layer, tap == TB_TAP_ATTN_Q ? TB_TAP_ATTN_Q_ROPE
											: TB_TAP_ATTN_K_ROPE)))
		return; /* attn.q before RoPE */
	if (tb_cell_partial(t) || t->m.estimated || !compared(a) || tb_cell_partial(a) || !rows_of(a, &S, &H))
		return;
	if (tb_rope_diff_of(t->ref, t->cand, S, head_dim, &d) < 0)
		return;
	v[TB_F_ROPE_PAIRS_KEPT] = d.kept;
	v[TB_F_ROPE_QK_SCALE] = d.scale;
	v[TB_F_ROPE_SCALE_OFF] = fabs(log(d.scale));
	v[TB_F_ROPE_FAST_TURN] = d.fast_turn;
	v[TB_F_ROPE_HEADS_KEPT] = d.heads_kept;
	v[TB_F_ROPE_PARTIAL] = d.partial;
	pre = tb_result_cell(r, t->cell.layer, before);
	if (roped && pre && pre->ref && !tb_cell_partial(pre) && !pre->m.estimated) {
		v[TB_F_ROPE_REF_FACTOR] = tb_rope_gain(pre->ref, t->ref);
		v[TB_F_ROPE_REF_FACTOR_OFF] = fabs(log(v[TB_F_ROPE_REF_FACTOR]));
	}
}

/* Reads cell c's two sides, [n] floats each, into r and c: false when
 * they cannot be read. */
static bool read_pair(const tb_cell_result *c, uint64_t n, float *r, float *cd)
{
	tb_err err;

	if (c->ref->numel != n || c->cand->numel != n || tb_tensor_acquire(c->ref, &err) < 0)
		return false;
	if (tb_tensor_acquire(c->cand, &err) < 0) {
		tb_tensor_release(c->ref);
		return false;
	}
	tb_tensor_read_f32(c->ref, 0, n, r);
	tb_tensor_read_f32(c->cand, 0, n, cd);
	tb_tensor_release(c->ref);
	tb_tensor_release(c->cand);
	return true;
}

/* A layer's free sub-tap cell by name (Qwen2-MoE's mlp.shared_pre),
 * when both sides dumped it. */
static const tb_cell_result *named_cell(const tb_result *r, int layer, const char *tap)
{
	tb_cell c;
	long k;

	tb_cell_make(&c, layer, tap);
	k = tb_result_find(r, &c);
	return k >= 0 && compared(&r->cells[k]) ? &r->cells[k] : NULL;
}

/* The shared expert's part of an MoE layer's MLP output on each side, n
 * values each into sr and sc, and the reference's shared expert itself
 * (before any gate) into q: DeepSeek's mlp.shared, or Qwen2-MoE's
 * mlp.shared_pre times the sigmoid of its mlp.shared_gate
 * ([S, 1]).  gated: its parts match (or are close), so that sr and sc
 * are what each side adds; false when only q is known. */
static bool shared_part(const tb_result *res, int layer, uint64_t n, int64_t H, float *sr, float *sc, float *q,
			bool *gated)
{
	const tb_cell_result *sh = tb_result_cell(res, layer, TB_TAP_MLP_SHARED);
	const tb_cell_result *se = named_cell(res, layer, "mlp.shared_pre");
	const tb_cell_result *sg = named_cell(res, layer, "mlp.shared_gate");
	uint64_t rows = n / (uint64_t)H;

	if (compared(sh) && read_pair(sh, n, sr, sc)) {
		memcpy(q, sr, n * sizeof *q);
		*gated = ok_status(sh);
		return true;
	}
	if (!se || !read_pair(se, n, sr, sc))
		return false;
	memcpy(q, sr, n * sizeof *q);
	*gated = false;
	if (!sg || sg->ref->numel != rows || !ok_status(se) || !ok_status(sg))
		return true;
	float *g = malloc(2 * rows * sizeof *g);
	if (!g || !read_pair(sg, rows, g, g + rows)) {
		free(g);
		return true;
	}
	for (uint64_t i = 0; i < n; i++) {
		sr[i] *= (float)(1 / (1 + exp(-(double)g[i / (uint64_t)H])));
		sc[i] *= (float)(1 / (1 + exp(-(double)g[rows + i / (uint64_t)H])));
	}
	free(g);
	*gated = true;
	return true;
}

/* The share of the rows' error c - r one factor per position times the
 * rows q explains. */
static double scaled_share(const float *r, const float *c, const float *q, uint64_t rows, int64_t H)
{
	double err = 0, explained = 0;

	for (uint64_t row = 0; row < rows; row++) {
		const float *x = r + row * (uint64_t)H, *y = c + row * (uint64_t)H, *b = q + row * (uint64_t)H;
		double dd = 0, dq = 0, qq = 0;
		for (int64_t h = 0; h < H; h++) {
			double a = (double)y[h] - x[h];
			dd += a * a;
			dq += a * b[h];
			qq += (double)b[h] * b[h];
		}
		err += dd;
		explained += qq > 0 ? dq * dq / qq : 0;
	}
	return err > 0 && isfinite(err) && isfinite(explained) ? fmin(explained / err, 1) : NAN;
}

/* row_scale_share and routed_rel_median: how much of an MoE layer's
 * routed output error one factor per position explains, and how much of
 * each position's output is lost.  Top-k renormalisation toggled, a
 * routed scaling factor skipped or doubled scale each position's weighted
 * sum as a whole; a choice or weights changed at some positions leave the
 * others; experts permuted give other rows everywhere.  At the MLP output
 * a matching shared expert's part is taken off first (the sum of the two
 * is no scaled copy of the other side's), and shared_scale_share measures
 * the error against the shared expert itself: a gate not applied, or a
 * shared expert scaled or left out, moves each position by a multiple of
 * it. */
static void row_scale(const tb_result *res, const tb_cell_result *t, double *v)
{
	int64_t S, H;
	double err = 0, left = 0, *rel = NULL;
	bool gated = false;

	if (t->cell.id == TB_TAP_MLP && sibling_ok(res, t->cell.layer, TB_TAP_MLP_ROUTER) != 1 &&
	    sibling_ok(res, t->cell.layer, TB_TAP_MLP_ROUTER_PROBS) != 1)
		return; /* no router matched: no MoE layer known */
	if (tb_cell_partial(t) || t->m.estimated || !rows_of(t, &S, &H))
		return;
	uint64_t n = t->ref->numel, rows = n / (uint64_t)H, nrel = 0;
	float *r = malloc(5 * n * sizeof *r), *c = r ? r + n : NULL, *sr = r ? r + 2 * n : NULL, *sc = sr ? sr + n : NULL;
	float *q = sc ? sc + n : NULL;
	if (!r || !read_pair(t, n, r, c))
		goto out;
	if (t->cell.id == TB_TAP_MLP && shared_part(res, t->cell.layer, n, H, sr, sc, q, &gated)) {
		v[TB_F_SHARED_SCALE_SHARE] = scaled_share(r, c, q, rows, H);
		for (uint64_t i = 0; gated && i < n; i++) {
			r[i] -= sr[i];
			c[i] -= sc[i];
		}
	}
	if (!(rel = malloc(rows * sizeof *rel)))
		goto out;
	for (uint64_t row = 0; row < rows; row++) {
		const float *a = r + row * (uint64_t)H, *b = c + row * (uint64_t)H;
		double aa = 0, ab = 0, bb = 0, dd = 0;
		for (int64_t h = 0; h < H; h++) {
			aa += (double)a[h] * a[h];
			ab += (double)a[h] * b[h];
			bb += (double)b[h] * b[h];
			dd += ((double)b[h] - a[h]) * ((double)b[h] - a[h]);
		}
		err += dd;
		left += aa > 0 ? fmax(bb - ab * ab / aa, 0) : bb;
		if (aa > 0 && isfinite(dd))
			rel[nrel++] = sqrt(dd / aa);
	}
	v[TB_F_ROW_SCALE_SHARE] = err > 0 && isfinite(err) && isfinite(left) ? 1 - fmin(left / err, 1) : NAN;
	if (nrel) {
		qsort(rel, nrel, sizeof *rel, cmp_double);
		v[TB_F_ROUTED_REL_MEDIAN] = nrel % 2 ? rel[nrel / 2] : (rel[nrel / 2 - 1] + rel[nrel / 2]) / 2;
	}
out:
	free(rel);
	free(r);
}

void tb_features_compute(const tb_diag_input *in, long target, double *v)
{
	const tb_result *r = in->result;

	for (int i = 0; i < TB_F_COUNT; i++)
		v[i] = NAN;
	global_counts(r, v);
	if (in->origin) {
		long k = in->origin->strongest;
		v[TB_F_HAS_ORIGIN] = in->origin->origin >= 0;
		v[TB_F_MAX_AMPLIFICATION] = k >= 0 ? in->origin->amplification[k] : NAN;
		v[TB_F_DRIFT] = in->origin->drift;
		v[TB_F_DRIFT_LIKE] = in->origin->drift_like;
	}
	if (in->sanity) {
		v[TB_F_DUMP_OFFSET] = in->sanity->offset != 0;
		v[TB_F_DUMP_DUPLICATE] = fmax(in->sanity->dup_layers[0], in->sanity->dup_layers[1]);
		v[TB_F_STALE_STEPS] = fmax(in->session->ref->layout.stale_steps, in->session->cand->layout.stale_steps);
		v[TB_F_DUMP_ALIASING] = in->sanity->aliased;
		if (in->sanity->tokens_compared) {
			v[TB_F_TOKENS_DIFFER] = (double)in->sanity->tokens_differ;
			v[TB_F_TOKEN_SHIFT] = in->sanity->token_shift != 0;
		}
	}
	v[TB_F_HAS_TARGET] = target >= 0;
	if (target < 0 || (size_t)target >= r->n_cells || !compared(&r->cells[target]))
		return;
	const tb_cell_result *t = &r->cells[target], *prof = profile_cell(r, t);
	where(r, target, v);
	if (prof != t && prof->cell.id == TB_TAP_ATTN) {
		sub_tap_features(t, v);
		v[TB_F_AT_ATTN] = 1;
	} else if (prof != t) {
		v[TB_F_AT_MLP] = 1;
	}
	scale_and_direction(prof, v);
	position_profile(prof, in->origin ? in->origin->input_rel_l2[prof - r->cells] : 0, v);
	if (in->session)
		decode_steps(in->session, prof, v);
	v[TB_F_ALIAS_HERE] = tb_sanity_aliased(r, target) >= 0;
	if (in->origin) {
		long o = in->origin->origin;
		v[TB_F_ORIGIN_HERE] = o == target || (o >= 0 && in_group(&r->cells[o], t));
		v[TB_F_AMPLIFICATION] = in->origin->amplification[target];
	}
	/* Heads are separate only before o_proj mixes them: in q, k, v (and
	 * other attention sub-taps), not in the attention output. */
	if (v[TB_F_AT_ATTN_SUB] == 1) {
		tb_heads hs;
		tb_heads_infer(r, target, in->heads, in->kv_heads, &hs);
		head_features(t, &hs, v);
		rope_features(r, t, hs.n ? (int)hs.head_dim : 0, v);
	}
	if (v[TB_F_AT_EMBED] == 1)
		embed_shift(t, v);
	if (t->m.n_pos > 0)
		bias_fraction(t, v);
	if (v[TB_F_AT_LOGITS] == 1 || v[TB_F_AT_FINAL_NORM] == 1)
		tie_features(in, v);
	if (v[TB_F_AT_LOGITS] == 1 && !tb_cell_partial(t) && !t->ref->sketch && !t->cand->sketch)
		softcap_features(in, t, v);
	if ((t->cell.id == TB_TAP_MLP || t->cell.id == TB_TAP_MLP_EXPERTS) && !t->ref->sketch && !t->cand->sketch)
		row_scale(r, t, v);
}

/* Feature i's span: [a, b], widened to hold its estimate v[i]. */
static void span_of(int i, const double *v, double a, double b, double *lo, double *hi)
{
	if (isnan(v[i]))
		return;
	lo[i] = fmin(a, v[i]);
	hi[i] = fmax(b, v[i]);
}

void tb_features_span(const tb_diag_input *in, long target, const double *v, double *lo, double *hi)
{
	const tb_result *r = in->result;
	const tb_metrics *m;

	memcpy(lo, v, TB_F_COUNT * sizeof *lo);
	memcpy(hi, v, TB_F_COUNT * sizeof *hi);
	if (target < 0 || (size_t)target >= r->n_cells || !compared(&r->cells[target]))
		return;
	m = &profile_cell(r, &r->cells[target])->m;
	if (!m->estimated || m->exact)
		return;
	/* the spans scale_and_direction's estimates have */
	span_of(TB_F_COSINE, v, m->cosine_lo, m->cosine_hi, lo, hi);
	span_of(TB_F_REL_L2, v, m->rel_l2_lo, m->rel_l2_hi, lo, hi);
}
