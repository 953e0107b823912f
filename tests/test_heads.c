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

/* Add cell tap of the given shape to a zeroed layer (cells must come in
 * forward order). */
static void add(layer *l, const char *tap, int ndim, const int64_t *shape)
{
	size_t i = l->r.n_cells++;
	tb_err err;

	assert_true(i < MAX_CELLS);
	assert_int_equal(tb_tensor_set_shape(&l->t[i], ndim, shape, "test", &err), 0);
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

/* The layers the cases run on; S = 16, 8 query heads of 8 channels, 2 kv heads. */
typedef enum fixture {
	PACKED,  /* [S, heads * dim], with mlp */
	NO_K,    /* packed attn.q, attn.v, attn: no attn.k */
	INNER,   /* [B, S, H, D] */
	SPLIT,   /* [B, H, S, D] */
	BATCH,   /* packed with a batch of 4: attn has the batch axis too */
	NO_ATTN, /* [S, H, D] attn.q alone: nothing gives S */
} fixture;

static const char *const fixture_names[] = {"packed", "no attn.k", "[B, S, H, D]", "[B, H, S, D]", "batch 4",
					    "no attn"};

static void build(layer *l, fixture f)
{
	static const int64_t q[] = {1, 16, 64}, kv[] = {1, 16, 16}, attn[] = {1, 16, 64}, mlp[] = {1, 16, 128};
	static const int64_t q2[] = {16, 64}, attn2[] = {16, 64};
	static const int64_t qi[] = {1, 16, 8, 8}, ki[] = {1, 16, 2, 8}, qs[] = {1, 8, 16, 8}, ks[] = {1, 2, 16, 8};
	static const int64_t qb[] = {4, 16, 64}, attnb[] = {4, 16, 64}, q3[] = {16, 8, 8};

	memset(l, 0, sizeof *l);
	switch (f) {
	case PACKED:
		add(l, "attn.q", 3, q);
		add(l, "attn.k", 3, kv);
		add(l, "attn.v", 3, kv);
		add(l, "attn", 3, attn);
		add(l, "mlp", 3, mlp);
		break;
	case NO_K:
		add(l, "attn.q", 2, q2);
		add(l, "attn.v", 2, q2);
		add(l, "attn", 2, attn2);
		break;
	case INNER:
	case SPLIT:
		add(l, "attn.q", 4, f == INNER ? qi : qs);
		add(l, "attn.k", 4, f == INNER ? ki : ks);
		add(l, "attn.v", 4, f == INNER ? ki : ks);
		add(l, "attn", 3, attn);
		break;
	case BATCH:
		add(l, "attn.q", 3, qb);
		add(l, "attn", 3, attnb);
		break;
	case NO_ATTN:
		add(l, "attn.q", 3, q3);
		break;
	}
}

#define UNKNOWN "head count unknown: give --heads N (and --kv-heads N for GQA), or :heads N in the interactive view"
#define MIXED "no heads after o_proj, which mixes them; dump attn.q/attn.k/attn.v or attn.core (o_proj's input) for per-head numbers"

/* A cell of a fixture, the counts given, the heads it gets. */
static const struct head_case {
	fixture f;
	const char *tap;
	int given_q, given_kv;
	int n;
	int64_t head_dim;
	tb_head_layout layout;
	const char *note;
} cases[] = {
	/* counts given */
	{PACKED, "attn.q", 8, 2, 8, 8, TB_HEADS_LAST, ""},
	{PACKED, "attn.k", 8, 2, 2, 8, TB_HEADS_LAST, ""},
	{PACKED, "attn.v", 8, 2, 2, 8, TB_HEADS_LAST, ""},
	/* o_proj has mixed the heads in the attention output: none there, whatever is given */
	{PACKED, "attn", 8, 2, 0, 0, TB_HEADS_NONE, MIXED},
	/* counts that do not fit the widths are no heads, whatever else would */
	{PACKED, "attn.q", 7, 0, 0, 0, TB_HEADS_NONE, "the shape does not split into 7 heads"},
	{PACKED, "attn.k", 8, 3, 0, 0, TB_HEADS_NONE, "the shape does not split into 3 heads"},
	/* GQA: kv from q and the widths (8 * 16 / 64), q from kv (2 * 64 / 16) */
	{PACKED, "attn.k", 8, 0, 2, 8, TB_HEADS_LAST, ""},
	{PACKED, "attn.v", 8, 0, 2, 8, TB_HEADS_LAST, ""},
	{PACKED, "attn.q", 0, 2, 8, 8, TB_HEADS_LAST, ""},
	/* no attn.k to tell: taken for no GQA; with only --kv-heads the query heads stay unknown */
	{NO_K, "attn.v", 4, 0, 4, 16, TB_HEADS_LAST, ""},
	{NO_K, "attn.q", 0, 4, 0, 0, TB_HEADS_NONE, UNKNOWN},
	/* head axes: inferred, with head_dim a multiple of the head count */
	{INNER, "attn.q", 0, 0, 8, 8, TB_HEADS_INNER, ""},
	{INNER, "attn.k", 0, 0, 2, 8, TB_HEADS_INNER, ""},
	{INNER, "attn.v", 0, 0, 2, 8, TB_HEADS_INNER, ""},
	{INNER, "attn", 0, 0, 0, 0, TB_HEADS_NONE, MIXED},
	{SPLIT, "attn.q", 0, 0, 8, 8, TB_HEADS_SPLIT, ""},
	{SPLIT, "attn.k", 0, 0, 2, 8, TB_HEADS_SPLIT, ""},
	/* given counts derive kv from the head axes' widths too */
	{INNER, "attn.k", 8, 0, 2, 8, TB_HEADS_INNER, ""},
	/* a count that is not the head axis does not split it, though the last axis would */
	{INNER, "attn.q", 4, 0, 0, 0, TB_HEADS_NONE, "the shape does not split into 4 heads"},
	/* no counts, no head axis */
	{PACKED, "attn.q", 0, 0, 0, 0, TB_HEADS_NONE, UNKNOWN},
	{BATCH, "attn.q", 0, 0, 0, 0, TB_HEADS_NONE, UNKNOWN},
	{BATCH, "attn.q", 8, 0, 8, 8, TB_HEADS_LAST, ""},
	/* nothing gives S: nothing inferred, but an axis of the given count beside the last is the heads' */
	{NO_ATTN, "attn.q", 0, 0, 0, 0, TB_HEADS_NONE, UNKNOWN},
	{NO_ATTN, "attn.q", 8, 0, 8, 8, TB_HEADS_INNER, ""},
	/* not an attention tap: no heads, and nothing to say */
	{PACKED, "mlp", 8, 2, 0, 0, TB_HEADS_NONE, ""},
};

static void test_cases(void **state)
{
	layer l;
	(void)state;

	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const struct head_case *c = &cases[i];
		tb_heads h;
		build(&l, c->f);
		tb_heads_infer(&l.r, find(&l, c->tap), c->given_q, c->given_kv, &h);
		if (h.n != c->n || h.head_dim != c->head_dim || h.layout != c->layout || strcmp(h.note, c->note) != 0)
			fail_msg("%s %s with --heads %d --kv-heads %d: %d heads of %lld (layout %d, \"%s\"), expected %d of "
				 "%lld (%d, \"%s\")",
				 fixture_names[c->f], c->tap, c->given_q, c->given_kv, h.n, (long long)h.head_dim,
				 (int)h.layout, h.note, c->n, (long long)c->head_dim, (int)c->layout, c->note);
	}
}

/* The head counts of a cell's layer and where they came from (NULL: nowhere). */
static void expect_counts(fixture f, const char *tap, int given_q, int given_kv, int q, int kv, const char *source)
{
	layer l;
	tb_heads h;

	build(&l, f);
	tb_heads_infer(&l.r, find(&l, tap), given_q, given_kv, &h);
	assert_int_equal(h.q, q);
	assert_int_equal(h.kv, kv);
	if (source)
		assert_string_equal(h.source ? h.source : "(null)", source);
	else
		assert_null(h.source);
}

static void test_counts_and_source(void **state)
{
	(void)state;

	expect_counts(PACKED, "attn.k", 8, 2, 8, 2, "--heads");
	expect_counts(PACKED, "attn.q", 0, 2, 8, 2, "--kv-heads");
	expect_counts(INNER, "attn.q", 0, 0, 8, 2, "inferred from attn.q/attn.k shapes");
	expect_counts(BATCH, "attn.q", 0, 0, 0, 0, NULL);
	/* the attention output has no heads of its own, but its layer's counts are known */
	expect_counts(INNER, "attn", 0, 0, 8, 2, "inferred from attn.q/attn.k shapes");
	expect_counts(PACKED, "mlp", 8, 2, 0, 0, NULL);
}

static void test_cell_out_of_range(void **state)
{
	layer l;
	tb_heads h;
	(void)state;

	build(&l, PACKED);
	tb_heads_infer(&l.r, (long)l.r.n_cells, 8, 2, &h);
	assert_int_equal(h.n, 0);
	tb_heads_infer(&l.r, -1, 8, 2, &h);
	assert_int_equal(h.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_counts_and_source),
		cmocka_unit_test(test_cell_out_of_range),
	};
	return cmocka_run_group_tests_name("heads", tests, NULL, NULL);
}
