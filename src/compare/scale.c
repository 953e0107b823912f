#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compare/scale.h"

/* The amplification at which the "added" scale reads as diverged. */
static double origin_factor = 10;

void tb_scale_set_origin_factor(double factor)
{
	origin_factor = factor;
}

static double v_rel_l2(const tb_metrics *m, double amp) { (void)amp; return m->rel_l2; }
static double v_cosine(const tb_metrics *m, double amp) { (void)amp; return m->cosine; }
static double v_max_abs(const tb_metrics *m, double amp) { (void)amp; return m->max_abs; }
static double v_norm_ratio(const tb_metrics *m, double amp) { (void)amp; return m->norm_ratio; }
static double v_allclose(const tb_metrics *m, double amp) { (void)amp; return m->allclose_frac; }
static double v_added(const tb_metrics *m, double amp) { (void)m; return amp; }

static double b_same(double v) { return fabs(v); }
static double b_one_minus(double v) { return fabs(1 - v); }

static double no_mark(const tb_tolerance *t) { (void)t; return NAN; }
static double zero_mark(const tb_tolerance *t) { (void)t; return 0; }
static double rtol_mark(const tb_tolerance *t) { return t->rtol; }
static double atol_mark(const tb_tolerance *t) { return t->atol; }
static double diverge_mark(const tb_tolerance *t) { return t->diverge; }
/* No amplification: a cell carrying only its inputs' error reads as 1. */
static double one_mark(const tb_tolerance *t) { (void)t; return 1; }
static double origin_mark(const tb_tolerance *t) { (void)t; return origin_factor; }
/* A cosine read on its own terms: at 0.9999 or above the two point the
 * same way, below 0.999 they do not.  (Marks taken from the tolerance,
 * as rel_l2^2/2, only drew the rel_l2 glyphs again.) */
static double cos_match_mark(const tb_tolerance *t) { (void)t; return 1e-4; }
static double cos_diverge_mark(const tb_tolerance *t) { (void)t; return 1e-3; }

/* |norm_ratio - 1| <= rel_l2, so a norm off by more than diverge is diverged. */
const tb_scale tb_scales[] = {
	{"rel_l2", "rel_l2", v_rel_l2, b_same, 0, 1e-8, 10, rtol_mark, diverge_mark},
	{"cosine", "1-cosine", v_cosine, b_one_minus, 1, 1e-12, 1, cos_match_mark, cos_diverge_mark},
	{"max_abs", "max_abs", v_max_abs, b_same, 0, 1e-8, 100, atol_mark, no_mark},
	{"norm_ratio", "|norm_ratio-1|", v_norm_ratio, b_one_minus, 1, 1e-8, 1, rtol_mark, diverge_mark},
	{"allclose_frac", "1-allclose_frac", v_allclose, b_one_minus, 1, 1e-6, 1, zero_mark, no_mark},
	{"added", "amplification", v_added, b_same, 0, 1e-2, 1e4, one_mark, origin_mark},
};
const size_t tb_n_scales = sizeof tb_scales / sizeof tb_scales[0];

int tb_scale_find(const char *name)
{
	for (size_t i = 0; i < tb_n_scales; i++)
		if (!strcmp(tb_scales[i].name, name))
			return (int)i;
	return -1;
}

void tb_scale_format(const tb_scale *mt, double v, char *buf, size_t size)
{
	if (isnan(v))
		snprintf(buf, size, "nan");
	else if (isinf(v))
		snprintf(buf, size, v > 0 ? "inf" : "-inf");
	else if (mt->fixed && fabs(v) < 99.5)
		snprintf(buf, size, "%.4f", v);
	else
		snprintf(buf, size, "%.1e", v);
}

double tb_scale_level(const tb_scale *mt, double badness)
{
	double t;

	if (isnan(badness) || badness >= mt->hi)
		return 1;
	if (badness <= mt->lo)
		return 0;
	t = (log10(badness) - log10(mt->lo)) / (log10(mt->hi) - log10(mt->lo));
	return t < 0 ? 0 : t > 1 ? 1 : t;
}

int tb_scale_band(const tb_scale *mt, const tb_tolerance *tol, double badness)
{
	double mm = mt->match_mark(tol), dm = mt->diverge_mark(tol);

	if (badness <= mm)
		return TB_ST_MATCH;
	return !isnan(dm) && !(badness <= dm) ? TB_ST_DIVERGED : TB_ST_CLOSE;
}
