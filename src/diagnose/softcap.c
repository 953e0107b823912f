#include "config.h"

#include <math.h>

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
