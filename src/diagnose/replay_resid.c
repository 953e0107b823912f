#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/replay_ops.h"

/* These replays add and scale float32 values as the model did: each
 * output element rounds once or twice (2^-24 relative), so the demo's
 * reference replays at ~1e-7; 2^-20, the f32 rounding tbisect-rules(5)
 * states, leaves a margin of ten and is far below a dropped term or a
 * multiplier (rel_l2 ~ 1e-1). */
#define F32_FLOOR 0x1p-20

/* With fewer positions a per-channel offset fits any difference. */
#define MIN_ROWS 4

/* One term of a replayed sum: coef * v. */
typedef struct term {
	const float *v;
	double coef;
} term;

/* rel_l2 of the sum of the terms plus a per-channel offset (NULL: none)
 * against y, rows x cols. */
static double sum_rel(const term *t, size_t n, const double *offset, const float *y, uint64_t rows, uint64_t cols)
{
	double dd = 0, yy = 0;

	for (uint64_t i = 0; i < rows * cols; i++) {
		double d = offset ? offset[i % cols] - y[i] : -(double)y[i];
		for (size_t k = 0; k < n; k++)
			d += t[k].coef * t[k].v[i];
		dd += d * d;
		yy += (double)y[i] * y[i];
	}
	return tb_rel_l2(dd, yy);
}

/* The least-squares c of y = c * x. */
static double fit_scale(const float *y, const float *x, uint64_t n)
{
	double xy = 0, xx = 0;

	for (uint64_t i = 0; i < n; i++) {
		xy += (double)x[i] * y[i];
		xx += (double)x[i] * x[i];
	}
	return xx > 0 ? xy / xx : 0;
}

/* Load the pairs, none NULL, for an op that reads n whole tensors; false
 * (with the note) when it cannot replay them.  -1 only with err. */
static int load(const tb_pair *const *p, size_t n, tb_replay_sides *v, tb_replay *out, tb_err *err)
{
	bool finite;

	out->tried = true;
	if (tb_replay_load_pairs(p, n, v, &finite, err) < 0)
		return -1;
	if (!finite) {
		snprintf(out->note, sizeof out->note, "no replay from non-finite values");
		tb_replay_unload(v, n);
		return 0;
	}
	return 1;
}

/* The candidate's embed against the reference's, the same token ids
 * implied: Gemma-style models scale by sqrt(hidden), a port may forget
 * that or add it (or divide by it, undoing a scale it should not). */
int tb_replay_embed_scale(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	const tb_pair *p = tb_replay_pair(in, -1, TB_TAP_EMBED);
	tb_replay_sides v;
	tb_replay_best best = {"", TB_CAUSE_NONE, 0};
	uint64_t rows, cols;
	double floor, c, k;
	int ok;

	if (!p) {
		snprintf(out->note, sizeof out->note, "replaying embed needs it dumped whole on both sides");
		return 0;
	}
	if (!tb_replay_rows(out, &p, 1, 1, &rows, &cols))
		return 0;
	if ((ok = load(&p, 1, &v, out, err)) <= 0)
		return ok;
	floor = tb_replay_floor(p->ref, p->cand, F32_FLOOR, 1);
	c = fit_scale(v.cand, v.ref, rows * cols);
	k = sqrt((double)cols);
	if (fabs(c / k - 1) <= floor)
		tb_replay_consider(&best, sum_rel(&(term){v.ref, k}, 1, NULL, v.cand, rows, cols), TB_CAUSE_EMBEDDING_SCALE,
				   "embeddings scaled by sqrt(hidden) = %g", k);
	if (fabs(c * k - 1) <= floor)
		tb_replay_consider(&best, sum_rel(&(term){v.ref, 1 / k}, 1, NULL, v.cand, rows, cols), TB_CAUSE_EMBEDDING_SCALE,
				   "embeddings divided by sqrt(hidden) = %g", k);
	tb_replay_decide(in, out, floor,
			 &(tb_replay_fit){"the reference's embeddings", 0, sum_rel(&(term){v.ref, 1}, 1, NULL, v.cand, rows, cols),
					  best.name[0] ? best.name : NULL, best.cause, best.rel_l2, 0});
	if (!out->cause) {
		size_t len = strlen(out->note);
		snprintf(out->note + len, sizeof out->note - len, "; the candidate's embed fits %.4g x the reference's", c);
	}
	tb_replay_unload(&v, 1);
	return 0;
}

/* attn against attn.o, mlp against mlp.down: a constant multiplier (MuP,
 * a residual scale) between the projection and the sublayer's output. */
int tb_replay_multiplier(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	int L = in->target->cell.layer;
	bool attn = in->target->cell.id == TB_TAP_ATTN;
	const tb_pair *p[2] = {tb_replay_pair(in, L, attn ? TB_TAP_ATTN_O : TB_TAP_MLP_DOWN),
			       tb_replay_pair(in, L, in->target->cell.id)};
	const char *proj = attn ? "o_proj" : "down_proj";
	tb_replay_sides v[2];
	char cell[TB_CELL_NAME_MAX], ref_variant[64];
	uint64_t rows, cols;
	double floor, c_ref, c_cand;
	bool unit;
	int ok;

	tb_cell_name(&in->target->cell, cell, sizeof cell);
	if (!p[0] || !p[1]) {
		snprintf(out->note, sizeof out->note,
			 "replaying %s needs L%d.%s dumped on both sides (a forward hook on %s; mkdemo --sub or --replay)", cell,
			 L, attn ? "attn.o" : "mlp.down", proj);
		return 0;
	}
	if (!tb_replay_rows(out, p, 2, 1, &rows, &cols))
		return 0;
	if ((ok = load(p, 2, v, out, err)) <= 0)
		return ok;
	floor = tb_replay_floor(p[1]->ref, p[1]->cand, F32_FLOOR, 1);
	c_ref = fit_scale(v[1].ref, v[0].ref, rows * cols);
	c_cand = fit_scale(v[1].cand, v[0].cand, rows * cols);
	unit = fabs(c_ref - 1) <= floor;
	if (unit)
		snprintf(ref_variant, sizeof ref_variant, "output = %s", proj);
	else
		snprintf(ref_variant, sizeof ref_variant, "output multiplied by %.4g", c_ref);
	{
		tb_replay_best best = {"", TB_CAUSE_NONE, 0};
		tb_replay_consider(&best, sum_rel(&(term){v[0].cand, c_cand}, 1, NULL, v[1].cand, rows, cols),
				   TB_CAUSE_SCALE_MULTIPLIER, unit ? "output multiplied by %.4g" : "output multiplied by %.4g (the reference: %.4g)",
				   c_cand, c_ref);
		tb_replay_decide(in, out, floor,
				 &(tb_replay_fit){ref_variant, sum_rel(&(term){v[0].ref, c_ref}, 1, NULL, v[1].ref, rows, cols),
						  sum_rel(&(term){v[0].cand, c_ref}, 1, NULL, v[1].cand, rows, cols), best.name,
						  best.cause, best.rel_l2, 0});
	}
	tb_replay_unload(v, 2);
	return 0;
}

/* o_proj or down_proj whose input matched: the candidate's output less
 * the reference's is a constant per channel when one side adds a bias the
 * other has not, and the candidate's a multiple of the reference's when
 * a multiplier was folded into the projection (or applied before the
 * hook saw its output).  The reference's configuration, neither, is its
 * own output (residual 0). */
int tb_replay_bias(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	int L = in->target->cell.layer;
	bool attn = in->target->cell.id == TB_TAP_ATTN_O;
	const tb_pair *input = tb_replay_pair(in, L, attn ? TB_TAP_ATTN_CORE : TB_TAP_MLP_ACT);
	const tb_pair *p = tb_replay_pair(in, L, in->target->cell.id);
	tb_replay_sides v;
	tb_replay_best best = {"", TB_CAUSE_NONE, 0};
	char cell[TB_CELL_NAME_MAX];
	uint64_t rows, cols;
	double *b;
	int ok;

	tb_cell_name(&in->target->cell, cell, sizeof cell);
	if (!input || !p) {
		/* Without the input the replay cannot know both sides fed the
		 * projection the same values. */
		snprintf(out->note, sizeof out->note,
			 "replaying %s needs its input L%d.%s dumped on both sides (a forward pre-hook on %s; mkdemo --replay)",
			 cell, L, attn ? "attn.core" : "mlp.act", attn ? "o_proj" : "down_proj");
		return 0;
	}
	if (!tb_replay_rows(out, &p, 1, MIN_ROWS, &rows, &cols))
		return 0;
	if ((ok = load(&p, 1, &v, out, err)) <= 0)
		return ok;
	b = calloc(cols, sizeof *b);
	if (!b) {
		tb_replay_unload(&v, 1);
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	for (uint64_t i = 0; i < rows * cols; i++)
		b[i % cols] += ((double)v.cand[i] - v.ref[i]) / (double)rows;
	/* No cause id of tbisect-rules(5) CAUSE IDS names an attention bias: for o_proj the
	 * replay says what it found in its note and confirms nothing. */
	tb_replay_consider(&best, sum_rel(&(term){v.ref, 1}, 1, b, v.cand, rows, cols), attn ? TB_CAUSE_NONE : TB_CAUSE_MLP_BIAS,
			   "a bias per channel on one side only");
	double rc = 0, rr = 0;
	for (uint64_t i = 0; i < rows * cols; i++) {
		rc += (double)v.ref[i] * v.cand[i];
		rr += (double)v.ref[i] * v.ref[i];
	}
	if (rr > 0)
		tb_replay_consider(&best, sum_rel(&(term){v.ref, rc / rr}, 1, NULL, v.cand, rows, cols), TB_CAUSE_SCALE_MULTIPLIER,
				   "output multiplied by %.4g", rc / rr);
	tb_replay_decide(in, out, tb_replay_floor(p->ref, p->cand, F32_FLOOR, 1),
			 &(tb_replay_fit){"no bias", 0, sum_rel(&(term){v.ref, 1}, 1, NULL, v.cand, rows, cols), best.name,
					  best.cause, best.rel_l2, 0});
	free(b);
	tb_replay_unload(&v, 1);
	return 0;
}

/* The taps a block's output can be wired from. */
enum { X, ATTN, MLP, ATTN_NORM, MLP_NORM, RESID, N_INPUTS };

/* The wirings a block's replay knows, each a sum of inputs (a bit set);
 * alt is the same sum written with attn.resid (= x + attn), for dumps
 * that hold it and not x or attn (llama.cpp's ffn_inp).  The first is the
 * sequential pre-norm block every supported model runs. */
#define BIT(i) (1u << (i))
static const struct {
	const char *name;
	unsigned sum, alt;
} wirings[] = {
	{"x + attn + mlp (sequential)", BIT(X) | BIT(ATTN) | BIT(MLP), BIT(RESID) | BIT(MLP)},
	{"mlp_norm + mlp (second residual from the norm output)", BIT(MLP_NORM) | BIT(MLP), 0},
	{"attn_norm + attn + mlp (first residual from the norm output)", BIT(ATTN_NORM) | BIT(ATTN) | BIT(MLP), 0},
	{"x + mlp (the attention residual dropped)", BIT(X) | BIT(MLP), 0},
	{"x + attn (the MLP dropped)", BIT(X) | BIT(ATTN), BIT(RESID)},
};
#define N_WIRINGS (sizeof wirings / sizeof *wirings)

/* The sum of wiring w over the inputs dumped (have), or 0 when neither of
 * its forms is. */
static unsigned wiring_sum(size_t w, unsigned have)
{
	if ((wirings[w].sum & have) == wirings[w].sum)
		return wirings[w].sum;
	if (wirings[w].alt && (wirings[w].alt & have) == wirings[w].alt)
		return wirings[w].alt;
	return 0;
}

/* rel_l2 of a sum of inputs against y, on one side. */
static double wiring_rel(unsigned sum, float *const *in, const float *y, uint64_t rows, uint64_t cols)
{
	term t[N_INPUTS];
	size_t n = 0;

	for (int i = 0; i < N_INPUTS; i++)
		if (sum & BIT(i))
			t[n++] = (term){in[i], 1};
	return sum_rel(t, n, NULL, y, rows, cols);
}

int tb_replay_wiring(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	int L = in->target->cell.layer;
	static const tb_tap_id tap[N_INPUTS] = {
		[ATTN] = TB_TAP_ATTN, [MLP] = TB_TAP_MLP,		[ATTN_NORM] = TB_TAP_ATTN_NORM,
		[MLP_NORM] = TB_TAP_MLP_NORM, [RESID] = TB_TAP_ATTN_RESID,
	};
	const tb_pair *p[N_INPUTS + 1];
	tb_replay_sides v[N_INPUTS + 1];
	float *ref_in[N_INPUTS], *cand_in[N_INPUTS];
	tb_replay_best best = {"", TB_CAUSE_NONE, 0};
	char cell[TB_CELL_NAME_MAX];
	uint64_t rows, cols;
	unsigned have = 0;
	size_t ref_w = 0;
	double ref_rel = INFINITY, floor;
	int ok;

	tb_cell_name(&in->target->cell, cell, sizeof cell);
	for (int i = 0; i < N_INPUTS; i++) {
		p[i] = i == X ? (L > 0 ? tb_replay_pair(in, L - 1, TB_TAP_BLOCK) : tb_replay_pair(in, -1, TB_TAP_EMBED))
			      : tb_replay_pair(in, L, tap[i]);
		have |= p[i] ? BIT(i) : 0;
	}
	p[N_INPUTS] = tb_replay_pair(in, L, TB_TAP_BLOCK);
	if (!wiring_sum(0, have) || !p[N_INPUTS]) {
		snprintf(out->note, sizeof out->note,
			 "replaying %s needs its inputs %s, L%d.attn and L%d.mlp (or L%d.attn.resid and L%d.mlp) dumped on both "
			 "sides (forward hooks on the layers, self_attn and mlp)",
			 cell, L > 0 ? "the previous block" : "embed", L, L, L, L);
		return 0;
	}
	if (!tb_replay_rows(out, p, N_INPUTS + 1, 1, &rows, &cols))
		return 0;
	if ((ok = load(p, N_INPUTS + 1, v, out, err)) <= 0)
		return ok;
	for (int i = 0; i < N_INPUTS; i++) {
		ref_in[i] = v[i].ref;
		cand_in[i] = v[i].cand;
	}
	floor = tb_replay_floor(p[N_INPUTS]->ref, p[N_INPUTS]->cand, F32_FLOOR, 1);
	for (size_t w = 0; w < N_WIRINGS; w++) {
		unsigned sum = wiring_sum(w, have);
		double rel = sum ? wiring_rel(sum, ref_in, v[N_INPUTS].ref, rows, cols) : INFINITY;
		if (rel < ref_rel) {
			ref_rel = rel;
			ref_w = w;
		}
	}
	for (size_t w = 0; w < N_WIRINGS; w++)
		if (w != ref_w && wiring_sum(w, have))
			tb_replay_consider(&best, wiring_rel(wiring_sum(w, have), cand_in, v[N_INPUTS].cand, rows, cols),
					   TB_CAUSE_RESIDUAL_WIRING, "%s", wirings[w].name);
	tb_replay_decide(in, out, floor,
			 &(tb_replay_fit){wirings[ref_w].name, ref_rel,
					  wiring_rel(wiring_sum(ref_w, have), cand_in, v[N_INPUTS].cand, rows, cols),
					  best.name[0] ? best.name : NULL, best.cause, best.rel_l2, 0});
	tb_replay_unload(v, N_INPUTS + 1);
	return 0;
}
