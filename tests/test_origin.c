/*
 * Where the error is born (src/diagnose/origin.c), on two-layer dumps
 * written here whose candidate is the reference scaled by (1 + e) cell by
 * cell, so each cell's rel_l2 is e: the inputs' error each cell sees
 * through the wiring, the amplification and the factor that marks an
 * origin, a NaN born in one op, precision drift, and a matching pair.
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

#include "diagnose/origin.h"
#include "testutil.h"

#define N 128

static const char *const layer_taps[] = {"attn_norm", "attn", "mlp_norm", "mlp", "block"};

/* The relative error of the candidate at each cell, and NaN where the
 * candidate has one NaN element. */
typedef struct err_at {
	const char *cell;
	double e;
} err_at;

static double err_of(const err_at *errs, const char *cell)
{
	for (; errs && errs->cell; errs++)
		if (!strcmp(errs->cell, cell))
			return errs->e;
	return 0;
}

static void put_cell(const char *ref, const char *cand, const char *cell, const char *file, float scale,
		     const err_at *errs)
{
	int64_t sh[3] = {1, 8, 16};
	float *x = tu_ramp(N, scale), *y = malloc(N * sizeof *y);
	double e = err_of(errs, cell);

	for (int i = 0; i < N; i++)
		y[i] = isnan(e) ? x[i] : (float)(x[i] * (1 + e));
	if (isnan(e))
		y[N / 2] = NAN;
	tu_put(ref, file, TB_DT_F32, 3, sh, x);
	tu_put(cand, file, TB_DT_F32, 3, sh, y);
	free(x);
	free(y);
}

/* embed, n_layers layers of the five layer taps, final_norm; the errors
 * as given (0 elsewhere); compared with o (NULL: the defaults). */
static void model_pair_with(tu_compared *f, int n_layers, const err_at *errs, const tb_compare_opts *o)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096], cell[64], file[64];

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put_cell(ref, cand, "embed", "embed", 1, errs);
	for (int l = 0; l < n_layers; l++) {
		for (size_t t = 0; t < sizeof layer_taps / sizeof *layer_taps; t++) {
			snprintf(cell, sizeof cell, "L%d.%s", l, layer_taps[t]);
			snprintf(file, sizeof file, "layers.%d.%s", l, layer_taps[t]);
			put_cell(ref, cand, cell, file, 1.0f + 0.25f * (float)t, errs);
		}
	}
	put_cell(ref, cand, "final_norm", "final_norm", 1, errs);
	tu_compare(f, ref, cand, o);
}

static void model_pair(tu_compared *f, int n_layers, const err_at *errs)
{
	model_pair_with(f, n_layers, errs, NULL);
}

static long index_of(const tb_result *r, const char *name)
{
	tb_cell c;

	assert_int_equal(tb_cell_parse(name, &c), 0);
	return tb_result_find(r, &c);
}

static void origin_of(const tu_compared *f, double factor, tb_origin *o)
{
	tb_err err;

	assert_int_equal(tb_origin_compute(f->res, factor, o, &err), 0);
}

/* The model of model_pair with these errors, and its origin at this factor. */
static const tb_result *origin_with(tu_compared *f, int n_layers, const err_at *errs, double factor, tb_origin *o)
{
	model_pair(f, n_layers, errs);
	origin_of(f, factor, o);
	return f->res;
}

static void assert_origin_at(const tu_compared *f, const tb_origin *o, const char *name)
{
	char got[96] = "none";

	if (o->origin >= 0)
		tb_cell_name(&f->res->cells[o->origin].cell, got, sizeof got);
	if (strcmp(got, name))
		fail_msg("origin at %s, expected %s", got, name);
}

static void assert_starts(const char *text, const char *prefix)
{
	if (strncmp(text, prefix, strlen(prefix)))
		fail_msg("\"%s\" does not start with \"%s\"", text, prefix);
}

/* The cell's rel_l2 is its e, its inputs' error the worst of its feeders'. */
static void test_inputs_follow_the_wiring(void **state)
{
	static const err_at errs[] = {{"L0.attn", 0.001}, {"L0.mlp", 0.002}, {"L0.block", 0.003}, {"L1.attn_norm", 0.004}, {NULL, 0}};
	const tb_result *r;
	tu_compared f;
	tb_origin o;
	(void)state;

	r = origin_with(&f, 2, errs, TB_ORIGIN_FACTOR, &o);
	assert_near(tu_cell(r, "L0.attn")->m.rel_l2, 0.001, 1e-6);
	assert_near(o.input_rel_l2[index_of(r, "embed")], 0, 0);
	assert_near(o.input_rel_l2[index_of(r, "L0.attn_norm")], 0, 0);       /* embed */
	assert_near(o.input_rel_l2[index_of(r, "L0.attn")], 0, 0);            /* attn_norm */
	assert_near(o.input_rel_l2[index_of(r, "L0.mlp_norm")], 0.001, 1e-6); /* embed, attn */
	assert_near(o.input_rel_l2[index_of(r, "L0.mlp")], 0, 0);             /* mlp_norm */
	assert_near(o.input_rel_l2[index_of(r, "L0.block")], 0.002, 1e-6);   /* embed, attn, mlp */
	assert_near(o.input_rel_l2[index_of(r, "L1.attn_norm")], 0.003, 1e-6); /* L0.block */
	assert_near(o.input_rel_l2[index_of(r, "final_norm")], 0, 0);         /* L1.block */
	/* amplification = rel_l2 / input error */
	assert_near(o.amplification[index_of(r, "L0.block")], 1.5, 1e-3);
	assert_near(o.amplification[index_of(r, "L1.attn_norm")], 4.0 / 3, 1e-3);
	/* Nothing diverges: no origin, and nothing said. */
	assert_int_equal(r->verdict, TB_ST_CLOSE);
	assert_int_equal(o.origin, -1);
	tb_origin_done(&o);
	tu_compared_done(&f);
}

/* A broken op deep inside is the origin though later cells are worse. */
static void test_born_deep_inside(void **state)
{
	static const err_at errs[] = {{"L1.mlp", 0.05}, {"L1.block", 0.06}, {"final_norm", 0.08}, {NULL, 0}};
	const tb_cell_result *c;
	const tb_result *r;
	double allowed;
	tu_compared f;
	tb_origin o;
	long at;
	(void)state;

	r = origin_with(&f, 2, errs, TB_ORIGIN_FACTOR, &o);
	assert_origin_at(&f, &o, "L1.mlp");
	at = index_of(r, "L1.mlp");
	assert_near(o.input_rel_l2[at], 0, 0);
	/* From exact inputs the amplification is over the error atol alone allows, atol / rms. */
	c = &r->cells[at];
	allowed = c->tol.atol / (c->m.l2[0] / sqrt((double)c->m.n));
	assert_near(o.amplification[at], c->m.rel_l2 / allowed, 1e-9 * o.amplification[at]);
	assert_true(o.amplification[at] > 100);
	assert_near(o.amplification[index_of(r, "L1.block")], 0.06 / 0.05, 1e-3);
	assert_near(o.amplification[index_of(r, "final_norm")], 0.08 / 0.06, 1e-3);
	assert_starts(o.text, "error is born at L1.mlp: rel_l2 0.05 from inputs at 0 (x");
	tb_origin_done(&o);
	tu_compared_done(&f);
}

/* An op that multiplies its input error by 4 is an origin only below a
 * factor of 4. */
static void test_factor(void **state)
{
	static const err_at errs[] = {{"L0.attn", 0.005}, {"L0.mlp_norm", 0.005}, {"L0.mlp", 0.02}, {"L0.block", 0.02}, {"L1.attn_norm", 0.02}, {NULL, 0}};
	tu_compared f;
	tb_origin o;
	(void)state;

	model_pair(&f, 2, errs);
	assert_int_equal(tu_cell(f.res, "L0.attn")->status, TB_ST_CLOSE);
	origin_of(&f, TB_ORIGIN_FACTOR, &o);
	assert_near(o.amplification[index_of(f.res, "L0.mlp")], 4, 1e-3);
	assert_int_equal(o.origin, -1);
	/* L0.attn's error comes from exact inputs, far beyond x10, but it is
	 * close: the text says so rather than that no cell adds that much. */
	assert_string_equal(o.text, "no diverged cell adds more than x10 to its input error; L0.attn does (x44.2: rel_l2 "
				    "0.005 from inputs at 0), within --diverge 0.01");
	assert_int_equal(o.strongest, index_of(f.res, "L0.attn"));
	assert_false(o.drift_like);
	tb_origin_done(&o);
	origin_of(&f, 3, &o);
	assert_origin_at(&f, &o, "L0.mlp");
	tb_origin_done(&o);
	tu_compared_done(&f);
}

/* A NaN on one side is an infinite error: born where it first appears,
 * carried (amplification 1) after. */
static void test_nan_birth(void **state)
{
	static const err_at errs[] = {{"L0.mlp", NAN}, {"L0.block", NAN}, {"L1.attn_norm", NAN}, {NULL, 0}};
	const tb_result *r;
	tu_compared f;
	tb_origin o;
	(void)state;

	r = origin_with(&f, 2, errs, TB_ORIGIN_FACTOR, &o);
	assert_origin_at(&f, &o, "L0.mlp");
	assert_true(isinf(o.amplification[index_of(r, "L0.mlp")]));
	assert_true(isinf(o.input_rel_l2[index_of(r, "L0.block")]));
	assert_near(o.amplification[index_of(r, "L0.block")], 1, 0);
	assert_near(o.amplification[index_of(r, "L1.attn_norm")], 1, 0);
	assert_string_equal(o.text, "error is born at L0.mlp: NaN/Inf on one side only at 1 elements, from finite inputs (rel_l2 0)");
	tb_origin_done(&o);
	tu_compared_done(&f);
}

/* n_layers layers whose block errors start at e0 and double every layer,
 * nothing else off. */
static void doubling_blocks(tu_compared *f, int n_layers, double e0)
{
	err_at errs[17];
	char names[16][16];

	assert_true(n_layers <= 16);
	for (int l = 0; l < n_layers; l++) {
		snprintf(names[l], sizeof names[l], "L%d.block", l);
		errs[l] = (err_at){.cell = names[l], .e = e0 * pow(2, l)};
	}
	errs[n_layers] = (err_at){.cell = NULL};
	model_pair(f, n_layers, errs);
}

/* Block errors that double every layer from within tolerance: no op is
 * the origin, the growth per layer is measured. */
static void test_drift(void **state)
{
	tu_compared f;
	tb_origin o;
	(void)state;

	doubling_blocks(&f, 8, 1e-3);
	assert_int_equal(f.res->verdict, TB_ST_DIVERGED);
	origin_of(&f, TB_ORIGIN_FACTOR, &o);
	assert_int_equal(o.origin, -1);
	assert_near(o.drift, 2, 1e-3);
	assert_true(o.drift_like);
	assert_string_equal(o.text, "no diverged cell adds more than x10 to its input error; L0.block does (x14.1: rel_l2 "
				    "0.001 from inputs at 0), within --diverge 0.01; error grows smoothly from L0 by about "
				    "x2 per layer: precision drift, not a broken op");
	tb_origin_done(&o);
	tu_compared_done(&f);
}

/* Large error from the first layer on is no drift (the inputs differ). */
static void test_large_from_the_start_is_no_drift(void **state)
{
	tu_compared f;
	tb_origin o;
	(void)state;

	doubling_blocks(&f, 4, 0.05);
	origin_of(&f, 1e6, &o);
	assert_int_equal(o.origin, -1);
	assert_near(o.drift, 2, 1e-3);
	assert_false(o.drift_like);
	assert_string_equal(o.text, "no cell adds more than x1e+06 to its input error");
	tb_origin_done(&o);
	tu_compared_done(&f);
}

/* A loose --diverge: the cell that adds a large error is close, not
 * diverged, so no origin; the text names it, and large error from layer 0
 * on is no drift though every block is within --diverge 1. */
static void test_loose_tolerance(void **state)
{
	static const err_at errs[] = {{"L0.attn", 0.4}, {"L0.mlp_norm", 0.4}, {"L0.mlp", 0.4}, {"L0.block", 0.4},
				      {"L1.attn_norm", 0.45}, {"L1.attn", 0.45}, {"L1.mlp_norm", 0.5}, {"L1.mlp", 0.5},
				      {"L1.block", 0.5}, {"final_norm", 2}, {NULL, 0}};
	tb_compare_opts loose;
	tu_compared f;
	tb_origin o;
	(void)state;

	tb_compare_opts_init(&loose);
	loose.tol.diverge = 1;
	model_pair_with(&f, 2, errs, &loose);
	assert_int_equal(tu_cell(f.res, "L0.attn")->status, TB_ST_CLOSE);
	origin_of(&f, TB_ORIGIN_FACTOR, &o);
	assert_int_equal(o.origin, -1);
	assert_int_equal(o.strongest, index_of(f.res, "L0.attn"));
	assert_false(o.drift_like);
	assert_starts(o.text, "no diverged cell adds more than x10 to its input error; L0.attn does (x");
	if (strstr(o.text, "precision drift"))
		fail_msg("\"%s\" claims precision drift", o.text);
	tb_origin_done(&o);
	tu_compared_done(&f);
}

static void test_matching_pair(void **state)
{
	tu_compared f;
	tb_origin o;
	(void)state;

	model_pair(&f, 2, NULL);
	origin_of(&f, TB_ORIGIN_FACTOR, &o);
	assert_int_equal(f.res->verdict, TB_ST_MATCH);
	assert_int_equal(o.origin, -1);
	assert_true(isnan(o.drift));
	assert_string_equal(o.text, "");
	tb_origin_done(&o);
	tu_compared_done(&f);
}

/* A cell on one side only has no input error or amplification; the cells
 * it feeds look through it to its own inputs. */
static void test_missing_cell(void **state)
{
	static const err_at errs[] = {{"L0.attn_norm", 0.004}, {NULL, 0}};
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	tu_compared f;
	tb_origin o;
	(void)state;

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	put_cell(ref, cand, "embed", "embed", 1, errs);
	put_cell(ref, cand, "L0.attn_norm", "layers.0.attn_norm", 1, errs);
	put_cell(ref, ref, "L0.attn", "layers.0.attn", 1, errs); /* the reference only */
	put_cell(ref, cand, "L0.mlp_norm", "layers.0.mlp_norm", 1, errs);
	tu_compare(&f, ref, cand, NULL);
	origin_of(&f, TB_ORIGIN_FACTOR, &o);
	assert_int_equal(tu_cell(f.res, "L0.attn")->status, TB_ST_MISSING);
	assert_true(isnan(o.input_rel_l2[index_of(f.res, "L0.attn")]));
	assert_true(isnan(o.amplification[index_of(f.res, "L0.attn")]));
	/* mlp_norm reads embed and attn; attn stands for attn_norm. */
	assert_near(o.input_rel_l2[index_of(f.res, "L0.mlp_norm")], 0.004, 1e-6);
	tb_origin_done(&o);
	tu_compared_done(&f);
}

static void test_result_find(void **state)
{
	const tb_cell_result *c;
	tu_compared f;
	(void)state;

	model_pair(&f, 2, NULL);
	for (size_t i = 0; i < f.res->n_cells; i++)
		assert_int_equal(tb_result_find(f.res, &f.res->cells[i].cell), (long)i);
	c = tb_result_cell(f.res, 1, TB_TAP_MLP);
	assert_non_null(c);
	assert_int_equal(c->cell.layer, 1);
	assert_string_equal(c->cell.tap, "mlp");
	assert_non_null(tb_result_cell(f.res, -1, TB_TAP_FINAL_NORM));
	assert_null(tb_result_cell(f.res, 2, TB_TAP_MLP));
	assert_null(tb_result_cell(f.res, -1, TB_TAP_LOGITS));
	assert_int_equal(index_of(f.res, "L0.attn.q"), -1);
	tu_compared_done(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inputs_follow_the_wiring),
		cmocka_unit_test(test_born_deep_inside),
		cmocka_unit_test(test_factor),
		cmocka_unit_test(test_nan_birth),
		cmocka_unit_test(test_drift),
		cmocka_unit_test(test_large_from_the_start_is_no_drift),
		cmocka_unit_test(test_loose_tolerance),
		cmocka_unit_test(test_matching_pair),
		cmocka_unit_test(test_missing_cell),
		cmocka_unit_test(test_result_find),
	};
	return cmocka_run_group_tests_name("origin", tests, NULL, NULL);
}
