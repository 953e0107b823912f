#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compare/metrics.h"
#include "testutil.h"

#define EPS 1e-12

static void finish(tb_metrics *m, const float *r, const float *c, size_t n)
{
	tb_acc a;

	tb_acc_init(&a);
	tb_acc_run(&a, r, c, n, 0, 1e-4, 1e-4, NULL);
	assert_int_equal(tb_metrics_finish(m, &a, NULL, 0, 0, 1e-2), 0);
}

static void test_hand_computed(void **state)
{
	const float r[4] = {1, 2, 3, 4}, c[4] = {1, 2, 3, 5};
	tb_metrics m;
	(void)state;

	finish(&m, r, c, 4);
	assert_int_equal(m.n, 4);
	assert_near(m.rel_l2, 1 / sqrt(30), EPS);
	assert_near(m.cosine, 34 / sqrt(30 * 39.0), EPS);
	assert_near(m.norm_ratio, sqrt(39 / 30.0), EPS);
	assert_near(m.max_abs, 1, EPS);
	assert_int_equal(m.worst_index, 3);
	assert_true(m.worst_ref == 4 && m.worst_cand == 5);
	assert_near(m.mean_abs, 0.25, EPS);
	assert_near(m.allclose_frac, 0.75, EPS);
	assert_near(m.mean[0], 2.5, EPS);
	assert_near(m.mean[1], 2.75, EPS);
	assert_near(m.std[0], sqrt(1.25), EPS);
	assert_near(m.min[1], 1, EPS);
	assert_near(m.max[1], 5, EPS);
	assert_near(m.l2[0], sqrt(30), EPS);
	assert_int_equal(m.nan[0] + m.nan[1] + m.inf[0] + m.inf[1] + m.mismatch, 0);
	assert_int_equal(m.first_bad_position, -1);
}

static void test_zeros(void **state)
{
	const float z[3] = {0, 0, 0}, c[3] = {0, 1, 0};
	tb_metrics m;
	(void)state;

	finish(&m, z, z, 3);
	assert_near(m.rel_l2, 0, 0);
	assert_near(m.cosine, 1, 0);
	assert_near(m.norm_ratio, 1, 0);
	assert_near(m.allclose_frac, 1, 0);
	finish(&m, z, c, 3);
	assert_true(isinf(m.rel_l2));
	assert_near(m.cosine, 0, 0);
	assert_true(isinf(m.norm_ratio));
	assert_int_equal(m.worst_index, 1);
}

/* Values so small their squares underflow float (normal ones below 2^-63,
 * subnormals): the sums are redone in double, never read as zero (rel_l2
 * 0, cosine 1 for a 100% difference). */
static void test_tiny_values(void **state)
{
	static const float scale[] = {1e-40f, 1e-25f};
	float r[24], c[24];
	tb_metrics m;
	(void)state;

	for (size_t k = 0; k < sizeof scale / sizeof *scale; k++) {
		for (int i = 0; i < 24; i++) {
			r[i] = scale[k] * (float)(1 + i % 3);
			c[i] = 2 * r[i];
		}
		finish(&m, r, c, 24);
		assert_near(m.rel_l2, 1, 1e-3);
		assert_near(m.norm_ratio, 2, 2e-3);
		assert_near(m.cosine, 1, 1e-3);
		c[5] = -c[5];
		finish(&m, r, c, 24);
		assert_true(m.cosine < 0.99);
	}
}

static void test_nonfinite(void **state)
{
	const float r[5] = {1, NAN, INFINITY, 2, 3};
	const float c[5] = {1, NAN, INFINITY, NAN, -INFINITY};
	tb_metrics m;
	(void)state;

	finish(&m, r, c, 5);
	assert_int_equal(m.nan[0], 1);
	assert_int_equal(m.nan[1], 2);
	assert_int_equal(m.inf[0], 1);
	assert_int_equal(m.inf[1], 2);
	/* both-NaN and equal infinities agree; 2 vs NaN and 3 vs -inf do not */
	assert_int_equal(m.mismatch, 2);
	/* the difference covers the one finite pair */
	assert_near(m.rel_l2, 0, 0);
	/* each side's statistics cover its own finite elements: 1, 2, 3 and 1 */
	assert_near(m.l2[0], sqrt(14), EPS);
	assert_near(m.mean[0], 2, EPS);
	assert_near(m.min[0], 1, 0);
	assert_near(m.max[0], 3, 0);
	assert_near(m.l2[1], 1, 0);
	assert_near(m.max[1], 1, 0);
	/* allclose: 1==1, inf==inf and NaN beside NaN pass; the mismatches fail */
	assert_near(m.allclose_frac, 3 / 5.0, EPS);
}

/* NaN on one side everywhere: nothing to measure the difference on, which
 * is not a perfect match; the finite side still has its statistics. */
static void test_no_finite_pair(void **state)
{
	const float r[3] = {1, -2, 2};
	const float c[3] = {NAN, NAN, INFINITY};
	tb_metrics m;
	(void)state;

	finish(&m, r, c, 3);
	assert_int_equal(m.mismatch, 3);
	assert_true(isnan(m.rel_l2));
	assert_true(isnan(m.cosine));
	assert_true(isnan(m.norm_ratio));
	assert_true(isnan(m.max_abs));
	assert_near(m.l2[0], 3, EPS);
	assert_near(m.min[0], -2, 0);
	assert_near(m.allclose_frac, 0, 0);
}

static void test_allclose_boundary(void **state)
{
	/* |c-r| == atol + rtol*|r| passes: exact in binary with these values */
	float r[2] = {1024, 0}, c[2] = {1024.125f, 0.0625f};
	tb_acc a;
	tb_metrics m;
	(void)state;

	tb_acc_init(&a);
	tb_acc_run(&a, r, c, 2, 0, 0.0625, 0.0625 / 1024, NULL);
	tb_metrics_finish(&m, &a, NULL, 0, 0, 1);
	assert_near(m.allclose_frac, 1, 0);
	tb_acc_init(&a);
	tb_acc_run(&a, r, c, 2, 0, 0.0625, 0.0, NULL);
	tb_metrics_finish(&m, &a, NULL, 0, 0, 1);
	assert_near(m.allclose_frac, 0.5, 0);
}

/* Splitting a tensor into runs and merging gives the same numbers. */
static void test_merge_equals_single_pass(void **state)
{
	enum { N = 10007 };
	float *r = malloc(N * sizeof *r), *c = malloc(N * sizeof *c);
	tb_acc whole, parts, piece;
	tb_metrics a, b;
	(void)state;

	for (int i = 0; i < N; i++) {
		r[i] = sinf((float)i * 0.37f) * 3;
		c[i] = r[i] + (i == 7777 ? 0.5f : 1e-3f * cosf((float)i));
	}
	tb_acc_init(&whole);
	tb_acc_run(&whole, r, c, N, 0, 1e-4, 1e-4, NULL);
	tb_acc_init(&parts);
	for (int lo = 0; lo < N; lo += 1000) {
		int n = N - lo < 1000 ? N - lo : 1000;
		tb_acc_init(&piece);
		tb_acc_run(&piece, r + lo, c + lo, (size_t)n, (uint64_t)lo, 1e-4, 1e-4, NULL);
		tb_acc_merge(&parts, &piece);
	}
	tb_metrics_finish(&a, &whole, NULL, 0, 0, 1e-2);
	tb_metrics_finish(&b, &parts, NULL, 0, 0, 1e-2);
	/* other float blocks: the same within the kernel's bound */
	assert_near(a.rel_l2, b.rel_l2, TB_ACC_BOUND * a.rel_l2);
	assert_near(a.cosine, b.cosine, 2 * TB_ACC_BOUND);
	assert_near(a.max_abs, b.max_abs, 0);
	assert_int_equal(a.worst_index, 7777);
	assert_int_equal(b.worst_index, 7777);
	assert_near(a.allclose_frac, b.allclose_frac, 0);
	free(r);
	free(c);
}

static void test_worst_first_on_ties(void **state)
{
	const float r[4] = {0, 0, 0, 0}, c[4] = {0, 2, -2, 2};
	tb_metrics m;
	(void)state;

	finish(&m, r, c, 4);
	assert_int_equal(m.worst_index, 1);
}

/* Rows of an [S, H] activation give the per-position profile. */
static void test_positions(void **state)
{
	enum { S = 6, H = 4 };
	float r[S * H], c[S * H];
	tb_run_sums rows[S];
	tb_acc a;
	tb_metrics m;
	(void)state;

	for (int i = 0; i < S * H; i++)
		r[i] = c[i] = (float)(i % 7) + 1;
	/* positions 3 and 5 scaled by 2 */
	for (int h = 0; h < H; h++) {
		c[3 * H + h] *= 2;
		c[5 * H + h] *= 2;
	}
	tb_acc_init(&a);
	for (int p = 0; p < S; p++)
		tb_acc_run(&a, r + p * H, c + p * H, H, (uint64_t)(p * H), 1e-4, 1e-4, &rows[p]);
	assert_int_equal(tb_metrics_finish(&m, &a, rows, S, S, 1e-2), 0);
	assert_int_equal(m.n_pos, S);
	assert_int_equal(m.first_bad_position, 3);
	assert_near(m.pos_rel_l2[0], 0, 0);
	assert_near(m.pos_rel_l2[3], 1, EPS);
	assert_near(m.pos_cos[3], 1, EPS);
	assert_near(m.pos_norm_ratio[5], 2, EPS);
	assert_near(m.pos_norm_ratio[4], 1, EPS);
	tb_metrics_done(&m);

	/* [B=2, S=3, H]: rows wrap onto positions */
	tb_acc_init(&a);
	for (int p = 0; p < S; p++)
		tb_acc_run(&a, r + p * H, c + p * H, H, (uint64_t)(p * H), 1e-4, 1e-4, &rows[p]);
	assert_int_equal(tb_metrics_finish(&m, &a, rows, S, 3, 1e-2), 0);
	assert_int_equal(m.n_pos, 3);
	assert_int_equal(m.first_bad_position, 0); /* row 3 is position 0 of batch 1 */
	assert_near(m.pos_rel_l2[1], 0, 0);
	tb_metrics_done(&m);
}

static void test_nan_row_profile(void **state)
{
	const float r[4] = {1, 2, 3, 4}, c[4] = {1, NAN, 3, 4};
	tb_run_sums run;
	tb_acc a;
	(void)state;

	tb_acc_init(&a);
	tb_acc_run(&a, r, c, 4, 0, 1e-4, 1e-4, &run);
	assert_near(run.srr, 1 + 9 + 16, 0);
	assert_near(run.sdd, 0, 0);
	assert_int_equal(run.mismatch, 1);
}

/* A position whose only fault is a NaN on one side is a bad position. */
static void test_nan_position_is_bad(void **state)
{
	const float r[6] = {1, 2, 3, 4, 5, 6}, c[6] = {1, 2, 3, INFINITY, 5, 6};
	tb_run_sums rows[3];
	tb_metrics m;
	tb_acc a;
	(void)state;

	tb_acc_init(&a);
	for (int p = 0; p < 3; p++)
		tb_acc_run(&a, r + 2 * p, c + 2 * p, 2, (uint64_t)(2 * p), 1e-4, 1e-4, &rows[p]);
	assert_int_equal(rows[0].mismatch, 0);
	assert_int_equal(rows[1].mismatch, 1);
	assert_int_equal(tb_metrics_finish(&m, &a, rows, 3, 3, 1e-2), 0);
	assert_int_equal(m.first_bad_position, 1);
	assert_true(isinf(m.pos_rel_l2[1]));
	assert_near(m.pos_rel_l2[2], 0, 0);
	tb_metrics_done(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hand_computed),     cmocka_unit_test(test_zeros),
		cmocka_unit_test(test_tiny_values),
		cmocka_unit_test(test_nonfinite),         cmocka_unit_test(test_no_finite_pair),
		cmocka_unit_test(test_allclose_boundary),
		cmocka_unit_test(test_merge_equals_single_pass), cmocka_unit_test(test_worst_first_on_ties),
		cmocka_unit_test(test_positions),         cmocka_unit_test(test_nan_row_profile),
		cmocka_unit_test(test_nan_position_is_bad),
	};
	return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
