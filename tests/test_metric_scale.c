/*
 * The heatmap's metrics (ui/tui/metric.c): each one's value from a cell's
 * metrics, its badness, how it prints in a cell, where a badness sits on
 * the log color scale, and the band (match, close, diverged) the scale's
 * marks give it for a tolerance, which for rel_l2 must be the status the
 * comparison gives the cell.
 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "compare/scale.h"

static const tb_scale *metric(const char *name)
{
	int i = tb_scale_find(name);

	if (i < 0)
		fail_msg("no metric %s", name);
	return &tb_scales[i];
}

static void test_table(void **state)
{
	static const char *const names[] = {"rel_l2", "cosine", "max_abs", "norm_ratio", "allclose_frac", "added"};
	(void)state;

	assert_int_equal(tb_n_scales, sizeof names / sizeof *names);
	for (size_t i = 0; i < tb_n_scales; i++) {
		assert_string_equal(tb_scales[i].name, names[i]);
		assert_int_equal(tb_scale_find(names[i]), (int)i);
		assert_true(tb_scales[i].lo > 0 && tb_scales[i].lo < tb_scales[i].hi);
	}
	assert_int_equal(tb_scale_find("bogus"), -1);
	assert_int_equal(tb_scale_find(""), -1);
}

static void test_values_and_badness(void **state)
{
	tb_metrics m = {.rel_l2 = 0.25, .cosine = 0.96, .max_abs = 3, .norm_ratio = 1.1, .allclose_frac = 0.75};
	(void)state;

	assert_near(metric("rel_l2")->value(&m, 7), 0.25, 0);
	assert_near(metric("cosine")->value(&m, 7), 0.96, 0);
	assert_near(metric("max_abs")->value(&m, 7), 3, 0);
	assert_near(metric("norm_ratio")->value(&m, 7), 1.1, 0);
	assert_near(metric("allclose_frac")->value(&m, 7), 0.75, 0);
	assert_near(metric("added")->value(&m, 7), 7, 0);
	/* Badness is the distance from a perfect match. */
	assert_near(metric("rel_l2")->badness(0.25), 0.25, 0);
	assert_near(metric("cosine")->badness(0.96), 0.04, 1e-15);
	assert_near(metric("norm_ratio")->badness(0.9), 0.1, 1e-15);
	assert_near(metric("norm_ratio")->badness(1.1), 0.1, 1e-15);
	assert_near(metric("allclose_frac")->badness(1), 0, 0);
	assert_near(metric("added")->badness(7), 7, 0);
}

static void test_format(void **state)
{
	char buf[16];
	(void)state;

	tb_scale_format(metric("rel_l2"), 0.5, buf, sizeof buf);
	assert_string_equal(buf, "5.0e-01");
	tb_scale_format(metric("rel_l2"), 0, buf, sizeof buf);
	assert_string_equal(buf, "0.0e+00");
	tb_scale_format(metric("cosine"), 0.99987, buf, sizeof buf);
	assert_string_equal(buf, "0.9999");
	tb_scale_format(metric("norm_ratio"), 99.4, buf, sizeof buf);
	assert_string_equal(buf, "99.4000");
	tb_scale_format(metric("norm_ratio"), 99.5, buf, sizeof buf);
	assert_string_equal(buf, "1.0e+02");
	tb_scale_format(metric("cosine"), -0.5, buf, sizeof buf);
	assert_string_equal(buf, "-0.5000");
	tb_scale_format(metric("rel_l2"), NAN, buf, sizeof buf);
	assert_string_equal(buf, "nan");
	tb_scale_format(metric("added"), INFINITY, buf, sizeof buf);
	assert_string_equal(buf, "inf");
	tb_scale_format(metric("cosine"), -INFINITY, buf, sizeof buf);
	assert_string_equal(buf, "-inf");
	/* Every value a metric of float tensors can take fits a cell's 7
	 * columns: from the smallest float up to the largest, and an
	 * amplification as large as the largest over the smallest error
	 * floor; negative only for cosine. */
	for (size_t i = 0; i < tb_n_scales; i++) {
		static const double vs[] = {0, 1.4e-45, 0.123456, 1, 99.49, 99.5, 3.4e38, 3.4e45, -1, -0.999999};
		for (size_t k = 0; k < sizeof vs / sizeof *vs; k++) {
			if (vs[k] < 0 && strcmp(tb_scales[i].name, "cosine"))
				continue;
			tb_scale_format(&tb_scales[i], vs[k], buf, sizeof buf);
			if (strlen(buf) > 7)
				fail_msg("%s of %g prints as %s", tb_scales[i].name, vs[k], buf);
		}
	}
}

static void test_level(void **state)
{
	const tb_scale *r = metric("rel_l2"); /* 1e-8 .. 10 */
	(void)state;

	assert_near(tb_scale_level(r, 0), 0, 0);
	assert_near(tb_scale_level(r, 1e-8), 0, 0);
	assert_near(tb_scale_level(r, 1e-9), 0, 0);
	assert_near(tb_scale_level(r, 10), 1, 0);
	assert_near(tb_scale_level(r, 1e5), 1, 0);
	assert_near(tb_scale_level(r, NAN), 1, 0);
	/* Log scale: nine decades, 1e-2 six of them up. */
	assert_near(tb_scale_level(r, 1e-2), 6.0 / 9, 1e-12);
	assert_near(tb_scale_level(r, sqrt(1e-8 * 10)), 0.5, 1e-12);
	for (double b = 1e-8; b < 10; b *= 3)
		assert_true(tb_scale_level(r, b) < tb_scale_level(r, b * 3) || b * 3 >= 10);
}

static void test_bands(void **state)
{
	tb_tolerance tol;
	(void)state;

	tb_tolerance_default(&tol); /* rtol 1e-4, atol 1e-4, diverge 1e-2 */
	assert_int_equal(tb_scale_band(metric("rel_l2"), &tol, 1e-4), TB_ST_MATCH);
	assert_int_equal(tb_scale_band(metric("rel_l2"), &tol, 2e-4), TB_ST_CLOSE);
	assert_int_equal(tb_scale_band(metric("rel_l2"), &tol, 1e-2), TB_ST_CLOSE);
	assert_int_equal(tb_scale_band(metric("rel_l2"), &tol, 1.1e-2), TB_ST_DIVERGED);
	assert_int_equal(tb_scale_band(metric("rel_l2"), &tol, NAN), TB_ST_DIVERGED);
	/* 1 - cosine on a cosine's own marks, not the tolerance's: 0.9999 and
	 * above match, below 0.999 diverged (0.999833 is close). */
	assert_int_equal(tb_scale_band(metric("cosine"), &tol, 1e-4), TB_ST_MATCH);
	assert_int_equal(tb_scale_band(metric("cosine"), &tol, 1 - 0.999833), TB_ST_CLOSE);
	assert_int_equal(tb_scale_band(metric("cosine"), &tol, 1e-3), TB_ST_CLOSE);
	assert_int_equal(tb_scale_band(metric("cosine"), &tol, 1.1e-3), TB_ST_DIVERGED);
	tol.rtol = 1e-2;
	assert_int_equal(tb_scale_band(metric("cosine"), &tol, 5e-4), TB_ST_CLOSE);
	tol.rtol = 1e-4;
	/* No diverged mark: never diverged by this scale alone. */
	assert_int_equal(tb_scale_band(metric("max_abs"), &tol, 1e-4), TB_ST_MATCH);
	assert_int_equal(tb_scale_band(metric("max_abs"), &tol, 1e6), TB_ST_CLOSE);
	assert_int_equal(tb_scale_band(metric("allclose_frac"), &tol, 0), TB_ST_MATCH);
	assert_int_equal(tb_scale_band(metric("allclose_frac"), &tol, 1), TB_ST_CLOSE);
	/* Amplification: 1 carries the input's error, the origin factor marks a birth. */
	tb_scale_set_origin_factor(10);
	assert_int_equal(tb_scale_band(metric("added"), &tol, 1), TB_ST_MATCH);
	assert_int_equal(tb_scale_band(metric("added"), &tol, 10), TB_ST_CLOSE);
	assert_int_equal(tb_scale_band(metric("added"), &tol, 11), TB_ST_DIVERGED);
	tb_scale_set_origin_factor(100);
	assert_int_equal(tb_scale_band(metric("added"), &tol, 11), TB_ST_CLOSE);
	tb_scale_set_origin_factor(10);
	/* The marks follow the tolerance. */
	tol.diverge = 1;
	assert_int_equal(tb_scale_band(metric("rel_l2"), &tol, 0.5), TB_ST_CLOSE);
}

/* On rel_l2 the heatmap reads each cell as the comparison judged it. */
static void test_rel_l2_band_is_the_status(void **state)
{
	static const double errs[] = {0, 5e-5, 1e-3, 5e-3, 0.02, 0.5};
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096], name[32];
	int64_t sh[2] = {4, 16};
	float *x = tu_ramp(64, 1), y[64];
	const tb_scale *mt = metric("rel_l2");
	tu_compared f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	for (size_t k = 0; k < sizeof errs / sizeof *errs; k++) {
		for (int i = 0; i < 64; i++)
			y[i] = (float)(x[i] * (1 + errs[k] * (i % 2 ? 1 : -1)));
		snprintf(name, sizeof name, "layers.%zu.mlp", k);
		tu_put(ref, name, TB_DT_F32, 2, sh, x);
		tu_put(cand, name, TB_DT_F32, 2, sh, y);
	}
	free(x);
	tu_compare(&f, ref, cand, NULL);
	for (size_t i = 0; i < f.res->n_cells; i++) {
		const tb_cell_result *c = &f.res->cells[i];
		int band = tb_scale_band(mt, &c->tol, mt->badness(mt->value(&c->m, 0)));
		if (band != (int)c->status)
			fail_msg("rel_l2 %g: band %s, status %s", c->m.rel_l2, tb_status_name((tb_status)band),
				 tb_status_name(c->status));
	}
	assert_int_equal(f.res->count[TB_ST_MATCH], 2);
	assert_int_equal(f.res->count[TB_ST_CLOSE], 2);
	assert_int_equal(f.res->count[TB_ST_DIVERGED], 2);
	tu_compared_done(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_values_and_badness),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_level),
		cmocka_unit_test(test_bands),
		cmocka_unit_test(test_rel_l2_band_is_the_status),
	};
	return cmocka_run_group_tests_name("metric_scale", tests, NULL, NULL);
}
