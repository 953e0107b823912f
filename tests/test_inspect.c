#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "compare/compare.h"
#include "compare/inspect.h"
#include "model/session.h"
#include "testutil.h"

#define EPS 1e-12

/* One cell "layers.0.attn" with the given ref and cand data, compared. */
static const tb_cell_result *one_cell(tu_compared *f, int ndim, const int64_t *shape, const float *r, const float *c)
{
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];

	snprintf(ref, sizeof ref, "%s", tu_path(dir, "ref"));
	snprintf(cand, sizeof cand, "%s", tu_path(dir, "cand"));
	tu_put(ref, "layers.0.attn", TB_DT_F32, ndim, shape, r);
	tu_put(cand, "layers.0.attn", TB_DT_F32, ndim, shape, c);
	tu_compare(f, ref, cand, NULL);
	assert_int_equal(f->res->n_cells, 1);
	return &f->res->cells[0];
}

static void test_worst_elements(void **state)
{
	const int64_t shape[2] = {3, 4};
	float r[12], c[12];
	tb_elem w[4];
	size_t n;
	tu_compared f;
	tb_err err;
	(void)state;

	for (int i = 0; i < 12; i++)
		r[i] = c[i] = (float)i;
	c[7] += 3;  /* worst */
	c[2] -= 1;  /* tie with index 9: the lower index ranks first */
	c[9] += 1;
	c[11] += 0.5f;
	const tb_cell_result *cell = one_cell(&f, 2, shape, r, c);
	assert_int_equal(tb_inspect_diff(cell, 4, w, &n, NULL, &err), 0);
	assert_int_equal(n, 4);
	assert_int_equal(w[0].index, 7);
	assert_true(w[0].ref == 7 && w[0].cand == 10);
	assert_near(w[0].diff, 3, EPS);
	assert_int_equal(w[1].index, 2);
	assert_true(w[1].ref == 2 && w[1].cand == 1);
	assert_int_equal(w[2].index, 9);
	assert_int_equal(w[3].index, 11);
	assert_near(w[3].diff, 0.5, EPS);
	/* Fewer elements than asked for. */
	tb_elem many[20];
	assert_int_equal(tb_inspect_diff(cell, 20, many, &n, NULL, &err), 0);
	assert_int_equal(n, 12);
	assert_near(many[11].diff, 0, 0);
	tu_compared_done(&f);
}

static void test_histogram(void **state)
{
	const int64_t shape[1] = {9};
	const float r[9] = {0, 0, 0, 0, 0, 0, 0, 0, INFINITY};
	const float c[9] = {0, 1e-12f, 1e-3f, 1.0f, 10.0f, 0.5f, 1e5f, NAN, INFINITY};
	tb_diff_hist h;
	tb_elem w[2];
	size_t n;
	tu_compared f;
	tb_err err;
	(void)state;

	const tb_cell_result *cell = one_cell(&f, 1, shape, r, c);
	assert_int_equal(tb_inspect_diff(cell, 2, w, &n, &h, &err), 0);
	assert_int_equal(h.zero, 1);
	assert_int_equal(h.below, 1);
	assert_int_equal(h.bins[-3 - TB_HIST_LO], 1);
	assert_int_equal(h.bins[-1 - TB_HIST_LO], 1);
	assert_int_equal(h.bins[0 - TB_HIST_LO], 1);
	assert_int_equal(h.bins[1 - TB_HIST_LO], 1);
	assert_int_equal(h.above, 1);
	assert_int_equal(h.nonfinite, 2);
	uint64_t total = h.zero + h.below + h.above + h.nonfinite;
	for (int i = 0; i < TB_HIST_BINS; i++)
		total += h.bins[i];
	assert_int_equal(total, 9);
	/* NaN on one side ranks worst; equal infinities do not differ. */
	assert_int_equal(n, 2);
	assert_int_equal(w[0].index, 7);
	assert_true(isinf(w[0].diff));
	assert_int_equal(w[1].index, 6);
	tu_compared_done(&f);
}

static void test_position_channels(void **state)
{
	const int64_t shape[3] = {2, 3, 4}; /* batch 2, 3 positions, 4 channels */
	float r[24], c[24];
	tb_elem w[3];
	size_t n;
	tu_compared f;
	tb_err err;
	(void)state;

	for (int i = 0; i < 24; i++)
		r[i] = c[i] = 1;
	c[1 * 4 + 2] = 3;       /* batch 0, position 1, channel 2 */
	c[(3 + 1) * 4 + 0] = 5; /* batch 1, position 1, channel 0 */
	c[2 * 4 + 1] = 9;       /* position 2: not asked for */
	const tb_cell_result *cell = one_cell(&f, 3, shape, r, c);
	assert_int_equal(cell->m.n_pos, 3);
	assert_int_equal(tb_inspect_position(cell, 1, 3, w, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(w[0].index, 16);
	assert_near(w[0].diff, 4, EPS);
	assert_int_equal(w[1].index, 6);
	assert_near(w[1].diff, 2, EPS);
	assert_int_equal(w[2].index, 4); /* first unchanged channel of the position */
	assert_near(w[2].diff, 0, 0);
	assert_int_equal(tb_inspect_position(cell, 3, 3, w, &n, &err), -1);
	assert_string_equal(err.msg, "cell L0.attn has no position 3");
	tu_compared_done(&f);
}

static void test_heads_packed(void **state)
{
	const int64_t shape[3] = {1, 2, 6}; /* S 2, 3 heads of 2 */
	float r[12], c[12];
	tb_head_metrics hm[3];
	tu_compared f;
	tb_err err;
	(void)state;

	for (int i = 0; i < 12; i++)
		r[i] = c[i] = (float)(i + 1);
	/* head 1 is channels 2..3 of each position: elements 2, 3, 8, 9 */
	c[2] = -r[2];
	c[3] = -r[3];
	c[8] = 2 * r[8];
	const tb_cell_result *cell = one_cell(&f, 3, shape, r, c);
	assert_int_equal(tb_head_layout_of(cell, 3, 2), TB_HEADS_LAST);
	assert_int_equal(tb_inspect_heads(cell, 3, 2, hm, &err), 0);
	assert_near(hm[0].rel_l2, 0, 0);
	assert_near(hm[0].cosine, 1, EPS);
	assert_near(hm[2].rel_l2, 0, 0);
	double srr = 3 * 3 + 4 * 4 + 9 * 9 + 10 * 10;
	double sdd = 6 * 6 + 8 * 8 + 9 * 9;
	double src = -9 - 16 + 2 * 81 + 100;
	double scc = 9 + 16 + 4 * 81 + 100;
	assert_near(hm[1].rel_l2, sqrt(sdd / srr), EPS);
	assert_near(hm[1].cosine, src / sqrt(srr * scc), EPS);
	assert_near(hm[1].norm_ratio, sqrt(scc / srr), EPS);
	assert_near(hm[1].max_abs, 9, EPS);
	tu_compared_done(&f);
}

static void test_heads_split(void **state)
{
	const int64_t shape[4] = {1, 2, 3, 2}; /* [B, H 2, S 3, D 2] */
	float r[12], c[12];
	tb_head_metrics hm[2];
	tu_compared f;
	tb_err err;
	(void)state;

	for (int i = 0; i < 12; i++)
		r[i] = c[i] = 1;
	c[7] = 2; /* head 1 (elements 6..11) */
	const tb_cell_result *cell = one_cell(&f, 4, shape, r, c);
	assert_int_equal(tb_head_layout_of(cell, 2, 2), TB_HEADS_SPLIT);
	assert_int_equal(tb_inspect_heads(cell, 2, 2, hm, &err), 0);
	assert_near(hm[0].rel_l2, 0, 0);
	assert_near(hm[1].rel_l2, sqrt(1.0 / 6), EPS);
	assert_near(hm[1].max_abs, 1, EPS);
	/* A head count that fits no layout is refused with the shape. */
	assert_int_equal(tb_head_layout_of(cell, 5, 2), TB_HEADS_NONE);
	assert_int_equal(tb_inspect_heads(cell, 5, 2, hm, &err), -1);
	assert_string_equal(err.msg, "cell L0.attn: shape [1, 2, 3, 2] does not split into 5 heads of 2");
	tu_compared_done(&f);
}

static void test_heads_inner(void **state)
{
	const int64_t shape[3] = {2, 3, 2}; /* [S 2, H 3, D 2] */
	float r[12], c[12];
	tb_head_metrics hm[3];
	tu_compared f;
	tb_err err;
	(void)state;

	for (int i = 0; i < 12; i++)
		r[i] = c[i] = 1;
	c[2 * 3 + 4] = 0; /* position 1, head 2 */
	const tb_cell_result *cell = one_cell(&f, 3, shape, r, c);
	assert_int_equal(tb_head_layout_of(cell, 3, 2), TB_HEADS_INNER);
	assert_int_equal(tb_inspect_heads(cell, 3, 2, hm, &err), 0);
	assert_near(hm[0].rel_l2, 0, 0);
	assert_near(hm[1].rel_l2, 0, 0);
	assert_near(hm[2].rel_l2, 0.5, EPS);
	tu_compared_done(&f);
}

static void test_one_sided_cell(void **state)
{
	tb_cell_result c;
	tb_elem w[1];
	size_t n = 7;
	tb_err err;
	(void)state;

	memset(&c, 0, sizeof c);
	tb_cell_make(&c.cell, 2, "mlp");
	assert_int_equal(tb_inspect_diff(&c, 1, w, &n, NULL, &err), -1);
	assert_int_equal(n, 0);
	assert_string_equal(err.msg, "cell L2.mlp is present on one side only");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_worst_elements),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_position_channels),
		cmocka_unit_test(test_heads_packed),
		cmocka_unit_test(test_heads_split),
		cmocka_unit_test(test_heads_inner),
		cmocka_unit_test(test_one_sided_cell),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
