#include "config.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>

#include "diagnose/ropeband.h"
#include "compare/pairstat.h"
#include "diagnose/heads.h"
#include "tensor/dtype.h"

/* Rows looked at: a RoPE angle difference shows from position 1 on. */
#define MAX_ROWS 256
/* Values an attention factor is measured on (tb_rope_gain). */
#define GAIN_VALUES (1u << 18)
/* Pair norms may move by this much (relative) for the rotation to count as kept, beyond the dtypes' rounding. */
#define KEPT_DEV 1e-2

/* Where a tensor holds S positions of heads: [S, W] (heads in W), [S, nh, hd] or [nh, S, hd]. */
typedef struct view {
	const float *r, *c;
	int64_t S, W; /* W: the values of one position, all heads */
	int64_t nh, hd;
	bool hsd; /* [nh, S, hd] */
} view;

static size_t at(const view *v, int64_t pos, int64_t head, int64_t ch)
{
	return v->hsd ? (size_t)((head * v->S + pos) * v->hd + ch) : (size_t)(pos * v->W + head * v->hd + ch);
}

/* The relative spread of the pair norms around one common factor, and that factor. */
static double pair_dev(const view *v, int64_t rows, double *scale)
{
	double rr = 0, cc = 0, dev = 0;
	int64_t half = v->hd / 2;

	for (int pass = 0; pass < 2; pass++) {
		for (int64_t p = 0; p < rows; p++)
			for (int64_t h = 0; h < v->nh; h++)
				for (int64_t i = 0; i < half; i++) {
					size_t a = at(v, p, h, i), b = at(v, p, h, i + half);
					double nr = hypot(v->r[a], v->r[b]), nc = hypot(v->c[a], v->c[b]);
					if (!isfinite(nr) || !isfinite(nc))
						continue;
					if (pass == 0) {
						rr += nr * nr;
						cc += nc * nc;
					} else {
						dev += (nc - *scale * nr) * (nc - *scale * nr);
					}
				}
		if (pass == 0) {
			if (!(rr > 0))
				return INFINITY;
			*scale = sqrt(cc / rr);
		}
	}
	return sqrt(dev / (*scale * *scale * rr));
}

/* The relative spread of each head's norm at each position around scale. */
static double head_dev(const view *v, int64_t rows, double scale)
{
	double rr = 0, dev = 0;

	for (int64_t p = 0; p < rows; p++)
		for (int64_t h = 0; h < v->nh; h++) {
			double nr = 0, nc = 0;
			for (int64_t i = 0; i < v->hd; i++) {
				size_t a = at(v, p, h, i);
				nr += (double)v->r[a] * v->r[a];
				nc += (double)v->c[a] * v->c[a];
			}
			if (!isfinite(nr) || !isfinite(nc))
				continue;
			rr += nr;
			dev += (sqrt(nc) - scale * sqrt(nr)) * (sqrt(nc) - scale * sqrt(nr));
		}
	return rr > 0 ? sqrt(dev / (scale * scale * rr)) : INFINITY;
}

/* How far the candidate is from rotating the first r channels of each
 * head (pairs (i, i + r/2)) and passing the others through (r <= hd/2):
 * the squared norms that identity predicts against the candidate's,
 * relative to their size. */
static double partial_dev(const view *v, int64_t rows, int64_t r)
{
	int64_t half = v->hd / 2;
	double dd = 0, nn = 0;

	for (int64_t p = 0; p < rows; p++)
		for (int64_t h = 0; h < v->nh; h++)
			for (int64_t i = 0; i < half; i++) {
				/* x_i^2 from the reference's pair and the pass-through partner */
				size_t a = at(v, p, h, i), b = at(v, p, h, i + half);
				double xi = (double)v->r[a] * v->r[a] + (double)v->r[b] * v->r[b] - (double)v->c[b] * v->c[b];
				double got = (double)v->c[a] * v->c[a], want = xi;
				if (i < r / 2) { /* a rotated pair (i, i + r/2): its sum is kept */
					size_t a2 = at(v, p, h, i + r / 2), b2 = at(v, p, h, i + r / 2 + half);
					got += (double)v->c[a2] * v->c[a2];
					want += (double)v->r[a2] * v->r[a2] + (double)v->r[b2] * v->r[b2] -
						(double)v->c[b2] * v->c[b2];
				} else if (i < r) {
					continue; /* the second of a rotated pair: counted with its first */
				}
				if (!isfinite(got) || !isfinite(want))
					continue;
				dd += (got - want) * (got - want);
				nn += want * want + got * got;
			}
	return nn > 0 ? sqrt(dd / nn) : INFINITY;
}

/* |angle| between the sides' fastest pairs at position 1, summed over the heads. */
static double fast_turn(const view *v)
{
	double complex z = 0;

	for (int64_t h = 0; h < v->nh; h++) {
		size_t a = at(v, 1, h, 0), b = at(v, 1, h, v->hd / 2);
		double complex r = v->r[a] + I * v->r[b], c = v->c[a] + I * v->c[b];
		if (isfinite(creal(r * conj(c))) && isfinite(cimag(r * conj(c))))
			z += r * conj(c);
	}
	return cabs(z) > 0 ? fabs(carg(z)) : NAN;
}

/* The first `rows` positions of t, every head, as view v lays them out
 * with v->S = rows (malloc'd; NULL when t cannot be read): the pairs are
 * read over those rows only, so a long prompt is not loaded whole. */
static float *first_rows(const tb_tensor *t, const view *v, int64_t S, int64_t rows)
{
	uint64_t per = (uint64_t)rows * (uint64_t)(v->hsd ? v->hd : v->W), heads = v->hsd ? (uint64_t)v->nh : 1;
	float *x = malloc(per * heads * sizeof *x);
	tb_err err;

	if (!x || tb_tensor_acquire(t, &err) < 0) {
		free(x);
		return NULL;
	}
	/* [S, W]: one run; [nh, S, hd]: a run per head */
	for (uint64_t h = 0; h < heads; h++)
		tb_tensor_read_f32(t, h * (uint64_t)S * (uint64_t)v->hd, per, x + h * per);
	tb_tensor_release(t);
	return x;
}

int tb_rope_diff_of(const tb_tensor *ref, const tb_tensor *cand, int64_t S, int head_dim, tb_rope_diff *out)
{
	int64_t d[TB_MAX_DIMS];
	int n = tb_tensor_squeezed(ref, d), k = 0, tries[TB_N_USUAL_HEAD_DIMS];
	double tol = KEPT_DEV + tb_dtype_rounding(ref->dtype) + tb_dtype_rounding(cand->dtype), best = INFINITY;
	int64_t rows = S < MAX_ROWS ? S : MAX_ROWS;
	view v = {.S = rows};
	float *r = NULL, *c = NULL;

	*out = (tb_rope_diff){0, false, NAN, NAN, false, NAN};
	if (S < 2 || ref->numel != cand->numel)
		return -1;
	if (n == 3 && d[1] == S && d[0] != S) {
		v.hsd = true;
		v.nh = d[0];
		v.hd = d[2];
		tries[k++] = (int)d[2];
	} else if (n == 3 && d[0] == S) {
		tries[k++] = (int)d[2];
	} else if (n == 2 && d[0] == S && head_dim > 0) {
		tries[k++] = head_dim;
	} else if (n == 2 && d[0] == S) {
		for (int i = 0; i < TB_N_USUAL_HEAD_DIMS; i++)
			tries[k++] = tb_usual_head_dims[i];
	}
	v.W = (int64_t)(ref->numel / (uint64_t)S);
	r = k ? first_rows(ref, &v, S, rows) : NULL;
	c = r ? first_rows(cand, &v, S, rows) : NULL;
	if (!c) {
		free(r);
		return -1;
	}
	v.r = r;
	v.c = c;
	for (int i = 0; i < k; i++) {
		double scale = NAN, dev;
		if (tries[i] < 2 || tries[i] % 2 || v.W % tries[i])
			continue;
		v.hd = tries[i];
		if (!v.hsd)
			v.nh = v.W / v.hd;
		dev = pair_dev(&v, rows, &scale);
		if (dev < best) {
			best = dev;
			out->head_dim = tries[i];
			out->kept = dev < tol;
			out->scale = scale;
		}
	}
	if (out->head_dim) {
		v.hd = out->head_dim;
		if (!v.hsd)
			v.nh = v.W / v.hd;
		out->fast_turn = fast_turn(&v);
		out->heads_kept = head_dev(&v, rows, out->scale) < tol;
		/* the shares models rotate (partial_rotary_factor 0.5, 0.25), when the pairs did not keep theirs */
		out->partial = 0;
		for (int64_t rd = v.hd / 2; !out->kept && rd >= 2 && rd >= v.hd / 4 && !out->partial; rd /= 2)
			if (rd % 2 == 0 && partial_dev(&v, rows, rd) < tol)
				out->partial = (double)rd / (double)v.hd;
	}
	free(r);
	free(c);
	return out->head_dim ? 0 : -1;
}

double tb_rope_gain(const tb_tensor *before, const tb_tensor *after)
{
	/* an attention factor scales every value alike: the first GAIN_VALUES tell it */
	uint64_t n = before->numel < GAIN_VALUES ? before->numel : GAIN_VALUES;
	float *b, *a;
	double bb = 0, aa = 0, gain = NAN;
	tb_err err;

	if (before->numel != after->numel || !n)
		return NAN;
	b = malloc(n * sizeof *b);
	a = malloc(n * sizeof *a);
	if (!a || !b || tb_tensor_acquire(before, &err) < 0)
		goto out;
	if (tb_tensor_acquire(after, &err) < 0) {
		tb_tensor_release(before);
		goto out;
	}
	tb_tensor_read_f32(before, 0, n, b);
	tb_tensor_read_f32(after, 0, n, a);
	tb_tensor_release(before);
	tb_tensor_release(after);
	for (uint64_t i = 0; i < n; i++) {
		if (!isfinite(b[i]) || !isfinite(a[i]))
			continue;
		bb += (double)b[i] * b[i];
		aa += (double)a[i] * a[i];
	}
	gain = bb > 0 ? sqrt(aa / bb) : NAN;
out:
	free(b);
	free(a);
	return gain;
}
