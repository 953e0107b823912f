#include "config.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/replay_heads.h"
#include "diagnose/replay_ops.h"

/*
 * attn.o from attn.q, attn.k and attn.v dumped before RoPE (Hugging
 * Face's forward hooks on q_proj, k_proj, v_proj and o_proj) when o_proj's
 * input, attn.core, is not dumped.  o_proj is linear and loads the same
 * weight on both sides, so it can be fitted by least squares:
 *
 * - from the reference alone when it holds more positions than o_proj
 *   has inputs (heads x head_dim, D) and SPARE_ROWS more: the head dim
 *   and RoPE that let one weight carry the reference's attention to its
 *   attn.o are the reference's configuration, and the variant that
 *   carries the candidate's through that weight is the candidate's;
 * - else from both sides at once, when they hold D + SPARE_ROWS rows
 *   between them: under the right pair of configurations one weight
 *   carries both sides' and leaves only the rounding.  The head dim is
 *   then the one whose pairs fit best (--heads settles it).
 *
 * Below that any configuration fits, and the replay says so
 * (tbisect-rules(5) CONFIRMED CAUSES, doc/diagnosis.md).
 */

/* The attention in float32 on f32 dumps, as replay_attn.c's; half-width
 * dumps get HALF_ROUNDINGS of their rounding. */
#define F32_FLOOR 1e-4
#define HALF_ROUNDINGS 4
/* o_proj inputs the fit solves for: a D x D system per configuration. */
#define MAX_D 1024
/* Output channels fitted: each is a least-squares problem of its own on
 * the same rows, and 32 of them tell the residual of all. */
#define OUT_COLS 32
/* Rows beyond o_proj's inputs, at least: with fewer a wrong configuration
 * still fits (measured on both sides at once: 2 x 160 rows against 256
 * inputs leave a wrong RoPE 0.1 and the right one the bf16 rounding). */
#define SPARE_ROWS(D) ((D) / 8 + 16)
/* The positions a fit of o_proj's D inputs needs: to the reference
 * alone, or to both sides at once (half). */
#define ALONE_ROWS(D) ((D) + SPARE_ROWS(D))
#define JOINT_ROWS(D) ((ALONE_ROWS(D) + 1) / 2)
/* Floating-point work the search may spend, in multiply-adds (about
 * three seconds); past it the search stops and says so. */
#define BUDGET 1.5e10
/* The bases configs use. */
static const double thetas[] = {1e4, 1e6, 5e5, 1e5};
/* Golden-section steps of a fitted parameter. */
#define FIT_STEPS 12

/* RoPE scalings (Hugging Face's rope_type): linear (factor 1: none),
 * llama3 and yarn, with beta_fast 32 and beta_slow 1. */
enum { SCALE_LINEAR, SCALE_LLAMA3, SCALE_YARN };
static const char *const scaling_names[] = {"linear", "llama3", "yarn"};

/* One side's attention: its RoPE, and the scale of its scores. */
typedef struct op_cfg {
	bool none;        /* no rotation */
	bool interleaved; /* pairs (2i, 2i+1), else rotate-half (i, i + rot/2) */
	int sign;         /* -1: rotation by -theta */
	int rot;          /* channels rotated per head */
	double theta;
	double factor; /* the scaling's factor (linear: positions divided by it) */
	double temp;   /* the softmax scale 1/sqrt(head_dim) times this */
	int scaling;   /* SCALE_*: how factor applies */
	double orig;   /* llama3, yarn: original_max_position_embeddings */
	double low, high; /* llama3: low_freq_factor, high_freq_factor */
	double gain;   /* cos and sin times this: YaRN's attention factor (0: 1) */
	bool tile;     /* query head h reads kv head h % kv_heads, not h / (heads / kv_heads) */
	int window;    /* row r attends to keys r - window + 1 .. r (0: all before it) */
	const double *sink; /* gpt-oss's learned sink logit per head, one more softmax column; NULL: none */
} op_cfg;

/* The fitted families, cheapest first: the scores' scale, a sliding
 * window, theta, a linear scaling the reference has and the candidate
 * lacks, one the candidate adds, another theta with a linear scaling
 * (Gemma 3's global layers' RoPE on a sliding one), and attention sinks. */
enum {
	DISCRETE = -1,
	FIT_TEMP,
	FIT_WINDOW,
	FIT_THETA,
	FIT_REF_FACTOR,
	FIT_CAND_FACTOR,
	FIT_THETA_FACTOR,
	FIT_SINKS,
	N_FITS
};
/* Heads whose sinks are fitted: o_proj's inputs over the smallest head dim. */
#define MAX_HEADS (MAX_D / 8)

/* A pair of configurations and what it stands for. */
typedef struct op_pair {
	op_cfg ref, cand;
	int kind; /* the fitted family, or DISCRETE */
	tb_cause_id cause;
	char name[96]; /* tb_replay keeps 63 characters: the names stay shorter */
	double rel[2]; /* the residual on the reference's rows and on the candidate's */
} op_pair;

#define PAIR(ref, cand, cause) ((op_pair){ref, cand, DISCRETE, cause, "", {INFINITY, INFINITY}})

typedef struct op_fit {
	tb_heads_view q[2], k[2], v[2];
	const float *o[2];
	int64_t S, H;
	int R, hd, nh, nkv, D, m, cols[OUT_COLS]; /* R: the rows fitted, the first positions */
	bool joint;  /* o_proj fitted to both sides at once */
	float *kr, *qr, *p, *core;
	double *A[2], *B[2], bb[2]; /* each side's R x D attention outputs, R x m outputs and their square */
	double w[2];                /* the weight of each side's rows */
	double sink[2][MAX_HEADS];  /* the sinks fitted to the reference and to the candidate */
	double *Gref, *Cref, *G, *C, *W, *res;
	op_cfg cached;  /* joint: the configuration A[0], Gref and Cref hold; rot 0: none yet */
	double ref_rel; /* else: the reference's residual under the weight W fitted to it ... */
	bool ref_resolved; /* ... and whether it tells its theta from one 0.1% larger */
	double spent;   /* multiply-adds so far */
} op_fit;

static double or1(double x)
{
	return x != 0 ? x : 1;
}

/* Rotate one head's vector x at pos into out; cs/sn: the pair angles' cosines and sines. */
static void rotate(const op_cfg *c, int hd, const float *x, const double *cs, const double *sn, float *out)
{
	memcpy(out, x, (size_t)hd * sizeof *out);
	if (c->none)
		return;
	for (int i = 0; i < c->rot / 2; i++) {
		int a = c->interleaved ? 2 * i : i, b = c->interleaved ? 2 * i + 1 : i + c->rot / 2;
		out[a] = (float)(x[a] * cs[i] - x[b] * sn[i]);
		out[b] = (float)(x[b] * cs[i] + x[a] * sn[i]);
	}
}

/* Pair i's inverse frequency, as Hugging Face's modeling_rope_utils
 * computes it for the scaling. */
static double inv_freq(const op_cfg *c, int i)
{
	double inv = pow(c->theta, -2.0 * i / c->rot), F = or1(c->factor);

	if (c->scaling == SCALE_LLAMA3) {
		/* wavelengths past orig / low are scaled, under orig / high kept, and smoothed between */
		double wl = 2 * M_PI / inv, smooth = (c->orig / wl - c->low) / (c->high - c->low);
		if (wl > c->orig / c->low)
			return inv / F;
		return wl < c->orig / c->high ? inv : (1 - smooth) * inv / F + smooth * inv;
	}
	if (c->scaling == SCALE_YARN) {
		/* the pairs turning more than beta_fast times over orig kept, under beta_slow scaled, a ramp
		 * between (the correction range truncated to whole pairs) */
		double lo = fmax(floor(c->rot * log(c->orig / (32 * 2 * M_PI)) / (2 * log(c->theta))), 0);
		double hi = fmin(ceil(c->rot * log(c->orig / (2 * M_PI)) / (2 * log(c->theta))), c->rot - 1);
		double ramp = fmin(fmax((i - lo) / (hi == lo ? 0.001 : hi - lo), 0), 1);
		return inv / F * ramp + inv * (1 - ramp);
	}
	return inv / F;
}

static void angles(const op_cfg *c, int64_t pos, double *cs, double *sn)
{
	for (int i = 0; i < c->rot / 2 && !c->none; i++) {
		double a = (double)pos * inv_freq(c, i);
		cs[i] = or1(c->gain) * cos(a);
		sn[i] = or1(c->gain) * c->sign * sin(a);
	}
}

/* Side s's attention outputs under c on the fit's rows, into A (R x D). */
static void attention(op_fit *f, int s, const op_cfg *c, double *A)
{
	int hd = f->hd, group = f->nh / f->nkv, kw = f->nkv * hd, R = f->R;
	double cs[TB_HEADS_MAX_HD / 2], sn[TB_HEADS_MAX_HD / 2], scale = or1(c->temp) / sqrt(hd);

	for (int pos = 0; pos < R; pos++) {
		angles(c, pos, cs, sn);
		for (int g = 0; g < f->nkv; g++)
			rotate(c, hd, tb_heads_row(&f->k[s], pos, g), cs, sn,
			       f->kr + (size_t)pos * kw + (size_t)g * hd);
		for (int h = 0; h < f->nh; h++)
			rotate(c, hd, tb_heads_row(&f->q[s], pos, h), cs, sn, f->qr + ((size_t)h * R + pos) * hd);
	}
	for (int h = 0; h < f->nh; h++) {
		int g = c->tile ? h % f->nkv : h / group;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, R, hd, 1.0f, f->qr + (size_t)h * R * hd, hd,
			    f->kr + (size_t)g * hd, kw, 0.0f, f->p, R);
		/* causal softmax: row r attends to keys lo..r */
		for (int r = 0; r < R; r++) {
			float *row = f->p + (size_t)r * R;
			double mx = c->sink ? c->sink[h] : -INFINITY, z = 0;
			int lo = c->window && r >= c->window ? r - c->window + 1 : 0;
			for (int j = lo; j <= r; j++)
				mx = fmax(mx, scale * row[j]);
			for (int j = lo; j <= r; j++) {
				double e = exp(scale * row[j] - mx);
				row[j] = (float)e;
				z += e;
			}
			/* the sink takes its share of the softmax and adds no value */
			if (c->sink)
				z += exp(c->sink[h] - mx);
			for (int j = 0; j < R; j++)
				row[j] = j >= lo && j <= r ? (float)(row[j] / z) : 0.0f;
		}
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, hd, R, 1.0f, f->p, R,
			    tb_heads_row(&f->v[s], 0, g), tb_heads_stride(&f->v[s]), 0.0f, f->core, hd);
		for (int r = 0; r < R; r++)
			for (int d = 0; d < hd; d++)
				A[(size_t)r * f->D + (size_t)h * hd + d] = f->w[s] * f->core[(size_t)r * hd + d];
	}
	f->spent += 2.0 * R * (double)R * f->D;
}

/* G += A^T A (its upper triangle) and C += A^T B for one side's block. */
static void gram_add(op_fit *f, const double *A, const double *B, double *G, double *C)
{
	cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, f->D, f->R, 1.0, A, f->D, 1.0, G, f->D);
	cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, f->D, f->m, f->R, 1.0, A, f->D, B, f->m, 1.0, C, f->m);
	f->spent += (double)f->R * f->D * (f->D / 2.0 + f->m);
}

/* Solve G W = C in place (W into C) by Cholesky, G's upper triangle
 * overwritten.  A small ridge keeps a rank-deficient G (rows that
 * repeat: position 0's output is its own value under every RoPE)
 * solvable without moving the fit of the rows that tell. */
static void solve(op_fit *f, double *G, double *C)
{
	int D = f->D, m = f->m;
	double tr = 0;

	for (int j = 0; j < D; j++)
		tr += G[(size_t)j * D + j];
	for (int j = 0; j < D; j++)
		G[(size_t)j * D + j] += 1e-9 * tr / D + 1e-300;
	/* right-looking: row j of U, then the trailing rows updated */
	for (int j = 0; j < D; j++) {
		double *uj = G + (size_t)j * D, d = sqrt(fmax(uj[j], 1e-300));
		uj[j] = d;
		for (int i = j + 1; i < D; i++)
			uj[i] /= d;
		for (int k = j + 1; k < D; k++) {
			double *gk = G + (size_t)k * D, a = uj[k];
			for (int i = k; i < D; i++)
				gk[i] -= a * uj[i];
		}
	}
	/* U^T y = C, then U W = y */
	for (int j = 0; j < D; j++) {
		double *cj = C + (size_t)j * m, *uj = G + (size_t)j * D;
		for (int c = 0; c < m; c++)
			cj[c] /= uj[j];
		for (int i = j + 1; i < D; i++)
			for (int c = 0; c < m; c++)
				C[(size_t)i * m + c] -= uj[i] * cj[c];
	}
	for (int j = D - 1; j >= 0; j--) {
		double *cj = C + (size_t)j * m, *uj = G + (size_t)j * D;
		for (int i = j + 1; i < D; i++)
			for (int c = 0; c < m; c++)
				cj[c] -= uj[i] * C[(size_t)i * m + c];
		for (int c = 0; c < m; c++)
			cj[c] /= uj[j];
	}
	f->spent += (double)D * D * D / 6 + (double)D * D * m;
}

/* rel_l2 of side s's rows under the fitted weight W (D x m). */
static double half_residual(op_fit *f, int s, const double *W)
{
	double dd = 0;

	memcpy(f->res, f->B[s], (size_t)f->R * f->m * sizeof *f->res);
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, f->R, f->m, f->D, -1.0, f->A[s], f->D, W, f->m, 1.0,
		    f->res, f->m);
	for (size_t i = 0; i < (size_t)f->R * f->m; i++)
		dd += f->res[i] * f->res[i];
	f->spent += (double)f->R * f->D * f->m;
	return tb_rel_l2(dd, f->bb[s]);
}

static bool same_cfg(const op_cfg *a, const op_cfg *b)
{
	return a->none == b->none && a->interleaved == b->interleaved && a->sign == b->sign && a->rot == b->rot &&
	       a->theta == b->theta && or1(a->factor) == or1(b->factor) && or1(a->temp) == or1(b->temp) &&
	       a->scaling == b->scaling && a->orig == b->orig && a->low == b->low && a->high == b->high &&
	       or1(a->gain) == or1(b->gain) && a->tile == b->tile && a->window == b->window && a->sink == b->sink;
}

/* A fit's residual on the rows it was fitted to understates the noise:
 * of rows rows, unknowns took theirs.  The residual it would leave on
 * rows of the same noise it was not fitted to, as the candidate's are. */
static double unfitted(double rel, int rows, int unknowns)
{
	return rel * sqrt((double)rows / (rows - unknowns));
}

/* The reference alone under c: o_proj fitted to its rows, into f->W;
 * returns its residual (unfitted). */
static double fit_reference(op_fit *f, const op_cfg *c)
{
	attention(f, 0, c, f->A[0]);
	memset(f->G, 0, (size_t)f->D * f->D * sizeof *f->G);
	memset(f->W, 0, (size_t)f->D * f->m * sizeof *f->W);
	gram_add(f, f->A[0], f->B[0], f->G, f->W);
	solve(f, f->G, f->W);
	return unfitted(half_residual(f, 0, f->W), f->R, f->D);
}

/* How much further the reference's residual reaches on the candidate's
 * rows under cand than on rows like the reference's own, o_proj fitted to
 * the reference under ref.  A weight fitted to R rows of D inputs carries
 * their noise to a row a by a^T G^-1 a (G = A^T A): D / (R - D) on
 * average for rows like its own, and more for rows outside them (a
 * window's, which average fewer values).  The residual expected there is
 * sqrt(R + sum a^T G^-1 a) against sqrt(R + R D / (R - D)). */
static double reach(op_fit *f, const op_cfg *ref, const op_cfg *cand)
{
	int D = f->D;
	double h = 0;

	fit_reference(f, ref);
	attention(f, 1, cand, f->A[1]);
	/* solve's factor U (G = U^T U, in G's upper triangle): each row a
	 * becomes a^T U^-1, whose squared norm is a^T G^-1 a */
	cblas_dtrsm(CblasRowMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, f->R, D, 1.0, f->G, D, f->A[1],
		    D);
	for (size_t i = 0; i < (size_t)f->R * D; i++)
		h += f->A[1][i] * f->A[1][i];
	f->spent += (double)f->R * D * D / 2;
	return sqrt((f->R + h) * (f->R - D)) / f->R;
}

/* The pair's residuals: joint, o_proj fitted to both sides under it;
 * else the candidate's under the weight fitted to the reference (whose
 * configuration the pair's reference is). */
static void evaluate(op_fit *f, op_pair *p)
{
	size_t dd = (size_t)f->D * f->D, dm = (size_t)f->D * f->m;

	if (!f->joint) {
		attention(f, 1, &p->cand, f->A[1]);
		p->rel[0] = f->ref_rel;
		p->rel[1] = half_residual(f, 1, f->W);
		return;
	}
	if (!f->cached.rot || !same_cfg(&f->cached, &p->ref)) {
		attention(f, 0, &p->ref, f->A[0]);
		memset(f->Gref, 0, dd * sizeof *f->Gref);
		memset(f->Cref, 0, dm * sizeof *f->Cref);
		gram_add(f, f->A[0], f->B[0], f->Gref, f->Cref);
		f->cached = p->ref;
	}
	attention(f, 1, &p->cand, f->A[1]);
	memcpy(f->G, f->Gref, dd * sizeof *f->G);
	memcpy(f->C, f->Cref, dm * sizeof *f->C);
	gram_add(f, f->A[1], f->B[1], f->G, f->C);
	solve(f, f->G, f->C);
	p->rel[0] = unfitted(half_residual(f, 0, f->C), 2 * f->R, f->D);
	p->rel[1] = unfitted(half_residual(f, 1, f->C), 2 * f->R, f->D);
}

/* rel_l2 of the candidate's attn.o against the reference's on its first R rows. */
static double rows_apart(const op_fit *f, int R)
{
	double dd = 0, yy = 0;

	for (size_t i = 0; i < (size_t)R * f->H; i++) {
		double e = (double)f->o[1][i] - f->o[0][i];
		dd += e * e;
		yy += (double)f->o[0][i] * f->o[0][i];
	}
	return tb_rel_l2(dd, yy);
}

static double total(const op_pair *p)
{
	return hypot(p->rel[0], p->rel[1]);
}

static void describe(const op_cfg *c, int hd, char *buf, size_t size)
{
	int n;

	if (c->none)
		n = snprintf(buf, size, "no RoPE");
	else
		n = snprintf(buf, size, "RoPE %s theta %.3g%s%s", c->interleaved ? "interleaved" : "rotate-half",
			     c->theta, c->sign < 0 ? " by -theta" : "", c->rot < hd ? " partial" : "");
	if (or1(c->factor) != 1 && (size_t)n < size)
		n += snprintf(buf + n, size - (size_t)n, " %s x%.3g", scaling_names[c->scaling], c->factor);
	if (c->scaling != SCALE_LINEAR && (size_t)n < size)
		n += snprintf(buf + n, size - (size_t)n, " (orig %.0f)", c->orig);
	if (or1(c->temp) != 1 && (size_t)n < size)
		n += snprintf(buf + n, size - (size_t)n, ", scores x%.3g", c->temp);
	if (c->window && (size_t)n < size)
		n += snprintf(buf + n, size - (size_t)n, ", window %d", c->window);
	if (c->sink && (size_t)n < size)
		snprintf(buf + n, size - (size_t)n, ", sinks");
}

/* The pairs that change one thing of the reference's configuration c:
 * the kv heads' mapping; its pairing, sign, rotary share, rotation at
 * all, scaling. */
static int discrete_pairs(const op_fit *f, const op_cfg *c, op_pair *out)
{
	int n = 0, hd = f->hd;

	out[n] = PAIR(*c, *c, TB_CAUSE_NONE);
	snprintf(out[n++].name, sizeof out->name, "the reference's attention");
	if (f->nkv > 1 && f->nkv < f->nh) {
		out[n] = PAIR(*c, *c, TB_CAUSE_GQA_REPEAT);
		out[n].cand.tile = !c->tile;
		snprintf(out[n++].name, sizeof out->name, "%s", c->tile ? "kv heads repeated (h / group), not tiled"
									 : "kv heads tiled (h % kv_heads), not repeated");
	}
	if (c->sink) {
		out[n] = PAIR(*c, *c, TB_CAUSE_ATTENTION_SINK);
		out[n].cand.sink = NULL;
		snprintf(out[n++].name, sizeof out->name, "attention sinks dropped");
	}
	if (c->window) {
		out[n] = PAIR(*c, *c, TB_CAUSE_SLIDING_WINDOW);
		out[n].cand.window = 0;
		snprintf(out[n++].name, sizeof out->name, "no sliding window (the reference: %d)", c->window);
	}
	if (c->none) {
		for (size_t t = 0; t < sizeof thetas / sizeof *thetas; t++) {
			out[n] = PAIR(*c, *c, TB_CAUSE_NOPE_LAYERS);
			out[n].cand.none = false;
			out[n].cand.theta = thetas[t];
			snprintf(out[n++].name, sizeof out->name, "RoPE (theta %.3g) where the reference has none",
				 thetas[t]);
		}
		return n;
	}
	out[n] = PAIR(*c, *c, TB_CAUSE_ROPE_STYLE);
	out[n].cand.interleaved = !c->interleaved;
	snprintf(out[n++].name, sizeof out->name, "%s",
		 c->interleaved ? "rotate-half pairs" : "interleaved pairs (2i, 2i+1)");
	out[n] = PAIR(*c, *c, TB_CAUSE_ROTATE_HALF_SIGN);
	out[n].cand.sign = -c->sign;
	snprintf(out[n++].name, sizeof out->name, "rotation by -theta (rotate_half's sign)");
	for (int frac = 2; frac <= 4 && c->rot == hd; frac *= 2)
		if (hd % (2 * frac) == 0) {
			out[n] = PAIR(*c, *c, TB_CAUSE_PARTIAL_ROPE);
			out[n].cand.rot = hd / frac;
			snprintf(out[n++].name, sizeof out->name, "rotary on %d of %d channels", hd / frac, hd);
		}
	out[n] = PAIR(*c, *c, TB_CAUSE_NOPE_LAYERS);
	out[n].cand.none = true;
	snprintf(out[n++].name, sizeof out->name, "no rotation (a NoPE layer)");
	if (or1(c->factor) != 1) {
		out[n] = PAIR(*c, *c, c->scaling == SCALE_YARN ? TB_CAUSE_YARN_SCALING : TB_CAUSE_ROPE_SCALING);
		out[n].cand.factor = 1;
		out[n].cand.gain = 1;
		snprintf(out[n++].name, sizeof out->name, "no RoPE scaling (the reference: %s x%.3g)",
			 scaling_names[c->scaling], c->factor);
	}
	if (c->scaling == SCALE_LLAMA3) {
		out[n] = PAIR(*c, *c, TB_CAUSE_ROPE_SCALING);
		out[n].cand.low = c->high;
		out[n].cand.high = c->low;
		snprintf(out[n++].name, sizeof out->name, "llama3 low_freq_factor and high_freq_factor swapped");
	}
	if (c->scaling == SCALE_YARN) {
		for (int times = 0; times <= 2; times += 2) {
			out[n] = PAIR(*c, *c, TB_CAUSE_YARN_SCALING);
			out[n].cand.gain = times ? c->gain * c->gain : 1;
			snprintf(out[n++].name, sizeof out->name, "YaRN's attention factor %.4g applied %d times",
				 c->gain, times);
		}
		out[n] = PAIR(*c, *c, TB_CAUSE_YARN_SCALING);
		out[n].cand.scaling = SCALE_LINEAR;
		snprintf(out[n++].name, sizeof out->name, "YaRN without its ramp: every frequency divided by %.3g",
			 c->factor);
	}
	return n;
}

/* One parameter fitted, on a log10 scale unless linear: of the pair (its
 * residuals), or with pair NULL of the reference's configuration *cfg
 * alone. */
typedef struct param_fit {
	op_fit *f;
	op_pair *p;
	op_cfg *cfg;
	double *x; /* the parameter: a field of p->ref, p->cand or *cfg */
	bool linear;
} param_fit;

/* The pair's residual (evaluated), or with p NULL the reference's under
 * *cfg alone (its weight left in f->W); past the budget, none. */
static double residual_of(op_fit *f, op_pair *p, const op_cfg *cfg)
{
	if (f->spent >= BUDGET) {
		if (p)
			p->rel[0] = p->rel[1] = INFINITY;
		return INFINITY;
	}
	if (!p)
		return fit_reference(f, cfg);
	evaluate(f, p);
	return total(p);
}

static int param_residual(void *ctx, double x, double *rel, tb_err *err)
{
	param_fit *t = ctx;

	(void)err;
	*t->x = t->linear ? x : pow(10, x);
	*rel = residual_of(t->f, t->p, t->cfg);
	return 0;
}

/* The sliding window that fits best, of p's candidate or with p NULL of
 * the reference's *cfg alone: a window shows past its width, so widths
 * 2^k and 1.5 2^k below the rows fitted, then (fine) the neighbours of
 * the best.  Leaves the window set and evaluated; returns the residual. */
static double fit_window(op_fit *f, op_pair *p, op_cfg *cfg, bool fine)
{
	op_cfg *c = p ? &p->cand : cfg;
	int best = 0, around;
	double rel = INFINITY, r;

	for (int w = 2, step = 0; w < f->R && f->spent < BUDGET; w = step++ % 2 ? w * 4 / 3 : w * 3 / 2) {
		c->window = w;
		if ((r = residual_of(f, p, cfg)) < rel) {
			rel = r;
			best = w;
		}
	}
	around = best;
	for (int w = around - 1; fine && around && w <= around + 1; w += 2) {
		c->window = w;
		if ((r = residual_of(f, p, cfg)) < rel) {
			rel = r;
			best = w;
		}
	}
	c->window = best;
	residual_of(f, p, cfg);
	return rel;
}

/* What a round value may cost over the fitted one: half-width dumps'
 * noise moves the fitted value by more. */
static const double fit_param_slack = 1.25;

/* Fit *x over 10^lo..10^hi: a grid of step, then (fine) golden-section
 * steps around its best, and evaluate there; fine, round x to the 1-3
 * significant digits configs write where that fits as well.  Returns
 * the residual. */
static double fit_param(param_fit *t, double lo, double hi, double step, bool fine)
{
	double best = lo, rel = INFINITY, fitted, r;

	/* param_residual cannot fail */
	tb_fit_grid_min(param_residual, t, lo, step, (int)((hi - lo) / step + 1.5), &best, NULL);
	if (fine)
		tb_fit_golden_min(param_residual, t, best - step, best + step, FIT_STEPS, &best, &rel, NULL);
	fitted = pow(10, best);
	for (int digits = 1; digits <= 3 && fine; digits++) {
		double unit = pow(10, floor(best) - digits + 1);
		param_residual(t, log10(unit * nearbyint(fitted / unit)), &r, NULL);
		if (r <= rel * fit_param_slack)
			return r;
	}
	param_residual(t, best, &r, NULL);
	return r;
}

/* One side's sinks, fitted head by head to the reference alone (p NULL:
 * *cfg's) or to the candidate (p's) through the weight fitted to the
 * reference: a grid of logits from -2 to 4 and golden-section steps
 * within 0.5, then sweeps within 0.1 while each still takes a fifth off
 * the residual (the heads share o_proj, so each sweep moves the others'
 * best: f32 dumps need four or five to come within 1e-4).  The sinks are
 * f->sink[side]; returns the residual. */
static double fit_sinks(op_fit *f, op_pair *p, op_cfg *cfg)
{
	int side = p ? 1 : 0;
	double *sk = f->sink[side], rel = INFINITY;
	param_fit t = {f, p, cfg, NULL, true};
	op_cfg *c = p ? &p->cand : cfg;

	for (int h = 0; h < f->nh; h++)
		sk[h] = 0.5;
	c->sink = sk;
	for (int sweep = 0; sweep < 8 && f->spent < BUDGET; sweep++) {
		double w = sweep ? 0.1 : 0.5, before = rel;
		for (int h = 0; h < f->nh && f->spent < BUDGET; h++) {
			double x = sk[h];
			t.x = &sk[h];
			if (sweep == 0)
				tb_fit_grid_min(param_residual, &t, -2, 1, 7, &x, NULL);
			tb_fit_golden_min(param_residual, &t, x - w, x + w, 12, &x, &rel, NULL);
			sk[h] = x;
		}
		if (sweep && !(rel < 0.8 * before))
			break;
	}
	t.x = &sk[0];
	param_residual(&t, sk[0], &rel, NULL);
	return rel;
}

/* Keep t in *best when it fits better and its parameter moved. */
static void keep(op_pair *best, op_pair *t, int kind, double moved)
{
	t->kind = kind;
	if (total(t) < total(best) && fabs(log10(moved)) > 0.005)
		*best = *t;
}

/* Whether the side of t's larger theta tells it from one 0.1% larger
 * (tb_replay_theta_change): by the pair's residuals, or, the reference's
 * fitted alone, by its own fit (f->ref_resolved). */
static bool theta_resolved(op_fit *f, op_pair *t)
{
	op_pair x = *t;
	bool up = t->cand.theta > t->ref.theta;

	if (!up && !f->joint)
		return f->ref_resolved;
	if (up)
		x.cand.theta *= 1.001;
	else
		x.ref.theta *= 1.001;
	evaluate(f, &x);
	evaluate(f, t);
	return total(&x) > fit_param_slack * total(t);
}

/* The fitted pairs from the reference's configuration c (the family only
 * when only >= 0; the sinks only so), the best kept in *best until one
 * comes within enough.  Coarse grids when not fine: the pass that finds
 * the family (and joint, the reference's configuration). */
static void fitted_pairs(op_fit *f, const op_cfg *c, bool fine, int only, double enough, op_pair *best)
{
	/* the grids' steps in decades, coarse and fine */
	double big = fine ? 0.5 : 1, mid = fine ? 0.25 : 0.5, small = 0.3;
	op_pair t;

	for (int kind = 0; kind < N_FITS && total(best) > enough && f->spent < BUDGET; kind++) {
		/* without RoPE, no RoPE to fit; alone, the reference's scaling is its own; a window (sinks alike)
		 * changes only some rows, which a fit to both sides at once absorbs (a RoPE table of 100
		 * positions and a window of 96 fitted alike at 160 positions) */
		bool rope = kind != FIT_TEMP && kind != FIT_WINDOW && kind != FIT_SINKS;
		if ((only >= 0 && kind != only) || (c->none && rope) ||
		    (kind == FIT_REF_FACTOR && !f->joint) || ((kind == FIT_WINDOW || kind == FIT_SINKS) && f->joint) ||
		    (kind == FIT_SINKS && only != FIT_SINKS))
			continue;
		t = PAIR(*c, *c, TB_CAUSE_ROPE_SCALING);
		param_fit pf = {f, &t, NULL, NULL, false};
		switch (kind) {
		case FIT_TEMP:
			t.cause = TB_CAUSE_SOFTMAX_SCALE;
			pf.x = &t.cand.temp;
			fit_param(&pf, -1, 1.5, mid, fine);
			/* not divided by sqrt(head_dim), or divided twice: exactly */
			for (int e = -1; e <= 1 && fine; e += 2)
				if (fabs(log(t.cand.temp) - e * log(f->hd) / 2) < 0.01) {
					op_pair x = t;
					x.cand.temp = pow(f->hd, e / 2.0);
					evaluate(f, &x);
					t = total(&x) < total(&t) ? x : t;
				}
			snprintf(t.name, sizeof t.name, "scores x%.4g (softmax scale %.3g, not %.3g)", t.cand.temp,
				 t.cand.temp / sqrt(f->hd), 1 / sqrt(f->hd));
			keep(best, &t, kind, t.cand.temp);
			break;
		case FIT_WINDOW:
			t.cause = TB_CAUSE_SLIDING_WINDOW;
			fit_window(f, &t, NULL, fine);
			snprintf(t.name, sizeof t.name, "a sliding window of %d positions", t.cand.window);
			keep(best, &t, kind, (double)t.cand.window / (c->window ? c->window : 1));
			break;
		case FIT_SINKS:
			/* the costliest, tried alone and last: its own sweeps, coarse or fine */
			t.cause = TB_CAUSE_ATTENTION_SINK;
			fit_sinks(f, &t, NULL);
			snprintf(t.name, sizeof t.name, "attention sinks %s",
				 c->sink ? "of other values" : "the reference does not have");
			keep(best, &t, kind, 10);
			break;
		case FIT_THETA:
			pf.x = &t.cand.theta;
			fit_param(&pf, 2, 10, big, fine);
			t.cause = tb_replay_theta_change(t.cand.theta, c->theta, c->rot, f->S, theta_resolved(f, &t),
							 t.name, sizeof t.name);
			keep(best, &t, kind, t.cand.theta / c->theta);
			break;
		case FIT_REF_FACTOR:
			pf.x = &t.ref.factor;
			fit_param(&pf, 0.3, 1.8, small, fine);
			snprintf(t.name, sizeof t.name, "no linear RoPE scaling (the reference: x%.3g)", t.ref.factor);
			keep(best, &t, kind, t.ref.factor);
			break;
		case FIT_CAND_FACTOR:
			pf.x = &t.cand.factor;
			fit_param(&pf, 0.3, 1.8, small, fine);
			snprintf(t.name, sizeof t.name, "linear RoPE scaling x%.3g the reference lacks", t.cand.factor);
			keep(best, &t, kind, t.cand.factor);
			break;
		default:
			/* coarse: the factor at each usual base; fine: from the best, theta, then the factor again */
			if (!fine) {
				for (size_t b = 0; b < sizeof thetas / sizeof *thetas; b++) {
					op_pair u = PAIR(*c, *c, TB_CAUSE_ROPE_SCALING);
					param_fit pu = {f, &u, NULL, &u.cand.factor, false};
					u.cand.theta = thetas[b];
					fit_param(&pu, 0.3, 1.8, small, false);
					t = b == 0 || total(&u) < total(&t) ? u : t;
				}
			} else {
				t = *best;
				pf.x = &t.cand.theta;
				fit_param(&pf, 2, 10, big, fine);
				pf.x = &t.cand.factor;
				fit_param(&pf, 0.3, 1.8, small, fine);
			}
			snprintf(t.name, sizeof t.name, "theta %.3g, linear scaling x%.3g (the reference: %.3g)",
				 t.cand.theta, t.cand.factor, c->theta);
			keep(best, &t, kind, t.cand.factor);
		}
	}
}

/* The reference configurations tried: rotate-half at the usual bases,
 * none (q and k dumped after RoPE, or a NoPE layer) and interleaved. */
static int reference_cfgs(int hd, op_cfg *out)
{
	int n = 0;

	for (size_t t = 0; t < sizeof thetas / sizeof *thetas; t++)
		out[n++] = (op_cfg){.sign = 1, .rot = hd, .theta = thetas[t], .factor = 1, .temp = 1};
	out[n++] = (op_cfg){.none = true, .sign = 1, .rot = hd, .theta = thetas[0], .factor = 1, .temp = 1};
	for (size_t t = 0; t < 2; t++)
		out[n++] = (op_cfg){.interleaved = true, .sign = 1, .rot = hd, .theta = thetas[t * 2], .factor = 1,
				    .temp = 1};
	return n;
}

/* The scaled references find_reference tries, k counted: linear at each
 * usual base and factor 2 .. 32, then at each, llama3 (low_freq_factor 1,
 * high_freq_factor 4) and YaRN (its attention factor 0.1 ln(factor) + 1)
 * at original lengths 16 .. 65536 (powers of 4): the commonest first. */
#define N_SCALED (4 * 5 + 4 * 5 * 14)
static op_cfg scaled_cfg(const op_cfg *base, int k)
{
	op_cfg c = *base;
	int j = k - 4 * 5;

	if (j < 0) {
		c.theta = thetas[k / 5];
		c.factor = pow(2, 1 + k % 5);
		return c;
	}
	c.theta = thetas[j / 70];
	c.factor = pow(2, 1 + j / 14 % 5);
	c.scaling = j % 2 ? SCALE_YARN : SCALE_LLAMA3;
	c.orig = pow(4, 2 + j % 14 / 2);
	c.low = 1;
	c.high = 4;
	c.gain = c.scaling == SCALE_YARN ? 0.1 * log(c.factor) + 1 : 1;
	return c;
}

/* Free the buffers of one head dim's fit (fit_init makes them again). */
static void fit_free(op_fit *f)
{
	void **buf[] = {(void **)&f->kr,   (void **)&f->qr,   (void **)&f->p,    (void **)&f->core,
			(void **)&f->A[0], (void **)&f->A[1], (void **)&f->B[0], (void **)&f->B[1],
			(void **)&f->Gref, (void **)&f->Cref, (void **)&f->G,    (void **)&f->C,
			(void **)&f->W,    (void **)&f->res};

	for (size_t i = 0; i < sizeof buf / sizeof *buf; i++) {
		free(*buf[i]);
		*buf[i] = NULL;
	}
}

/* Ready the fit at head dim hd: views of the loaded q, k, v (index 0-2)
 * of both sides, the rows (the first positions: a RoPE that differs
 * shows from position 1 on, and they need the fewest keys; an eighth
 * more than the least) and the buffers.  0; 1 when the shapes do not
 * hold such heads or too few positions; -1 out of memory. */
/* The positions o_proj is fitted on, the first ones: as many as a fit of
 * its D inputs needs and an eighth of them more, at most the S dumped. */
static int fit_rows(int64_t S, int64_t D)
{
	int64_t need = S < ALONE_ROWS(D) ? JOINT_ROWS(D) : ALONE_ROWS(D);

	return (int)(S < need + D / 8 ? S : need + D / 8);
}

static int fit_init(op_fit *f, const tb_pair *const *p, const tb_replay_sides *loaded, int hd)
{
	int64_t need;

	f->hd = hd;
	for (int s = 0; s < 2; s++) {
		tb_heads_view *views[3] = {&f->q[s], &f->k[s], &f->v[s]};
		for (int i = 0; i < 3; i++) {
			if (!tb_heads_fit(s ? p[i]->cand : p[i]->ref, f->S, hd, views[i]))
				return 1;
			views[i]->v = s ? loaded[i].cand : loaded[i].ref;
		}
		if (f->k[s].nh != f->v[s].nh || !f->k[s].nh || f->q[s].nh % f->k[s].nh)
			return 1;
		if (s && (f->q[1].nh != f->q[0].nh || f->k[1].nh != f->k[0].nh))
			return 1;
	}
	f->nh = f->q[0].nh;
	f->nkv = f->k[0].nh;
	f->D = f->nh * hd;
	f->joint = f->S < ALONE_ROWS(f->D);
	need = f->joint ? JOINT_ROWS(f->D) : ALONE_ROWS(f->D);
	if (f->D > MAX_D || f->S < need)
		return 1;
	f->R = fit_rows(f->S, f->D);
	f->kr = malloc((size_t)f->R * f->nkv * hd * sizeof *f->kr);
	f->qr = malloc((size_t)f->R * f->D * sizeof *f->qr);
	f->p = malloc((size_t)f->R * f->R * sizeof *f->p);
	f->core = malloc((size_t)f->R * hd * sizeof *f->core);
	f->Gref = malloc((size_t)f->D * f->D * sizeof *f->Gref);
	f->G = malloc((size_t)f->D * f->D * sizeof *f->G);
	f->Cref = malloc((size_t)f->D * f->m * sizeof *f->Cref);
	f->C = malloc((size_t)f->D * f->m * sizeof *f->C);
	f->W = malloc((size_t)f->D * f->m * sizeof *f->W);
	f->res = malloc((size_t)f->R * f->m * sizeof *f->res);
	if (!f->kr || !f->qr || !f->p || !f->core || !f->Gref || !f->G || !f->Cref || !f->C || !f->W || !f->res)
		return -1;
	for (int s = 0; s < 2; s++) {
		f->A[s] = malloc((size_t)f->R * f->D * sizeof *f->A[s]);
		f->B[s] = malloc((size_t)f->R * f->m * sizeof *f->B[s]);
		if (!f->A[s] || !f->B[s])
			return -1;
		f->bb[s] = 0;
		for (int r = 0; r < f->R; r++)
			for (int c = 0; c < f->m; c++) {
				double y = f->o[s][(size_t)r * f->H + f->cols[c]];
				f->B[s][(size_t)r * f->m + c] = y;
				f->bb[s] += y * y;
			}
		/* each side's rows weighed by 1 / |its attn.o|: a joint fit minimises the sum of the two relative
		 * residuals, and a candidate whose output is four times the reference's does not pull it */
		f->w[s] = f->bb[s] > 0 ? 1 / sqrt(f->bb[s]) : 1;
		for (size_t i = 0; i < (size_t)f->R * f->m; i++)
			f->B[s][i] *= f->w[s];
		f->bb[s] *= f->w[s] * f->w[s];
	}
	f->cached.rot = 0;
	return 0;
}

/* The pairs that change one thing of the reference configurations
 * refs[lo..hi-1] at the fit's head dim: the best kept in *best, each
 * configuration's best total in fit[]. */
static void discrete_search(op_fit *f, const op_cfg *refs, int lo, int hi, double enough, op_pair *best, double *fit)
{
	op_pair pairs[16];

	for (int i = lo; i < hi && f->spent < BUDGET; i++) {
		int n = discrete_pairs(f, &refs[i], pairs);
		fit[i] = INFINITY;
		for (int k = 0; k < n && f->spent < BUDGET; k++) {
			evaluate(f, &pairs[k]);
			fit[i] = fmin(fit[i], total(&pairs[k]));
			if (total(&pairs[k]) < total(best))
				*best = pairs[k];
			if (total(best) <= enough)
				return;
		}
	}
}

/* A reference configuration found, its residual and head dim. */
typedef struct op_found {
	double rel;
	op_cfg cfg;
	int hd; /* 0: none tried */
} op_found;

static void consider(op_found *b, double rel, const op_cfg *c, int hd)
{
	if (rel < b->rel)
		*b = (op_found){rel, *c, hd};
}

/* The reference's own configuration (o_proj fitted to it alone) into
 * *ref: the head dim and configuration of the list that fit it best,
 * then, when none comes within the floor, the scaled ones, a linear
 * factor and theta fitted, and learned sinks, at the head dim of the
 * rotating configuration that came closest.  0, or -1 out of memory. */
static int find_reference(op_fit *f, const tb_pair *const *p, const tb_replay_sides *loaded, const int *hds, int nhd,
			  double floor, op_found *ref)
{
	op_found rotating = {INFINITY, {0}, 0};
	op_cfg refs[8];
	int ok;

	*ref = rotating;
	for (int k = 0; k < nhd && ref->rel > floor && f->spent < BUDGET; k++) {
		if ((ok = fit_init(f, p, loaded, hds[k])) < 0)
			goto nomem;
		for (int i = 0, n = ok == 0 && !f->joint ? reference_cfgs(f->hd, refs) : 0;
		     i < n && ref->rel > floor && f->spent < BUDGET; i++) {
			double rel = fit_reference(f, &refs[i]);
			consider(ref, rel, &refs[i], f->hd);
			if (!refs[i].none)
				consider(&rotating, rel, &refs[i], f->hd);
		}
		fit_free(f);
	}
	if (ref->rel <= floor || !rotating.hd)
		return 0;
	if (fit_init(f, p, loaded, rotating.hd) < 0)
		goto nomem;
	op_cfg c = rotating.cfg;
	/* a window of its own (Gemma 3's sliding layers): its width found under the configuration that came
	 * closest without one, then the list again with it, as the missing window can make another base
	 * come closest */
	if (ref->rel > floor && f->spent < BUDGET) {
		op_cfg w = c;
		double rel = fit_window(f, NULL, &w, true);
		if (rel < rotating.rel) {
			consider(ref, rel, &w, rotating.hd);
			rotating = (op_found){rel, w, rotating.hd};
			for (int i = 0, n = reference_cfgs(f->hd, refs); i < n && ref->rel > floor && f->spent < BUDGET;
			     i++) {
				refs[i].window = w.window;
				rel = fit_reference(f, &refs[i]);
				consider(ref, rel, &refs[i], f->hd);
				if (!refs[i].none)
					consider(&rotating, rel, &refs[i], f->hd);
			}
			c = rotating.cfg;
		}
	}
	for (int k = 0; k < N_SCALED && ref->rel > floor && f->spent < BUDGET; k++) {
		op_cfg s = scaled_cfg(&c, k);
		consider(ref, fit_reference(f, &s), &s, rotating.hd);
	}
	if (ref->rel > floor && f->spent < BUDGET) {
		op_cfg lin = c;
		param_fit pf = {f, NULL, &lin, &lin.factor, false};
		fit_param(&pf, 0.3, 1.8, 0.3, true);
		pf.x = &lin.theta;
		consider(ref, fit_param(&pf, 2, 10, 0.5, true), &lin, rotating.hd);
	}
	/* learned sinks per head (gpt-oss) */
	if (ref->rel > floor && f->spent < BUDGET) {
		op_cfg sunk = c;
		consider(ref, fit_sinks(f, NULL, &sunk), &sunk, rotating.hd);
	}
	fit_free(f);
	return 0;
nomem:
	fit_free(f);
	return -1;
}

int tb_replay_attn_o(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	int layer = in->target->cell.layer;
	/* q, k, v before RoPE, and o_proj's output */
	const tb_pair *p[4] = {tb_replay_pair(in, layer, TB_TAP_ATTN_Q), tb_replay_pair(in, layer, TB_TAP_ATTN_K),
			       tb_replay_pair(in, layer, TB_TAP_ATTN_V), tb_replay_pair(in, layer, TB_TAP_ATTN_O)};
	const tb_tensor *shapes[3];
	tb_replay_sides loaded[4];
	int hds[TB_HEADS_N_DIMS], nhd, best_hd = 0, nref = 0;
	op_fit f = {0};
	op_pair best = PAIR((op_cfg){0}, (op_cfg){0}, TB_CAUSE_NONE);
	op_cfg refs[8], ref = {0};
	op_found found;
	double fit[8], floor, searched;
	int64_t d[TB_MAX_DIMS];
	char ref_name[64];
	bool finite;

	/* with o_proj's input dumped, the replay of o_proj itself */
	if (tb_replay_pair(in, layer, TB_TAP_ATTN_CORE) || !p[0] || !p[1] || !p[2] || !p[3])
		return tb_replay_bias(in, out, err);
	for (int i = 0; i < 3; i++)
		shapes[i] = p[i]->ref;
	f.S = tb_heads_positions(shapes, 3);
	if (tb_tensor_squeezed(p[3]->ref, d) != 2 || d[0] != f.S || p[3]->cand->numel != p[3]->ref->numel) {
		snprintf(out->note, sizeof out->note, "no replay of attn.o from attn.q, attn.k and attn.v: attn.o does "
						      "not hold one row per position");
		return 0;
	}
	f.H = d[1];
	/* o_proj's inputs are q's values per position: past MAX_D, or with too few positions for both sides
	 * together, say so before reading a value */
	uint64_t D = f.S > 0 ? p[0]->ref->numel / (uint64_t)f.S : 0;
	if (!D || D > MAX_D || (uint64_t)f.S < JOINT_ROWS(D)) {
		if (D && D <= MAX_D)
			snprintf(out->note, sizeof out->note,
				 "replaying attn.o without o_proj's input fits o_proj to both sides, which needs %llu "
				 "positions (its %llu inputs and %llu to spare, over two sides); dump attn.core (a "
				 "forward pre-hook on o_proj)",
				 (unsigned long long)JOINT_ROWS(D), (unsigned long long)D,
				 (unsigned long long)SPARE_ROWS(D));
		else
			snprintf(out->note, sizeof out->note,
				 "replaying attn.o without o_proj's input fits o_proj's %llu inputs, more than the %d it "
				 "can solve for: dump attn.core (a forward pre-hook on o_proj)",
				 (unsigned long long)D, MAX_D);
		return 0;
	}
	nhd = tb_heads_dim_choices(shapes, 3, in->heads, f.S, hds);
	f.m = f.H < OUT_COLS ? (int)f.H : OUT_COLS;
	for (int c = 0; c < f.m; c++)
		f.cols[c] = (int)((int64_t)c * f.H / f.m);
	floor = tb_replay_floor(p[3]->ref, p[3]->cand, F32_FLOOR, HALF_ROUNDINGS);
	if (tb_replay_load_pairs(p, 4, loaded, &finite, err) < 0)
		return -1;
	if (!finite) {
		snprintf(out->note, sizeof out->note, "no replay from non-finite values");
		goto done;
	}
	f.o[0] = loaded[3].ref;
	f.o[1] = loaded[3].cand;
	/* o_proj is fitted on the first R positions: a candidate whose output departs from the reference's only
	 * after them (a KV cache the decode steps read, a RoPE table's end) shows the replay nothing, and the
	 * search is not begun */
	int R = fit_rows(f.S, (int64_t)D);
	if (rows_apart(&f, R) <= floor) {
		long long from = (long long)in->target->m.first_bad_position;
		out->tried = true;
		tb_cell_name(&in->target->cell, ref_name, sizeof ref_name);
		snprintf(out->note, sizeof out->note,
			 "replay of %s: o_proj is fitted on the first %d positions, where the candidate's output is the "
			 "reference's; it departs %s%lld: dump attn.core (a forward pre-hook on o_proj) to replay the "
			 "later positions",
			 ref_name, R, from >= R ? "from position " : "after position ",
			 from >= R ? from : (long long)R - 1);
		goto done;
	}
	if (find_reference(&f, p, loaded, hds, nhd, floor, &found) < 0)
		goto nomem;
	ref = found.cfg;
	best_hd = found.hd;
	if (best_hd) {
		/* the reference's weight, and the candidate's variants through it */
		if (fit_init(&f, p, loaded, best_hd) < 0)
			goto nomem;
		op_cfg up = ref;
		up.theta *= 1.001;
		double moved = fit_reference(&f, &up);
		f.ref_rel = fit_reference(&f, &ref);
		f.ref_resolved = moved > fit_param_slack * f.ref_rel;
		if (found.rel <= floor) {
			/* done when the candidate is reproduced as closely as the reference is (tbisect-rules(5)) */
			double enough = hypot(f.ref_rel, fmax(floor / 4, 2 * f.ref_rel));
			discrete_search(&f, &ref, 0, 1, enough, &best, fit);
			fitted_pairs(&f, &ref, false, -1, enough, &best);
			if (best.kind != DISCRETE)
				fitted_pairs(&f, &ref, true, best.kind, enough, &best);
			fitted_pairs(&f, &ref, true, FIT_SINKS, enough, &best);
		}
		best.ref = ref;
		best.rel[0] = f.ref_rel;
	} else {
		/* both sides at once: the head dim whose one-change pairs of the two commonest reference
		 * configurations fit best (a wrong one mixes other channels), then the other configurations there,
		 * the fitted families coarse from the two that fit best, and the best family fine */
		double enough = floor / 4;
		for (int k = 0; k < nhd && total(&best) > enough && f.spent < BUDGET; k++) {
			op_pair b = best;
			int ok = fit_init(&f, p, loaded, hds[k]);
			if (ok < 0)
				goto nomem;
			if (ok == 0) {
				nref = reference_cfgs(f.hd, refs);
				discrete_search(&f, refs, 0, 2, enough, &b, fit);
				if (total(&b) < total(&best)) {
					best = b;
					best_hd = f.hd;
				}
			}
			fit_free(&f);
		}
		if (!best_hd) {
			snprintf(out->note, sizeof out->note,
				 "attn.q, attn.k and attn.v hold no heads of one of the usual head dims (--heads gives "
				 "it): no replay of attn.o without attn.core");
			goto done;
		}
		if (fit_init(&f, p, loaded, best_hd) < 0)
			goto nomem;
		nref = reference_cfgs(best_hd, refs);
		discrete_search(&f, refs, 0, nref, enough, &best, fit);
		for (int pass = 0; pass < 2 && total(&best) > enough; pass++) {
			int top = 0;
			for (int i = 1; i < nref; i++)
				top = fit[i] < fit[top] ? i : top;
			fitted_pairs(&f, &refs[top], false, -1, enough, &best);
			fit[top] = INFINITY;
		}
		if (best.kind != DISCRETE)
			fitted_pairs(&f, &best.ref, true, best.kind, enough, &best);
	}
	out->tried = true;
	/* the reference's configuration on the candidate */
	op_pair same = PAIR(best.ref, best.ref, TB_CAUSE_NONE);
	evaluate(&f, &same);
	describe(&best.ref, best_hd, ref_name, sizeof ref_name);
	/* the search's cost, before reach refits the reference */
	searched = f.spent;
	tb_replay_decide(in, out, floor,
			 &(tb_replay_fit){ref_name, best.rel[0], same.rel[1], best.cause ? best.name : NULL, best.cause,
					  best.rel[1], best.cause && !f.joint ? reach(&f, &best.ref, &best.cand) : 0});
	if (!out->cause && searched >= BUDGET)
		snprintf(out->note + strlen(out->note), sizeof out->note - strlen(out->note),
			 " (the search of attn.o's configurations stopped at its budget%s)",
			 in->heads ? "" : "; --heads narrows it");
	fit_free(&f);
done:
	tb_replay_unload(loaded, 4);
	return 0;
nomem:
	fit_free(&f);
	tb_replay_unload(loaded, 4);
	return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
}
