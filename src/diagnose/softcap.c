#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "diagnose/softcap.h"

/* Values a fit reads at most: a C is pinned down by far fewer. */
#define SAMPLE 65536
#define GRID 96
/* C is at least the capped side's largest |value| (C tanh never reaches C)
 * and at most this many times it: past that the cap changes nothing a
 * float32 shows. */
#define SPAN 64.0
#define REFINE 48

static double residual(const float *x, const float *y, size_t n, size_t step, double cap)
{
	double dd = 0, yy = 0;

	for (size_t i = 0; i < n; i += step) {
		double d = cap * tanh(x[i] / cap) - y[i];
		dd += d * d;
		yy += (double)y[i] * y[i];
	}
	return yy > 0 ? sqrt(dd / yy) : NAN;
}

/* x uncapped, y capped: the best C on a log grid, then a golden-section
 * search between its neighbours. */
static void fit_one(const float *x, const float *y, size_t n, double *cap, double *rel)
{
	size_t step = n > SAMPLE ? n / SAMPLE : 1;
	double top = 0, best = INFINITY, a, b, g = (sqrt(5) - 1) / 2;
	int k = -1;

	for (size_t i = 0; i < n; i += step)
		top = fmax(top, fabs(y[i]));
	*cap = NAN;
	*rel = NAN;
	if (!(top > 0) || !isfinite(top))
		return;
	for (int i = 0; i < GRID; i++) {
		double c = top * pow(SPAN, (double)i / (GRID - 1)), r = residual(x, y, n, step, c);
		if (r < best) {
			best = r;
			k = i;
		}
	}
	if (k < 0)
		return;
	a = log(top) + log(SPAN) * (k > 0 ? k - 1 : 0) / (GRID - 1);
	b = log(top) + log(SPAN) * (k < GRID - 1 ? k + 1 : GRID - 1) / (GRID - 1);
	for (int i = 0; i < REFINE; i++) {
		double c1 = b - g * (b - a), c2 = a + g * (b - a);
		if (residual(x, y, n, step, exp(c1)) < residual(x, y, n, step, exp(c2)))
			b = c2;
		else
			a = c1;
	}
	*cap = exp((a + b) / 2);
	*rel = fmin(best, residual(x, y, n, step, *cap));
}

void tb_softcap_fit(const float *ref, const float *cand, size_t n, tb_softcap *out)
{
	double c_ref, r_ref, c_cand, r_cand;

	fit_one(cand, ref, n, &c_ref, &r_ref);
	fit_one(ref, cand, n, &c_cand, &r_cand);
	if (!(r_cand < r_ref) && !isnan(r_ref))
		*out = (tb_softcap){c_ref, r_ref, 0};
	else
		*out = (tb_softcap){c_cand, r_cand, 1};
}

/* Values the two-cap fit reads at most: each C1 tried fits a C2 anew. */
#define PAIR_SAMPLE 512
#define PAIR_GRID 24
/* C1 = top (1 + e^t), t over this span: a saturated float32 logit lies
 * within a few units in the last place of its cap. */
#define PAIR_T0 (-16.0)
#define PAIR_T1 4.0

/* z = C1 atanh(ref / C1) of the sampled values, then the C2 that caps z
 * into cand; the fit's rel_l2. */
static double pair_rel(const float *r, const float *c, size_t n, double c1, float *z, double *c2)
{
	double rel;

	for (size_t i = 0; i < n; i++)
		z[i] = (float)(c1 * atanh(r[i] / c1));
	fit_one(z, c, n, c2, &rel);
	return isnan(rel) ? INFINITY : rel;
}

void tb_softcap_fit_pair(const float *ref, const float *cand, size_t n, tb_softcap_pair *out)
{
	size_t step = n > PAIR_SAMPLE ? n / PAIR_SAMPLE : 1, m = 0;
	float *r = malloc((n / step + 1) * sizeof *r), *c = malloc((n / step + 1) * sizeof *c);
	float *z = malloc((n / step + 1) * sizeof *z);
	double top = 0, best = INFINITY, c2, a, b, g = (sqrt(5) - 1) / 2;
	int k = -1;

	*out = (tb_softcap_pair){NAN, NAN, NAN};
	if (!r || !c || !z)
		goto out;
	for (size_t i = 0; i < n; i += step) {
		if (!isfinite(ref[i]) || !isfinite(cand[i]))
			continue;
		r[m] = ref[i];
		c[m++] = cand[i];
		top = fmax(top, fabs(ref[i]));
	}
	if (!(top > 0) || !m)
		goto out;
	/* C1 just above the reference's largest value, or far above it */
	for (int i = 0; i < PAIR_GRID; i++) {
		double t = PAIR_T0 + (PAIR_T1 - PAIR_T0) * i / (PAIR_GRID - 1);
		double rel = pair_rel(r, c, m, top * (1 + exp(t)), z, &c2);
		if (rel < best) {
			best = rel;
			k = i;
		}
	}
	if (k < 0)
		goto out;
	a = PAIR_T0 + (PAIR_T1 - PAIR_T0) * (k > 0 ? k - 1 : 0) / (PAIR_GRID - 1);
	b = PAIR_T0 + (PAIR_T1 - PAIR_T0) * (k < PAIR_GRID - 1 ? k + 1 : PAIR_GRID - 1) / (PAIR_GRID - 1);
	/* golden-section search: one new C1 per step */
	double x1 = b - g * (b - a), x2 = a + g * (b - a);
	double f1 = pair_rel(r, c, m, top * (1 + exp(x1)), z, &c2), f2 = pair_rel(r, c, m, top * (1 + exp(x2)), z, &c2);
	for (int i = 0; i < REFINE / 2; i++) {
		if (f1 < f2) {
			b = x2;
			x2 = x1;
			f2 = f1;
			x1 = b - g * (b - a);
			f1 = pair_rel(r, c, m, top * (1 + exp(x1)), z, &c2);
		} else {
			a = x1;
			x1 = x2;
			f1 = f2;
			x2 = a + g * (b - a);
			f2 = pair_rel(r, c, m, top * (1 + exp(x2)), z, &c2);
		}
	}
	out->ref_cap = top * (1 + exp((a + b) / 2));
	pair_rel(r, c, m, out->ref_cap, z, &out->cand_cap);
	/* judged where the reference is not saturated: there z = C1 atanh(ref /
	 * C1) multiplies the reference's rounding by 1 / (1 - (ref / C1)^2),
	 * up to 5 below 0.9 C1 */
	double dd = 0, cc = 0;
	for (size_t i = 0; i < m; i++) {
		if (!(fabs(r[i]) < 0.9 * out->ref_cap))
			continue;
		double d = out->cand_cap * tanh(out->ref_cap * atanh(r[i] / out->ref_cap) / out->cand_cap) - c[i];
		dd += d * d;
		cc += (double)c[i] * c[i];
	}
	out->rel_l2 = cc > 0 ? sqrt(dd / cc) : NAN;
out:
	free(r);
	free(c);
	free(z);
}
