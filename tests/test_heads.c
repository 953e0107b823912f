#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "diagnose/heads.h"

#define MAX_CELLS 8

/* A result of layer 0 cells with shapes only: the inference reads no data. */
typedef struct layer {
	tb_tensor t[MAX_CELLS];
	tb_cell_result c[MAX_CELLS];
	tb_result r;
} layer;

/* Add cell tap of the given shape (cells must come in forward order). */
static void add(layer *l, const char *tap, int ndim, const int64_t *shape)
{
	size_t i = l->r.n_cells++;
	tb_err err;

	assert_true(i < MAX_CELLS);
	memset(&l->t[i], 0, sizeof l->t[i]);
	assert_int_equal(tb_tensor_set_shape(&l->t[i], ndim, shape, "test", &err), 0);
	memset(&l->c[i], 0, sizeof l->c[i]);
	tb_cell_make(&l->c[i].cell, 0, tap);
	l->c[i].ref = l->c[i].cand = &l->t[i];
	l->r.cells = l->c;
	l->r.n_layers = 1;
	if (i > 0)
		assert_true(tb_cell_cmp(&l->c[i - 1].cell, &l->c[i].cell) < 0);
}

static long find(const layer *l, const char *tap)
{
	for (size_t i = 0; i < l->r.n_cells; i++)
		if (!strcmp(l->c[i].cell.tap, tap))
			return (long)i;
	fail_msg("no cell %s", tap);
	return -1;
}

static void expect(const layer *l, const char *tap, int given_q, int given_kv, int n, int64_t head_dim,
		   tb_head_layout layout, const char *note)
{
	tb_heads h;

	tb_heads_infer(&l->r, find(l, tap), given_q, given_kv, &h);
	if (h.n != n || h.head_dim != head_dim || h.layout != layout)
		fail_msg("%s with --heads %d --kv-heads %d: %d heads of %lld (layout %d), expected %d of %lld (%d); %s", tap,
			 given_q, given_kv, h.n, (long long)h.head_dim, (int)h.layout, n, (long long)head_dim,
			 (int)layout, h.note);
	assert_string_equal(h.note, note);
}

#define UNKNOWN "head count unknown: give --heads N (and --kv-heads N for GQA)"

/* 8 query heads of 8 channels, 2 kv heads, packed [S, heads * dim]; S = 16. */
static void packed(layer *l)
{
	static const int64_t q[] = {1, 16, 64}, kv[] = {1, 16, 16}, attn[] = {1, 16, 64}, mlp[] = {1, 16, 128};

	memset(l, 0, sizeof *l);
	add(l, "attn.q", 3, q);
	add(l, "attn.k", 3, kv);
	add(l, "attn.v", 3, kv);
	add(l, "attn", 3, attn);
	add(l, "mlp", 3, mlp);
}

static void test_given_counts(void **state)
{
	layer l;
	tb_heads h;
	(void)state;

	packed(&l);
	expect(&l, "attn.q", 8, 2, 8, 8, TB_HEADS_LAST, "");
	expect(&l, "attn.k", 8, 2, 2, 8, TB_HEADS_LAST, "");
	expect(&l, "attn.v", 8, 2, 2, 8, TB_HEADS_LAST, "");
	expect(&l, "attn", 8, 2, 8, 8, TB_HEADS_LAST, "");
	tb_heads_infer(&l.r, find(&l, "attn.k"), 8, 2, &h);
	assert_int_equal(h.q, 8);
	assert_int_equal(h.kv, 2);
	assert_string_equal(h.source, "--heads");
	/* counts that do not fit the widths are no heads, whatever else would */
	expect(&l, "attn.q", 7, 0, 0, 0, TB_HEADS_NONE, "the shape does not split into 7 heads");
	expect(&l, "attn.k", 8, 3, 0, 0, TB_HEADS_NONE, "the shape does not split into 3 heads");
}

static void test_gqa_derived(void **state)
{
	layer l;
	tb_heads h;
	(void)state;

	packed(&l);
	/* kv from q and the widths: 8 * 16 / 64 */
	expect(&l, "attn.k", 8, 0, 2, 8, TB_HEADS_LAST, "");
	expect(&l, "attn.v", 8, 0, 2, 8, TB_HEADS_LAST, "");
	/* q from kv: 2 * 64 / 16 */
	expect(&l, "attn.q", 0, 2, 8, 8, TB_HEADS_LAST, "");
	tb_heads_infer(&l.r, find(&l, "attn.q"), 0, 2, &h);
	assert_int_equal(h.q, 8);
	assert_int_equal(h.kv, 2);
	assert_string_equal(h.source, "--kv-heads");

	/* no attn.k to tell: taken for no GQA */
	static const int64_t q[] = {16, 64}, attn[] = {16, 64};
	memset(&l, 0, sizeof l);
	add(&l, "attn.q", 2, q);
	add(&l, "attn.v", 2, q);
	add(&l, "attn", 2, attn);
	expect(&l, "attn.v", 4, 0, 4, 16, TB_HEADS_LAST, "");
	/* only --kv-heads and no attn.k: the query heads stay unknown */
	expect(&l, "attn.q", 0, 4, 0, 0, TB_HEADS_NONE, UNKNOWN);
}

static void test_inferred_inner(void **state)
{
	/* [B, S, H, D], head_dim a multiple of the head count */
	static const int64_t q[] = {1, 16, 8, 8}, k[] = {1, 16, 2, 8}, attn[] = {1, 16, 64};
	layer l;
	tb_heads h;
	(void)state;

	memset(&l, 0, sizeof l);
	add(&l, "attn.q", 4, q);
	add(&l, "attn.k", 4, k);
	add(&l, "attn.v", 4, k);
	add(&l, "attn", 3, attn);
	expect(&l, "attn.q", 0, 0, 8, 8, TB_HEADS_INNER, "");
	expect(&l, "attn.k", 0, 0, 2, 8, TB_HEADS_INNER, "");
	expect(&l, "attn.v", 0, 0, 2, 8, TB_HEADS_INNER, "");
	expect(&l, "attn", 0, 0, 8, 8, TB_HEADS_LAST, "");
	tb_heads_infer(&l.r, find(&l, "attn.q"), 0, 0, &h);
	assert_string_equal(h.source, "inferred from attn.q/attn.k shapes");
	/* given counts derive kv from the head axes' widths too: 8 * 16 / 64 */
	expect(&l, "attn.k", 8, 0, 2, 8, TB_HEADS_INNER, "");
	/* a count that is not the head axis does not split it, though the last axis would */
	expect(&l, "attn.q", 4, 0, 0, 0, TB_HEADS_NONE, "the shape does not split into 4 heads");
}

static void test_inferred_split(void **state)
{
	/* [B, H, S, D] */
	static const int64_t q[] = {1, 8, 16, 8}, k[] = {1, 2, 16, 8}, attn[] = {1, 16, 64};
	layer l;
	(void)state;

	memset(&l, 0, sizeof l);
	add(&l, "attn.q", 4, q);
	add(&l, "attn.k", 4, k);
	add(&l, "attn", 3, attn);
	expect(&l, "attn.q", 0, 0, 8, 8, TB_HEADS_SPLIT, "");
	expect(&l, "attn.k", 0, 0, 2, 8, TB_HEADS_SPLIT, "");
}

static void test_nothing_to_infer(void **state)
{
	/* a batch axis is no head axis: attn has it too */
	static const int64_t q[] = {4, 16, 64}, attn[] = {4, 16, 64};
	layer l;
	tb_heads h;
	(void)state;

	memset(&l, 0, sizeof l);
	add(&l, "attn.q", 3, q);
	add(&l, "attn", 3, attn);
	expect(&l, "attn.q", 0, 0, 0, 0, TB_HEADS_NONE, UNKNOWN);
	tb_heads_infer(&l.r, find(&l, "attn.q"), 0, 0, &h);
	assert_null(h.source);
	expect(&l, "attn.q", 8, 0, 8, 8, TB_HEADS_LAST, "");

	packed(&l);
	expect(&l, "attn.q", 0, 0, 0, 0, TB_HEADS_NONE, UNKNOWN);

	/* no attention output to give S: an axis of the head count beside the last */
	static const int64_t q4[] = {16, 8, 8};
	memset(&l, 0, sizeof l);
	add(&l, "attn.q", 3, q4);
	expect(&l, "attn.q", 8, 0, 8, 8, TB_HEADS_INNER, "");
	expect(&l, "attn.q", 0, 0, 0, 0, TB_HEADS_NONE, UNKNOWN);
}

static void test_not_attention(void **state)
{
	layer l;
	tb_heads h;
	(void)state;

	packed(&l);
	expect(&l, "mlp", 8, 2, 0, 0, TB_HEADS_NONE, "");
	tb_heads_infer(&l.r, find(&l, "mlp"), 8, 2, &h);
	assert_int_equal(h.q, 0);
	assert_null(h.source);
	tb_heads_infer(&l.r, (long)l.r.n_cells, 8, 2, &h);
	assert_int_equal(h.n, 0);
	tb_heads_infer(&l.r, -1, 8, 2, &h);
	assert_int_equal(h.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_given_counts),     cmocka_unit_test(test_gqa_derived),
		cmocka_unit_test(test_inferred_inner),   cmocka_unit_test(test_inferred_split),
		cmocka_unit_test(test_nothing_to_infer), cmocka_unit_test(test_not_attention),
	};
	return cmocka_run_group_tests_name("heads", tests, NULL, NULL);
}
