#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "compare/logits.h"
#include "testutil.h"

static void test_identical_rows(void **state)
{
	const float x[6] = {1, 5, 2, 0, -1, 3};
	tb_logit_row r;
	(void)state;

	tb_logits_row(x, x, 6, &r);
	assert_near(r.kl, 0, 1e-15);
	assert_int_equal(r.top1[0], 1);
	assert_int_equal(r.top1[1], 1);
	assert_int_equal(r.top5_common, 5);
	double lse = log(exp(1) + exp(5) + exp(2) + exp(0) + exp(-1) + exp(3));
	assert_near(r.top1_logprob[0], 5 - lse, TB_LOGIT_LP_ABS);
}

static void test_kl_hand_computed(void **state)
{
	/* p = softmax(0, ln 3) = (1/4, 3/4); q = (1/2, 1/2) */
	const float ref[2] = {0, (float)log(3.0)}, cand[2] = {0, 0};
	tb_logit_row r;
	(void)state;

	tb_logits_row(ref, cand, 2, &r);
	double want = 0.25 * log(0.25 / 0.5) + 0.75 * log(0.75 / 0.5);
	assert_near(r.kl, want, 1e-7);
	assert_int_equal(r.top1[0], 1);
	assert_int_equal(r.top1[1], 0); /* tie: lower index */
}

static void test_shift_invariance_and_stability(void **state)
{
	/* Huge logits must not overflow: softmax is computed from the max. */
	const float a[3] = {1000, 1001, 999}, b[3] = {-5000, -4999, -5001};
	tb_logit_row r;
	(void)state;

	tb_logits_row(a, b, 3, &r);
	assert_true(isfinite(r.kl));
	assert_near(r.kl, 0, 1e-9);
	assert_int_equal(r.top5_common, 3);
}

static void test_nonfinite_row(void **state)
{
	const float a[3] = {1, 2, 3}, b[3] = {1, NAN, 3};
	tb_logit_row r;
	(void)state;

	tb_logits_row(a, b, 3, &r);
	assert_true(isnan(r.kl));
	assert_int_equal(r.top1[1], 2); /* NaN never wins the argmax */
}

static void test_top5_overlap_and_summary(void **state)
{
	float a[10], b[10];
	tb_logit_metrics *lm = tb_logits_new(2, 10);
	(void)state;

	for (int i = 0; i < 10; i++) {
		a[i] = (float)i;      /* top5: 9 8 7 6 5 */
		b[i] = (float)(9 - i); /* top5: 0 1 2 3 4 */
	}
	tb_logits_row(a, b, 10, &lm->rows[0]);
	assert_int_equal(lm->rows[0].top5_common, 0);
	tb_logits_row(a, a, 10, &lm->rows[1]);
	tb_logits_finish(lm);
	assert_near(lm->top1_agree, 0.5, 0);
	assert_near(lm->top5_overlap, 0.5, 0);
	assert_near(lm->kl_last, 0, 1e-15);
	assert_near(lm->kl_mean, lm->rows[0].kl / 2, 1e-15);
	assert_true(lm->kl_max == lm->rows[0].kl);
	tb_logits_free(lm);

	/* a row holding NaN has no KL: the mean is over the others */
	lm = tb_logits_new(2, 10);
	tb_logits_row(a, b, 10, &lm->rows[0]);
	a[3] = NAN;
	tb_logits_row(a, a, 10, &lm->rows[1]);
	tb_logits_finish(lm);
	assert_true(isnan(lm->rows[1].kl));
	assert_near(lm->kl_mean, lm->rows[0].kl, 1e-15);
	assert_true(isnan(lm->kl_max));
	tb_logits_free(lm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identical_rows), cmocka_unit_test(test_kl_hand_computed),
		cmocka_unit_test(test_shift_invariance_and_stability), cmocka_unit_test(test_nonfinite_row),
		cmocka_unit_test(test_top5_overlap_and_summary),
	};
	return cmocka_run_group_tests_name("logits", tests, NULL, NULL);
}
