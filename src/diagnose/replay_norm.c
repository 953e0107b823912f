#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/replay_ops.h"

/* With fewer positions a per-channel weight fits any formulation and eps
 * on the reference, which then says nothing about its configuration. */
#define MIN_ROWS 4

/* A norm in float32 rounds x^2, their mean, the rsqrt and two products:
 * a few units of 2^-24 per element, and a framework that fuses or upcasts
 * otherwise a few times more (the demo's reference replays at ~1e-7).  The
 * smallest change the variants stand for is far above: eps 1e-5 against
 * 1e-6 on activations of rms 1e-2 moves the output by ~5e-2. */
#define F32_FLOOR 0x1p-17

typedef enum form { RMS, LAYER, N_FORMS } form;

static const char *const form_name[N_FORMS] = {"RMSNorm", "LayerNorm"};

/* The eps values norms ship with: 1e-5 and 1e-6 (Llama, Mistral, Qwen),
 * 1e-8 and 1e-12 (BERT-era LayerNorms), 1e-3 (some ports' typo). */
static const double eps_grid[] = {1e-3, 1e-5, 1e-6, 1e-8, 1e-12};
#define N_EPS (sizeof eps_grid / sizeof *eps_grid)

/* A norm is a function of each row alone, and a few hundred rows pin a
 * per-channel weight as well as thousands do, while every variant costs
 * a sweep over the rows taken: evenly spaced ones, at most this many,
 * and only they are read. */
#define MAX_ROWS 128

/* The sweeps every variant costs, in 4-wide doubles where the CPU has them. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TB_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TB_CLONES
#endif

/* One side's norm input and output: the rows taken, of cols values
 * each, one after another, each row's mean and sums of squares (about 0 and
 * about the mean), and the output's sum of squares, which every
 * formulation and eps tried shares. */
typedef struct side {
	const float *x, *y;
	uint64_t xs, ys; /* floats from one row to the next */
	uint64_t rows, cols;
	double *mean, *ss[N_FORMS], yy;
} side;

/* A norm: y = (x - mean) / sqrt(var + eps) * w + b over each row, with
 * mean 0 and var the mean square for RMSNorm. */
typedef struct norm {
	form f;
	double eps;
	const double *w; /* cols */
	const double *b; /* cols, or NULL: no bias */
} norm;

/* Fill s's per-row sums; work holds 3 x rows doubles. */
static void row_sums(side *s, double *work)
{
	s->mean = work;
	s->ss[RMS] = work + s->rows;
	s->ss[LAYER] = work + 2 * s->rows;
	s->yy = 0;
	for (uint64_t i = 0; i < s->rows; i++) {
		const float *x = s->x + i * s->xs, *y = s->y + i * s->ys;
		double sum = 0, ss0 = 0, ssm = 0, yy = 0, mean;

#pragma omp simd reduction(+ : sum, ss0, yy)
		for (uint64_t c = 0; c < s->cols; c++) {
			sum += x[c];
			ss0 += (double)x[c] * x[c];
			yy += (double)y[c] * y[c];
		}
		mean = sum / (double)s->cols;
#pragma omp simd reduction(+ : ssm)
		for (uint64_t c = 0; c < s->cols; c++)
			ssm += (x[c] - mean) * (x[c] - mean);
		s->mean[i] = mean;
		s->ss[RMS][i] = ss0;
		s->ss[LAYER][i] = ssm;
		s->yy += yy;
	}
}

/* Row i's mean (0 for RMSNorm) and 1/sqrt(var + eps). */
static void row_stats(const side *s, uint64_t i, form f, double eps, double *mean, double *inv)
{
	*mean = f == LAYER ? s->mean[i] : 0;
	*inv = 1 / sqrt(s->ss[f][i] / (double)s->cols + eps);
}

/* Every variant tried costs one of these sweeps, hence the simd sums:
 * a sum in one double chain waits on each add's latency. */
TB_CLONES static double residual(const side *s, const norm *n)
{
	const double *w = n->w, *b = n->b;
	double dd = 0;

	for (uint64_t i = 0; i < s->rows; i++) {
		const float *x = s->x + i * s->xs, *y = s->y + i * s->ys;
		double mean, inv, row = 0;
		row_stats(s, i, n->f, n->eps, &mean, &inv);
		if (b) {
#pragma omp simd reduction(+ : row)
			for (uint64_t c = 0; c < s->cols; c++) {
				double d = (x[c] - mean) * inv * w[c] + b[c] - y[c];
				row += d * d;
			}
		} else {
#pragma omp simd reduction(+ : row)
			for (uint64_t c = 0; c < s->cols; c++) {
				double d = (x[c] - mean) * inv * w[c] - y[c];
				row += d * d;
			}
		}
		dd += row;
	}
	return tb_rel_l2(dd, s->yy);
}

/* The sums a least-squares fit per channel needs, over the rows, for the
 * formulation f and eps: sums holds 4 x cols doubles (sum n^2, n y, n, y
 * per channel, n the normalised input). */
TB_CLONES static void fit_sums(const side *s, form f, double eps, double *sums)
{
	double *snn = sums, *sny = sums + s->cols, *sn = sums + 2 * s->cols, *sy = sums + 3 * s->cols;

	memset(sums, 0, 4 * s->cols * sizeof *sums);
	for (uint64_t i = 0; i < s->rows; i++) {
		const float *x = s->x + i * s->xs, *y = s->y + i * s->ys;
		double mean, inv;
		row_stats(s, i, f, eps, &mean, &inv);
		/* the four sums are disjoint columns of one buffer */
#pragma omp simd
		for (uint64_t c = 0; c < s->cols; c++) {
			double n = (x[c] - mean) * inv;
			snn[c] += n * n;
			sny[c] += n * y[c];
			sn[c] += n;
			sy[c] += y[c];
		}
	}
}

/* The fit from fit_sums: w, and b when b is not NULL. */
static void fit_solve(const side *s, const double *sums, double *w, double *b)
{
	const double *snn = sums, *sny = sums + s->cols, *sn = sums + 2 * s->cols, *sy = sums + 3 * s->cols;
	double rows = (double)s->rows;

	for (uint64_t c = 0; c < s->cols; c++) {
		double den = b ? rows * snn[c] - sn[c] * sn[c] : snn[c];
		w[c] = den > 0 ? (b ? rows * sny[c] - sn[c] * sy[c] : sny[c]) / den : 0;
		if (b)
			b[c] = (sy[c] - w[c] * sn[c]) / rows;
	}
}

/* residual() of two norms of one formulation and eps, n0 without a bias
 * and n1 with one, in one sweep. */
TB_CLONES static void residual_pair(const side *s, const norm *n0, const norm *n1, double rel[2])
{
	const double *w0 = n0->w, *w1 = n1->w, *b1 = n1->b;
	double dd0 = 0, dd1 = 0;

	for (uint64_t i = 0; i < s->rows; i++) {
		const float *x = s->x + i * s->xs, *y = s->y + i * s->ys;
		double mean, inv, row0 = 0, row1 = 0;
		row_stats(s, i, n0->f, n0->eps, &mean, &inv);
#pragma omp simd reduction(+ : row0, row1)
		for (uint64_t c = 0; c < s->cols; c++) {
			double n = (x[c] - mean) * inv;
			double d0 = n * w0[c] - y[c], d1 = n * w1[c] + b1[c] - y[c];
			row0 += d0 * d0;
			row1 += d1 * d1;
		}
		dd0 += row0;
		dd1 += row1;
	}
	rel[0] = tb_rel_l2(dd0, s->yy);
	rel[1] = tb_rel_l2(dd1, s->yy);
}

/* The per-channel offset that n leaves on a side: mean over rows of y - n(x). */
static void fit_offset(const side *s, const norm *n, double *b)
{
	memset(b, 0, s->cols * sizeof *b);
	for (uint64_t i = 0; i < s->rows; i++) {
		const float *x = s->x + i * s->xs, *y = s->y + i * s->ys;
		double mean, inv;
		row_stats(s, i, n->f, n->eps, &mean, &inv);
		for (uint64_t c = 0; c < s->cols; c++)
			b[c] += (y[c] - (x[c] - mean) * inv * n->w[c] - (n->b ? n->b[c] : 0)) / (double)s->rows;
	}
}

/* The reference's norm: of the formulations and eps values, the one that
 * reproduces it best without a bias, unless only a bias reproduces it.
 * Fills w and b (b unused without a bias) and *alike, the eps values
 * (bits of eps_grid) that reproduce it within the floor as well: where
 * the activations are large, eps is invisible.  Returns the residual.
 * work holds 10 x cols doubles. */
static double fit_reference(const side *ref, double floor, norm *n, unsigned *alike, double *w, double *b,
			    double *work)
{
	uint64_t H = ref->cols;
	double *sums = work, *fit[3] = {work + 4 * H, work + 5 * H, work + 6 * H};
	double *best_w[2] = {work + 7 * H, work + 8 * H}, *best_b = work + 9 * H;
	double rel[2][N_FORMS][N_EPS];
	int best[2][2] = {{0, 0}, {0, 0}}; /* [bias]: form and eps of the best */
	int bias;

	for (int f = 0; f < N_FORMS; f++)
		for (size_t e = 0; e < N_EPS; e++) {
			norm t[2] = {{(form)f, eps_grid[e], fit[0], NULL}, {(form)f, eps_grid[e], fit[1], fit[2]}};
			double r[2];
			fit_sums(ref, (form)f, eps_grid[e], sums);
			fit_solve(ref, sums, fit[0], NULL);
			fit_solve(ref, sums, fit[1], fit[2]);
			residual_pair(ref, &t[0], &t[1], r);
			for (bias = 0; bias < 2; bias++) {
				rel[bias][f][e] = r[bias];
				if ((f == 0 && e == 0) || r[bias] < rel[bias][best[bias][0]][best[bias][1]]) {
					best[bias][0] = f;
					best[bias][1] = (int)e;
					memcpy(best_w[bias], fit[bias], H * sizeof *w);
					if (bias)
						memcpy(best_b, fit[2], H * sizeof *b);
				}
			}
		}
	bias = !(rel[0][best[0][0]][best[0][1]] <= floor) &&
	       rel[1][best[1][0]][best[1][1]] < rel[0][best[0][0]][best[0][1]];
	*n = (norm){(form)best[bias][0], eps_grid[best[bias][1]], w, bias ? b : NULL};
	*alike = 1u << best[bias][1];
	for (size_t e = 0; e < N_EPS; e++)
		if (rel[bias][n->f][e] <= floor)
			*alike |= 1u << e;
	memcpy(w, best_w[bias], H * sizeof *w);
	if (bias)
		memcpy(b, best_b, H * sizeof *b);
	return rel[bias][n->f][best[bias][1]];
}

/* "1e-06", or "1e-06 to 1e-12" when several eps fit the reference alike. */
static void eps_text(unsigned alike, char *buf, size_t size)
{
	size_t lo = N_EPS, hi = 0;

	for (size_t e = 0; e < N_EPS; e++)
		if (alike & (1u << e)) {
			lo = e < lo ? e : lo;
			hi = e;
		}
	if (lo == hi)
		snprintf(buf, size, "%g", eps_grid[lo]);
	else
		snprintf(buf, size, "%g to %g", eps_grid[lo], eps_grid[hi]);
}

/* The cause a weight of ones stands for: final-norm at the last norm.  A
 * layer's norm weight left at its initial ones is a norm weight that the
 * checkpoint conversion did not map, which norm-formulation's look-at
 * names ("the weight mapping of that norm"); weight-mapping stands for a
 * whole layer's conversion going wrong from some depth on. */
static tb_cause_id ones_cause(tb_tap_id tap)
{
	return tap == TB_TAP_FINAL_NORM ? TB_CAUSE_FINAL_NORM : TB_CAUSE_NORM_FORMULATION;
}

/* One change at a time to the reference's norm, on the candidate. */
static void try_variants(const side *cand, const norm *ref, unsigned alike, tb_tap_id tap, double *work,
			 tb_replay_best *best)
{
	char eps[32];
	uint64_t H = cand->cols;
	double *w = work, *b = work + H;
	norm v = *ref;

	v.f = ref->f == RMS ? LAYER : RMS;
	tb_replay_consider(best, residual(cand, &v), TB_CAUSE_NORM_FORMULATION, "%s instead of %s", form_name[v.f],
			   form_name[ref->f]);
	v = *ref;
	eps_text(alike, eps, sizeof eps);
	for (size_t e = 0; e < N_EPS; e++) {
		v.eps = eps_grid[e];
		if (!(alike & (1u << e)))
			tb_replay_consider(best, residual(cand, &v), TB_CAUSE_NORM_EPSILON, "eps %g (the reference: %s)", v.eps,
					   eps);
	}
	v = *ref;
	v.w = w;
	for (uint64_t c = 0; c < H; c++)
		w[c] = 1 + ref->w[c];
	tb_replay_consider(best, residual(cand, &v), TB_CAUSE_NORM_FORMULATION, "x*(1+w) instead of x*w");
	for (uint64_t c = 0; c < H; c++)
		w[c] = ref->w[c] - 1;
	tb_replay_consider(best, residual(cand, &v), TB_CAUSE_NORM_FORMULATION, "x*w instead of x*(1+w)");
	for (uint64_t c = 0; c < H; c++)
		w[c] = 1;
	tb_replay_consider(best, residual(cand, &v), ones_cause(tap), "weight of ones (not loaded)");
	v = *ref;
	if (ref->b) {
		v.b = NULL;
		tb_replay_consider(best, residual(cand, &v), TB_CAUSE_NORM_FORMULATION, "no bias (the reference's %s has one)",
				   form_name[ref->f]);
	} else {
		/* The bias the candidate adds is unknown: fit it there, one value
		 * per channel over all positions (MIN_ROWS keeps that honest). */
		fit_offset(cand, ref, b);
		v.b = b;
		tb_replay_consider(best, residual(cand, &v), TB_CAUSE_NORM_FORMULATION, "a bias of its own per channel");
	}
}

/* The norm's input: the previous block (or embed) for attn_norm, the last
 * block for final_norm, and for mlp_norm the residual stream after
 * attention: attn.resid, else the block's input plus attn (two taps). */
static int input_taps(const tb_replay_in *in, const tb_pair **p, char *need, size_t size)
{
	int L = in->target->cell.layer;
	const tb_pair *prev = L > 0 ? tb_replay_pair(in, L - 1, TB_TAP_BLOCK) : tb_replay_pair(in, -1, TB_TAP_EMBED);
	char prev_name[32];

	if (L > 0)
		snprintf(prev_name, sizeof prev_name, "L%d.block", L - 1);
	else
		snprintf(prev_name, sizeof prev_name, "embed");
	p[0] = p[1] = NULL;
	switch (in->target->cell.id) {
	case TB_TAP_ATTN_NORM:
		p[0] = prev;
		snprintf(need, size, "%s", prev_name);
		return p[0] ? 1 : 0;
	case TB_TAP_MLP_NORM:
		p[0] = tb_replay_pair(in, L, TB_TAP_ATTN_RESID);
		if (p[0])
			return 1;
		p[0] = prev;
		p[1] = tb_replay_pair(in, L, TB_TAP_ATTN);
		snprintf(need, size, "L%d.attn.resid, or %s and L%d.attn,", L, prev_name, L);
		return p[0] && p[1] ? 2 : 0;
	default:
		p[0] = tb_replay_pair(in, in->r->n_layers - 1, TB_TAP_BLOCK);
		snprintf(need, size, "L%d.block", in->r->n_layers - 1);
		return p[0] ? 1 : 0;
	}
}

int tb_replay_norm(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	const tb_pair *p[3];
	tb_replay_sampled v[3];
	char cell[TB_CELL_NAME_MAX], need[64], ref_variant[64], eps[32];
	uint64_t rows, cols, step, taken;
	bool finite;
	int n_in = input_taps(in, p, need, sizeof need);
	double *work, floor, ref_rel;
	float *summed;
	tb_replay_best best = {"", TB_CAUSE_NONE, 0};
	norm ref;
	unsigned alike;

	tb_cell_name(&in->target->cell, cell, sizeof cell);
	p[2] = tb_replay_pair(in, in->target->cell.layer, in->target->cell.id);
	if (!n_in || !p[2]) {
		snprintf(out->note, sizeof out->note,
			 "replaying %.24s needs its input %.64s dumped on both sides (forward hooks on embed_tokens and "
			 "the decoder layers; mkdemo writes them)",
			 cell, need);
		return 0;
	}
	if (!tb_replay_rows(out, p, 3, MIN_ROWS, &rows, &cols))
		return 0;
	out->tried = true;
	step = (rows + MAX_ROWS - 1) / MAX_ROWS;
	taken = (rows + step - 1) / step;
	if (tb_replay_load_sampled(p, 3, cols, step, v, &finite, err) < 0)
		return -1;
	if (!finite) {
		snprintf(out->note, sizeof out->note, "no replay from non-finite values");
		tb_replay_unload_sampled(v, 3);
		return 0;
	}
	/* work: 12 columns (below), then each side's row sums; with two
	 * input taps, their sums per side, taken x cols floats each */
	work = malloc((12 * cols + 6 * MAX_ROWS) * sizeof *work);
	summed = n_in == 2 ? malloc(2 * taken * cols * sizeof *summed) : NULL;
	if (!work || (n_in == 2 && !summed)) {
		free(work);
		tb_replay_unload_sampled(v, 3);
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	if (n_in == 2)
		for (int k = 0; k < 2; k++) {
			const tb_replay_rowset *a = k ? &v[0].cand : &v[0].ref, *b = k ? &v[1].cand : &v[1].ref;
			float *o = summed + k * taken * cols;
			for (uint64_t i = 0; i < taken; i++)
				for (uint64_t c = 0; c < cols; c++)
					o[i * cols + c] = a->v[i * a->stride + c] + b->v[i * b->stride + c];
		}
	{
		side r = {v[0].ref.v, v[2].ref.v, v[0].ref.stride, v[2].ref.stride, taken, cols, NULL, {NULL, NULL}, 0};
		side c = {v[0].cand.v, v[2].cand.v, v[0].cand.stride, v[2].cand.stride, taken, cols, NULL, {NULL, NULL}, 0};
		if (summed) {
			r.x = summed;
			c.x = summed + taken * cols;
			r.xs = c.xs = cols;
		}
		row_sums(&r, work + 12 * cols);
		row_sums(&c, work + 12 * cols + 3 * MAX_ROWS);
		floor = tb_replay_floor(p[2]->ref, p[2]->cand, F32_FLOOR, 1);
		/* work, in columns: the reference's w and b, then what fitting
		 * it takes, later a variant's w and b. */
		ref_rel = fit_reference(&r, floor, &ref, &alike, work, work + cols, work + 2 * cols);
		eps_text(alike, eps, sizeof eps);
		snprintf(ref_variant, sizeof ref_variant, "%s%s, eps %s", form_name[ref.f], ref.b ? " with bias" : "", eps);
		try_variants(&c, &ref, alike, in->target->cell.id, work + 2 * cols, &best);
		tb_replay_decide(in, out, floor,
				 &(tb_replay_fit){ref_variant, ref_rel, residual(&c, &ref), best.name, best.cause,
						  best.rel_l2, 0});
	}
	free(work);
	free(summed);
	tb_replay_unload_sampled(v, 3);
	return 0;
}
