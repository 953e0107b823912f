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

#include "compare/compare.h"
#include "dumpwrite.h"
#include "compare/pairstat.h"
#include "model/session.h"
#include "testutil.h"

static void test_statuses_and_first_divergence(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[3] = {1, 4, 16};
	float *x = tu_ramp(64, 1), *y = malloc(64 * sizeof *y);
	tu_compared f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	tu_put(ref, "embed", TB_DT_F32, 3, sh, x);
	tu_put(cand, "embed", TB_DT_F32, 3, sh, x);
	/* close: every element off by 1e-3 relative, rel_l2 ~ 1e-3 */
	for (int i = 0; i < 64; i++)
		y[i] = x[i] * 1.001f;
	tu_put(ref, "layers.0.attn", TB_DT_F32, 3, sh, x);
	tu_put(cand, "layers.0.attn", TB_DT_F32, 3, sh, y);
	/* diverged from position 2 on */
	memcpy(y, x, 64 * sizeof *y);
	for (int i = 32; i < 64; i++)
		y[i] = -x[i];
	tu_put(ref, "layers.0.mlp", TB_DT_F32, 3, sh, x);
	tu_put(cand, "layers.0.mlp", TB_DT_F32, 3, sh, y);
	tu_put(ref, "layers.1.block", TB_DT_F32, 3, sh, y);
	tu_put(cand, "layers.1.block", TB_DT_F32, 3, sh, x);
	/* only in the reference */
	tu_put(ref, "layers.1.attn", TB_DT_F32, 3, sh, x);
	tu_compare(&f, ref, cand, NULL);

	assert_int_equal(f.res->n_cells, 5);
	assert_int_equal(tu_cell(f.res, "embed")->status, TB_ST_MATCH);
	assert_int_equal(tu_cell(f.res, "L0.attn")->status, TB_ST_CLOSE);
	assert_true(tu_cell(f.res, "L0.attn")->m.rel_l2 < 2e-3);
	assert_int_equal(tu_cell(f.res, "L0.mlp")->status, TB_ST_DIVERGED);
	assert_int_equal(tu_cell(f.res, "L0.mlp")->m.first_bad_position, 2);
	assert_int_equal(tu_cell(f.res, "L1.attn")->status, TB_ST_MISSING);
	assert_int_equal(tu_cell(f.res, "L1.block")->status, TB_ST_DIVERGED);
	assert_int_equal(f.res->verdict, TB_ST_DIVERGED);
	assert_string_equal(f.res->cells[f.res->first_div].cell.tap, "mlp");
	assert_int_equal(f.res->count[TB_ST_MATCH], 1);
	assert_int_equal(f.res->count[TB_ST_CLOSE], 1);
	assert_int_equal(f.res->count[TB_ST_DIVERGED], 2);
	assert_int_equal(f.res->count[TB_ST_MISSING], 1);
	assert_int_equal(f.s.pairing->n_unp[0], 1);
	assert_string_equal(f.s.pairing->unp[0][0].tensor->name, "layers.1.attn");
	tu_compared_done(&f);
	free(x);
	free(y);
}

static void test_verdicts(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {4, 8};
	float *x = tu_ramp(32, 2), *y = malloc(32 * sizeof *y);
	tu_compared f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	tu_put(ref, "L0.block", TB_DT_F32, 2, sh, x);
	tu_put(cand, "L0.block", TB_DT_F32, 2, sh, x);
	tu_compare(&f, ref, cand, NULL);
	assert_int_equal(f.res->verdict, TB_ST_MATCH);
	assert_int_equal(f.res->first_div, -1);
	tu_compared_done(&f);
	for (int i = 0; i < 32; i++)
		y[i] = x[i] + 5e-4f;
	tu_put(cand, "L0.block", TB_DT_F32, 2, sh, y);
	tu_compare(&f, ref, cand, NULL);
	assert_int_equal(f.res->verdict, TB_ST_CLOSE);
	assert_int_equal(f.res->first_div, -1);
	tu_compared_done(&f);
	free(x);
	free(y);
}

static void test_shapes(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t a[3] = {1, 4, 8}, b[2] = {4, 8}, c[2] = {8, 4}, d[3] = {2, 4, 8};
	float *x = tu_ramp(64, 1);
	tu_compared f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	tu_put(ref, "L0.attn", TB_DT_F32, 3, a, x); /* leading 1 squeezed: same shape */
	tu_put(cand, "L0.attn", TB_DT_F32, 2, b, x);
	tu_put(ref, "L0.mlp", TB_DT_F32, 2, b, x); /* transposed shape */
	tu_put(cand, "L0.mlp", TB_DT_F32, 2, c, x);
	tu_put(ref, "L0.block", TB_DT_F32, 3, d, x); /* batch 2 vs 1 */
	tu_put(cand, "L0.block", TB_DT_F32, 2, b, x);
	tu_compare(&f, ref, cand, NULL);
	assert_int_equal(tu_cell(f.res, "L0.attn")->status, TB_ST_MATCH);
	assert_false(tu_cell(f.res, "L0.attn")->shape_mismatch);
	assert_int_equal(tu_cell(f.res, "L0.mlp")->status, TB_ST_DIVERGED);
	assert_true(tu_cell(f.res, "L0.mlp")->shape_mismatch);
	assert_non_null(strstr(tu_cell(f.res, "L0.mlp")->reason, "shapes differ"));
	assert_int_equal(tu_cell(f.res, "L0.block")->status, TB_ST_DIVERGED);
	assert_int_equal(tu_cell(f.res, "L0.block")->m.n, 32);
	tu_compared_done(&f);
	free(x);
}

static void test_nan_one_side(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {4, 8};
	float *x = tu_ramp(32, 1), *y = tu_ramp(32, 1);
	tu_compared f;
	(void)state;

	y[13] = NAN;
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	tu_put(ref, "L0.attn", TB_DT_F32, 2, sh, x);
	tu_put(cand, "L0.attn", TB_DT_F32, 2, sh, y);
	tu_compare(&f, ref, cand, NULL);
	assert_int_equal(tu_cell(f.res, "L0.attn")->status, TB_ST_DIVERGED);
	assert_int_equal(tu_cell(f.res, "L0.attn")->m.nan[1], 1);
	assert_non_null(strstr(tu_cell(f.res, "L0.attn")->reason, "NaN"));
	/* the finite pairs still match exactly */
	assert_near(tu_cell(f.res, "L0.attn")->m.rel_l2, 0, 0);
	tu_compared_done(&f);
	free(x);
	free(y);
}

/* NaN in the same places on both sides is no mismatch: a tensor compared
 * with itself matches (it used to be close, blamed on dtype-precision). */
static void test_nan_both_sides(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {4, 8};
	float *x = tu_ramp(32, 1), *y = tu_ramp(32, 1);
	tu_compared f;
	(void)state;

	x[13] = y[13] = NAN;
	x[20] = y[20] = INFINITY;
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	tu_put(ref, "L0.attn", TB_DT_F32, 2, sh, x);
	tu_put(cand, "L0.attn", TB_DT_F32, 2, sh, y);
	tu_put(ref, "L0.mlp", TB_DT_BF16, 2, sh, x);
	tu_put(cand, "L0.mlp", TB_DT_BF16, 2, sh, y);
	tu_compare(&f, ref, cand, NULL);
	for (int i = 0; i < 2; i++) {
		const tb_cell_result *c = tu_cell(f.res, i ? "L0.mlp" : "L0.attn");
		assert_int_equal(c->status, TB_ST_MATCH);
		assert_int_equal(c->m.nan[0], 1);
		assert_int_equal(c->m.nan[1], 1);
		assert_int_equal(c->m.mismatch, 0);
		assert_near(c->m.allclose_frac, 1, 0);
	}
	assert_int_equal(f.res->verdict, TB_ST_MATCH);
	tu_compared_done(&f);
	/* and the whole tree against itself */
	tu_compare(&f, ref, ref, NULL);
	assert_int_equal(f.res->verdict, TB_ST_MATCH);
	tu_compared_done(&f);
	free(x);
	free(y);
}

/* Leading size-1 axes are all dropped: [] pairs with [1] and [1, 1]. */
static void test_scalar_shapes(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t one[2] = {1, 1}, two[1] = {2};
	float x[2] = {3, 4};
	tu_compared f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	tu_put(ref, "L0.attn", TB_DT_F32, 0, one, x);
	tu_put(cand, "L0.attn", TB_DT_F32, 1, one, x);
	tu_put(ref, "L0.mlp", TB_DT_F32, 0, one, x);
	tu_put(cand, "L0.mlp", TB_DT_F32, 2, one, x);
	tu_put(ref, "L0.block", TB_DT_F32, 0, one, x); /* still not [2] */
	tu_put(cand, "L0.block", TB_DT_F32, 1, two, x);
	tu_compare(&f, ref, cand, NULL);
	assert_int_equal(tu_cell(f.res, "L0.attn")->status, TB_ST_MATCH);
	assert_false(tu_cell(f.res, "L0.attn")->shape_mismatch);
	assert_int_equal(tu_cell(f.res, "L0.mlp")->status, TB_ST_MATCH);
	assert_true(tu_cell(f.res, "L0.block")->shape_mismatch);
	tu_compared_done(&f);
}

static void test_logits_kl(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {3, 2};
	const float x[6] = {100, 100.5f, 100, 100.5f, 100, 100.5f};
	const float y[6] = {100, 99.5f, 100, 99.5f, 100, 99.5f};
	tu_compared f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	tu_put(ref, "lm_head", TB_DT_F32, 2, sh, x);
	tu_put(cand, "logits", TB_DT_F32, 2, sh, y);
	tu_compare(&f, ref, cand, NULL);
	const tb_cell_result *c = tu_cell(f.res, "logits");
	assert_non_null(c->logits);
	assert_true(c->m.rel_l2 < 1e-2);
	double p = 1 / (1 + exp(-0.5)), q = 1 - p;
	assert_near(c->logits->kl_mean, (p - q) * log(p / q), 1e-6);
	assert_near(c->logits->top1_agree, 0, 0);
	assert_int_equal(c->status, TB_ST_DIVERGED);
	assert_non_null(strstr(c->reason, "KL"));
	tu_compared_done(&f);

	tb_compare_opts o;
	tb_compare_opts_init(&o);
	o.tol.max_kl = 1;
	o.tol.atol = 1.1;
	tu_compare(&f, ref, cand, &o);
	assert_int_equal(tu_cell(f.res, "logits")->status, TB_ST_MATCH);
	tu_compared_done(&f);
}

/* The result must not depend on how work is split across threads. */
static void test_threads_and_units_agree(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {300, 50};
	float *x = tu_ramp(15000, 1), *y = tu_ramp(15000, 1);
	tb_compare_opts o;
	tu_compared f;
	double rel = 0, cos = 0;
	uint64_t worst = 0;
	(void)state;

	for (int i = 0; i < 15000; i++)
		y[i] += (i == 12345) ? 1.0f : 1e-3f * cosf((float)i);
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	tu_put(ref, "L0.attn", TB_DT_F32, 2, sh, x);
	tu_put(cand, "L0.attn", TB_DT_F32, 2, sh, y);
	tu_put(ref, "L1.attn", TB_DT_BF16, 2, sh, x);
	tu_put(cand, "L1.attn", TB_DT_F16, 2, sh, y);
	for (int k = 0; k < 4; k++) {
		tb_compare_opts_init(&o);
		o.threads = 1 + k % 3;
		o.unit_elems = k ? (uint64_t)(7 * k * 50) : 0;
		tu_compare(&f, ref, cand, &o);
		const tb_cell_result *c = tu_cell(f.res, "L0.attn");
		if (k == 0) {
			rel = c->m.rel_l2;
			cos = c->m.cosine;
			worst = c->m.worst_index;
			assert_int_equal(worst, 12345);
			assert_int_equal(c->m.first_bad_position, 246);
		} else {
			assert_near(c->m.rel_l2, rel, 1e-12 * rel);
			assert_near(c->m.cosine, cos, 1e-12);
			assert_int_equal(c->m.worst_index, worst);
			assert_int_equal(c->m.first_bad_position, 246);
		}
		assert_int_equal(tu_cell(f.res, "L1.attn")->m.n, 15000);
		tu_compared_done(&f);
	}
	free(x);
	free(y);
}

static void test_bf16_exact(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {4, 8};
	float *x = tu_ramp(32, 3);
	tu_compared f;
	(void)state;

	for (int i = 0; i < 32; i++)
		x[i] = tb_bf16_to_f32(tb_f32_to_bf16(x[i]));
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	tu_put(ref, "L0.mlp", TB_DT_BF16, 2, sh, x);
	tu_put(cand, "L0.mlp", TB_DT_F32, 2, sh, x);
	tu_compare(&f, ref, cand, NULL);
	assert_int_equal(tu_cell(f.res, "L0.mlp")->status, TB_ST_MATCH);
	assert_near(tu_cell(f.res, "L0.mlp")->m.max_abs, 0, 0);
	tu_compared_done(&f);
	free(x);
}

static void loose_attn(void *ud, const tb_cell *c, const tb_tensor *r, const tb_tensor *cd, tb_tolerance *tol)
{
	(void)ud;
	(void)r;
	(void)cd;
	if (!strcmp(c->tap, "attn"))
		tol->diverge = 10;
}

static void test_per_cell_tolerance(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {4, 8};
	float *x = tu_ramp(32, 1), *y = malloc(32 * sizeof *y);
	tb_compare_opts o;
	tu_compared f;
	(void)state;

	for (int i = 0; i < 32; i++)
		y[i] = 2 * x[i];
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	tu_put(ref, "L0.attn", TB_DT_F32, 2, sh, x);
	tu_put(cand, "L0.attn", TB_DT_F32, 2, sh, y);
	tu_put(ref, "L0.mlp", TB_DT_F32, 2, sh, x);
	tu_put(cand, "L0.mlp", TB_DT_F32, 2, sh, y);
	tb_compare_opts_init(&o);
	o.tol_for = loose_attn;
	tu_compare(&f, ref, cand, &o);
	assert_int_equal(tu_cell(f.res, "L0.attn")->status, TB_ST_CLOSE);
	assert_int_equal(tu_cell(f.res, "L0.mlp")->status, TB_ST_DIVERGED);
	assert_string_equal(f.res->cells[f.res->first_div].cell.tap, "mlp");
	tu_compared_done(&f);
	free(x);
	free(y);
}

static void test_empty_tensors(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {0, 8};
	tu_compared f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	tu_put(ref, "L0.attn", TB_DT_F32, 2, sh, NULL);
	tu_put(cand, "L0.attn", TB_DT_F32, 2, sh, NULL);
	tu_compare(&f, ref, cand, NULL);
	assert_int_equal(tu_cell(f.res, "L0.attn")->status, TB_ST_MATCH);
	assert_int_equal(tu_cell(f.res, "L0.attn")->m.n, 0);
	tu_compared_done(&f);
}

static void test_tensors_equal(void **state)
{
	const char *dir = tu_tmpdir();
	int64_t sh[1] = {40000}; /* more than one block */
	float *x = tu_ramp(40000, 1), *y = tu_ramp(40000, 1);
	tb_tree *t;
	tb_err err;

	y[39999] = nextafterf(y[39999], 2.0f);
	tu_put(dir, "a", TB_DT_F32, 1, sh, x);
	tu_put(dir, "b", TB_DT_F32, 1, sh, x);
	tu_put(dir, "c", TB_DT_F32, 1, sh, y);
	sh[0] = 39999;
	tu_put(dir, "d", TB_DT_F32, 1, sh, x);
	t = tu_open(dir, NULL);
	assert_int_equal(tb_tensors_equal(tu_tensor(t, "a"), tu_tensor(t, "b"), &err), 1);
	assert_int_equal(tb_tensors_equal(tu_tensor(t, "a"), tu_tensor(t, "c"), &err), 0);
	assert_int_equal(tb_tensors_equal(tu_tensor(t, "a"), tu_tensor(t, "d"), &err), 0);
	tb_tree_free(t);
	free(x);
	free(y);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_statuses_and_first_divergence),
		cmocka_unit_test(test_verdicts),
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_nan_one_side),
		cmocka_unit_test(test_nan_both_sides),
		cmocka_unit_test(test_scalar_shapes),
		cmocka_unit_test(test_logits_kl),
		cmocka_unit_test(test_threads_and_units_agree),
		cmocka_unit_test(test_bf16_exact),
		cmocka_unit_test(test_per_cell_tolerance),
		cmocka_unit_test(test_empty_tensors),
		cmocka_unit_test(test_tensors_equal),
	};
	return cmocka_run_group_tests_name("compare", tests, NULL, NULL);
}
