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
#include "diagnose/sanity.h"
#include "model/session.h"
#include "testutil.h"

static void put(const char *dir, const char *name, tb_dtype dt, int ndim, const int64_t *shape, const float *x)
{
	char rel[512];
	size_t n = 1, nbytes;
	void *buf;

	for (int i = 0; i < ndim; i++)
		n *= (size_t)shape[i];
	buf = dw_encode(x, n, dt, &nbytes);
	snprintf(rel, sizeof rel, "%s.npy", name);
	assert_int_equal(dw_write_npy(tu_path(dir, rel), 1, dw_npy_descr(dt), false, ndim, shape, buf, nbytes), 0);
	free(buf);
}

static float *ramp(size_t n, float scale)
{
	float *x = malloc(n * sizeof *x);

	for (size_t i = 0; i < n; i++)
		x[i] = scale * sinf(0.7f * (float)i + 0.3f) + 0.01f * (float)(i % 5);
	return x;
}

typedef struct fixture {
	tb_session s;
	tb_result *res;
} fixture;

static void run(fixture *f, const char *ref, const char *cand, const tb_compare_opts *o)
{
	tb_open_opts oo;
	tb_compare_opts def;
	tb_err err;

	tb_open_opts_init(&oo);
	oo.npy_void2 = TB_DT_BF16;
	if (!o) {
		tb_compare_opts_init(&def);
		o = &def;
	}
	if (tb_session_open(&f->s, ref, cand, &oo, NULL, &err) < 0)
		fail_msg("open: %s: %s", err.file, err.msg);
	if (tb_compare(f->s.pairing, o, &f->res, &err) < 0)
		fail_msg("compare: %s", err.msg);
}

static void done(fixture *f)
{
	tb_result_free(f->res);
	tb_session_free(&f->s);
}

static const tb_cell_result *cell(const fixture *f, const char *name)
{
	tb_cell c;

	assert_int_equal(tb_cell_parse(name, &c), 0);
	for (size_t i = 0; i < f->res->n_cells; i++)
		if (tb_cell_eq(&f->res->cells[i].cell, &c))
			return &f->res->cells[i];
	fail_msg("no cell %s", name);
	return NULL;
}

static void test_statuses_and_first_divergence(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[3] = {1, 4, 16};
	float *x = ramp(64, 1), *y = malloc(64 * sizeof *y);
	fixture f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put(ref, "embed", TB_DT_F32, 3, sh, x);
	put(cand, "embed", TB_DT_F32, 3, sh, x);
	/* close: every element off by 1e-3 relative, rel_l2 ~ 1e-3 */
	for (int i = 0; i < 64; i++)
		y[i] = x[i] * 1.001f;
	put(ref, "layers.0.attn", TB_DT_F32, 3, sh, x);
	put(cand, "layers.0.attn", TB_DT_F32, 3, sh, y);
	/* diverged from position 2 on */
	memcpy(y, x, 64 * sizeof *y);
	for (int i = 32; i < 64; i++)
		y[i] = -x[i];
	put(ref, "layers.0.mlp", TB_DT_F32, 3, sh, x);
	put(cand, "layers.0.mlp", TB_DT_F32, 3, sh, y);
	put(ref, "layers.1.block", TB_DT_F32, 3, sh, y);
	put(cand, "layers.1.block", TB_DT_F32, 3, sh, x);
	/* only in the reference */
	put(ref, "layers.1.attn", TB_DT_F32, 3, sh, x);
	run(&f, ref, cand, NULL);

	assert_int_equal(f.res->n_cells, 5);
	assert_int_equal(cell(&f, "embed")->status, TB_ST_MATCH);
	assert_int_equal(cell(&f, "L0.attn")->status, TB_ST_CLOSE);
	assert_true(cell(&f, "L0.attn")->m.rel_l2 < 2e-3);
	assert_int_equal(cell(&f, "L0.mlp")->status, TB_ST_DIVERGED);
	assert_int_equal(cell(&f, "L0.mlp")->m.first_bad_position, 2);
	assert_int_equal(cell(&f, "L1.attn")->status, TB_ST_MISSING);
	assert_int_equal(cell(&f, "L1.block")->status, TB_ST_DIVERGED);
	assert_int_equal(f.res->verdict, TB_ST_DIVERGED);
	assert_string_equal(f.res->cells[f.res->first_div].cell.tap, "mlp");
	assert_int_equal(f.res->count[TB_ST_MATCH], 1);
	assert_int_equal(f.res->count[TB_ST_CLOSE], 1);
	assert_int_equal(f.res->count[TB_ST_DIVERGED], 2);
	assert_int_equal(f.res->count[TB_ST_MISSING], 1);
	assert_int_equal(f.s.pairing->n_unp[0], 1);
	assert_string_equal(f.s.pairing->unp[0][0].tensor->name, "layers.1.attn");
	done(&f);
	free(x);
	free(y);
}

static void test_verdicts(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {4, 8};
	float *x = ramp(32, 2), *y = malloc(32 * sizeof *y);
	fixture f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put(ref, "L0.block", TB_DT_F32, 2, sh, x);
	put(cand, "L0.block", TB_DT_F32, 2, sh, x);
	run(&f, ref, cand, NULL);
	assert_int_equal(f.res->verdict, TB_ST_MATCH);
	assert_int_equal(f.res->first_div, -1);
	done(&f);
	for (int i = 0; i < 32; i++)
		y[i] = x[i] + 5e-4f;
	put(cand, "L0.block", TB_DT_F32, 2, sh, y);
	run(&f, ref, cand, NULL);
	assert_int_equal(f.res->verdict, TB_ST_CLOSE);
	assert_int_equal(f.res->first_div, -1);
	done(&f);
	free(x);
	free(y);
}

static void test_shapes(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t a[3] = {1, 4, 8}, b[2] = {4, 8}, c[2] = {8, 4}, d[3] = {2, 4, 8};
	float *x = ramp(64, 1);
	fixture f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put(ref, "L0.attn", TB_DT_F32, 3, a, x); /* leading 1 squeezed: same shape */
	put(cand, "L0.attn", TB_DT_F32, 2, b, x);
	put(ref, "L0.mlp", TB_DT_F32, 2, b, x); /* transposed shape */
	put(cand, "L0.mlp", TB_DT_F32, 2, c, x);
	put(ref, "L0.block", TB_DT_F32, 3, d, x); /* batch 2 vs 1 */
	put(cand, "L0.block", TB_DT_F32, 2, b, x);
	run(&f, ref, cand, NULL);
	assert_int_equal(cell(&f, "L0.attn")->status, TB_ST_MATCH);
	assert_false(cell(&f, "L0.attn")->shape_mismatch);
	assert_int_equal(cell(&f, "L0.mlp")->status, TB_ST_DIVERGED);
	assert_true(cell(&f, "L0.mlp")->shape_mismatch);
	assert_non_null(strstr(cell(&f, "L0.mlp")->reason, "shapes differ"));
	assert_int_equal(cell(&f, "L0.block")->status, TB_ST_DIVERGED);
	assert_int_equal(cell(&f, "L0.block")->m.n, 32);
	done(&f);
	free(x);
}

static void test_nan_one_side(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {4, 8};
	float *x = ramp(32, 1), *y = ramp(32, 1);
	fixture f;
	(void)state;

	y[13] = NAN;
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put(ref, "L0.attn", TB_DT_F32, 2, sh, x);
	put(cand, "L0.attn", TB_DT_F32, 2, sh, y);
	run(&f, ref, cand, NULL);
	assert_int_equal(cell(&f, "L0.attn")->status, TB_ST_DIVERGED);
	assert_int_equal(cell(&f, "L0.attn")->m.nan[1], 1);
	assert_non_null(strstr(cell(&f, "L0.attn")->reason, "NaN"));
	/* the finite pairs still match exactly */
	assert_near(cell(&f, "L0.attn")->m.rel_l2, 0, 0);
	done(&f);
	free(x);
	free(y);
}

static void test_logits_kl(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {3, 2};
	const float x[6] = {100, 100.5f, 100, 100.5f, 100, 100.5f};
	const float y[6] = {100, 99.5f, 100, 99.5f, 100, 99.5f};
	fixture f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put(ref, "lm_head", TB_DT_F32, 2, sh, x);
	put(cand, "logits", TB_DT_F32, 2, sh, y);
	run(&f, ref, cand, NULL);
	const tb_cell_result *c = cell(&f, "logits");
	assert_non_null(c->logits);
	assert_true(c->m.rel_l2 < 1e-2);
	double p = 1 / (1 + exp(-0.5)), q = 1 - p;
	assert_near(c->logits->kl_mean, (p - q) * log(p / q), 1e-6);
	assert_near(c->logits->top1_agree, 0, 0);
	assert_int_equal(c->status, TB_ST_DIVERGED);
	assert_non_null(strstr(c->reason, "KL"));
	done(&f);

	tb_compare_opts o;
	tb_compare_opts_init(&o);
	o.tol.max_kl = 1;
	o.tol.atol = 1.1;
	run(&f, ref, cand, &o);
	assert_int_equal(cell(&f, "logits")->status, TB_ST_MATCH);
	done(&f);
}

/* The result must not depend on how work is split across threads. */
static void test_threads_and_units_agree(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {300, 50};
	float *x = ramp(15000, 1), *y = ramp(15000, 1);
	tb_compare_opts o;
	fixture f;
	double rel = 0, cos = 0;
	uint64_t worst = 0;
	(void)state;

	for (int i = 0; i < 15000; i++)
		y[i] += (i == 12345) ? 1.0f : 1e-3f * cosf((float)i);
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put(ref, "L0.attn", TB_DT_F32, 2, sh, x);
	put(cand, "L0.attn", TB_DT_F32, 2, sh, y);
	put(ref, "L1.attn", TB_DT_BF16, 2, sh, x);
	put(cand, "L1.attn", TB_DT_F16, 2, sh, y);
	for (int k = 0; k < 4; k++) {
		tb_compare_opts_init(&o);
		o.threads = 1 + k % 3;
		o.unit_elems = k ? (uint64_t)(7 * k * 50) : 0;
		run(&f, ref, cand, &o);
		const tb_cell_result *c = cell(&f, "L0.attn");
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
		assert_int_equal(cell(&f, "L1.attn")->m.n, 15000);
		done(&f);
	}
	free(x);
	free(y);
}

static void test_bf16_exact(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {4, 8};
	float *x = ramp(32, 3);
	fixture f;
	(void)state;

	for (int i = 0; i < 32; i++)
		x[i] = tb_bf16_to_f32(tb_f32_to_bf16(x[i]));
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put(ref, "L0.mlp", TB_DT_BF16, 2, sh, x);
	put(cand, "L0.mlp", TB_DT_F32, 2, sh, x);
	run(&f, ref, cand, NULL);
	assert_int_equal(cell(&f, "L0.mlp")->status, TB_ST_MATCH);
	assert_near(cell(&f, "L0.mlp")->m.max_abs, 0, 0);
	done(&f);
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
	float *x = ramp(32, 1), *y = malloc(32 * sizeof *y);
	tb_compare_opts o;
	fixture f;
	(void)state;

	for (int i = 0; i < 32; i++)
		y[i] = 2 * x[i];
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put(ref, "L0.attn", TB_DT_F32, 2, sh, x);
	put(cand, "L0.attn", TB_DT_F32, 2, sh, y);
	put(ref, "L0.mlp", TB_DT_F32, 2, sh, x);
	put(cand, "L0.mlp", TB_DT_F32, 2, sh, y);
	tb_compare_opts_init(&o);
	o.tol_for = loose_attn;
	run(&f, ref, cand, &o);
	assert_int_equal(cell(&f, "L0.attn")->status, TB_ST_CLOSE);
	assert_int_equal(cell(&f, "L0.mlp")->status, TB_ST_DIVERGED);
	assert_string_equal(f.res->cells[f.res->first_div].cell.tap, "mlp");
	done(&f);
	free(x);
	free(y);
}

static void test_empty_tensors(void **state)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {0, 8};
	fixture f;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put(ref, "L0.attn", TB_DT_F32, 2, sh, NULL);
	put(cand, "L0.attn", TB_DT_F32, 2, sh, NULL);
	run(&f, ref, cand, NULL);
	assert_int_equal(cell(&f, "L0.attn")->status, TB_ST_MATCH);
	assert_int_equal(cell(&f, "L0.attn")->m.n, 0);
	done(&f);
}

/* Six layers of block taps; cand(l) = f(l) decides the candidate's. */
static void write_blocks(const char *ref, const char *cand, int nan_at, int (*cand_of)(int))
{
	int64_t sh[3] = {1, 8, 16};
	char name[64];

	for (int l = 0; l < 6; l++) {
		float *x = ramp(128, 1.0f + 0.5f * (float)l), *y = ramp(128, 1.0f + 0.5f * (float)cand_of(l));
		if (nan_at >= 0)
			x[nan_at] = y[nan_at] = NAN;
		snprintf(name, sizeof name, "layers.%d.block", l);
		put(ref, name, TB_DT_F32, 3, sh, x);
		put(cand, name, TB_DT_F32, 3, sh, y);
		free(x);
		free(y);
	}
}

static int all_layer0(int l)
{
	(void)l;
	return 0;
}

static int previous_layer(int l)
{
	return l > 0 ? l - 1 : 5;
}

static void sanity_of(int nan_at, int (*cand_of)(int), tb_sanity *out)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	fixture f;
	tb_err err;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	write_blocks(ref, cand, nan_at, cand_of);
	run(&f, ref, cand, NULL);
	assert_int_equal(tb_sanity_check(&f.s, f.res, out, &err), 0);
	done(&f);
}

/* Duplicates are found from the comparison's statistics, and re-read
 * whole when NaN makes those statistics partial. */
static void test_sanity_duplicates(void **state)
{
	tb_sanity s;
	(void)state;

	sanity_of(-1, all_layer0, &s);
	assert_int_equal(s.dup_layers[1], 6);
	assert_string_equal(s.dup_tap[1], "block");
	assert_int_equal(s.dup_layers[0], 0);
	tb_sanity_done(&s);
	sanity_of(5, all_layer0, &s);
	assert_int_equal(s.dup_layers[1], 6);
	tb_sanity_done(&s);
}

static void test_sanity_offset(void **state)
{
	tb_sanity s;
	(void)state;

	sanity_of(-1, previous_layer, &s);
	assert_int_equal(s.offset, -1);
	assert_int_equal(s.dup_layers[1], 0);
	tb_sanity_done(&s);
}

static void test_tensors_equal(void **state)
{
	const char *dir = tu_tmpdir();
	int64_t sh[1] = {40000}; /* more than one block */
	float *x = ramp(40000, 1), *y = ramp(40000, 1);
	tb_tree *t;
	tb_err err;

	y[39999] = nextafterf(y[39999], 2.0f);
	put(dir, "a", TB_DT_F32, 1, sh, x);
	put(dir, "b", TB_DT_F32, 1, sh, x);
	put(dir, "c", TB_DT_F32, 1, sh, y);
	sh[0] = 39999;
	put(dir, "d", TB_DT_F32, 1, sh, x);
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
		cmocka_unit_test(test_logits_kl),
		cmocka_unit_test(test_threads_and_units_agree),
		cmocka_unit_test(test_bf16_exact),
		cmocka_unit_test(test_per_cell_tolerance),
		cmocka_unit_test(test_empty_tensors),
		cmocka_unit_test(test_sanity_duplicates),
		cmocka_unit_test(test_sanity_offset),
		cmocka_unit_test(test_tensors_equal),
	};
	return cmocka_run_group_tests_name("compare", tests, NULL, NULL);
}
