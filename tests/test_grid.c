/*
 * The heatmap's layout (ui/tui/grid.c) of a pairing written here, without
 * a terminal: rows and columns in forward order with sub-taps where they
 * are dumped, folding them, the name filter, selecting a hidden cell, and
 * the cursor's moves and scrolling.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "tui/grid.h"

/* embed, L0 with the five layer taps, L1 with attn.q and mlp.up as well,
 * final_norm, logits. */
static const char *const files[] = {"embed", "layers.0.attn_norm", "layers.0.attn", "layers.0.mlp_norm",
				    "layers.0.mlp", "layers.0.block", "layers.1.attn_norm", "layers.1.attn.q",
				    "layers.1.attn", "layers.1.mlp_norm", "layers.1.mlp.up", "layers.1.mlp",
				    "layers.1.block", "final_norm", "logits"};

typedef struct fixture {
	tu_compared f;
	grid g;
} fixture;

static int setup(void **state)
{
	static fixture fx;
	const char *dir = tu_tmpdir();
	char ref[4096], cand[4096];
	int64_t sh[2] = {4, 16};
	float *x = tu_ramp(64, 1);

	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(cand, sizeof cand, "%s/cand", dir);
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		tu_put(ref, files[i], TB_DT_F32, 2, sh, x);
		tu_put(cand, files[i], TB_DT_F32, 2, sh, x);
	}
	free(x);
	tu_compare(&fx.f, ref, cand, NULL);
	if (grid_init(&fx.g, fx.f.s.pairing) < 0)
		return -1;
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	fixture *fx = *state;

	grid_done(&fx->g);
	tu_compared_done(&fx->f);
	return 0;
}

/* The pair index of a cell. */
static long pair_of(const fixture *fx, const char *name)
{
	tb_cell c;

	assert_int_equal(tb_cell_parse(name, &c), 0);
	return tb_pairing_find(fx->f.s.pairing, &c);
}

static const char *selected(const fixture *fx, char *buf, size_t size)
{
	long i = grid_selected(&fx->g);

	if (i < 0)
		snprintf(buf, size, "none");
	else
		tb_cell_name(&fx->f.s.pairing->pairs[i].cell, buf, size);
	return buf;
}

#define assert_selected(fx, want)                                          \
	do {                                                               \
		char sel_[96];                                             \
		assert_string_equal(selected((fx), sel_, sizeof sel_), (want)); \
	} while (0)

static void test_layout(void **state)
{
	static const char *const cols[] = {"attn_norm", "attn.q", "attn", "mlp_norm", "mlp.up", "mlp", "block"};
	static const char *const rows[] = {"embed", "L0", "L1", "final_norm", "logits"};
	fixture *fx = *state;
	grid *g = &fx->g;
	char label[32];

	assert_int_equal(g->n_layers, 2);
	assert_int_equal(g->n_rows, 5);
	assert_int_equal(g->n_cols, 7);
	for (int c = 0; c < g->n_cols; c++) {
		assert_string_equal(g->cols[c], cols[c]);
		assert_int_equal(grid_col_is_sub(g, c), strchr(cols[c], '.') != NULL);
	}
	for (int r = 0; r < g->n_rows; r++) {
		assert_string_equal(grid_row_label(g, r, label, sizeof label), rows[r]);
		assert_int_equal(grid_row_is_model(g, r), r == 0 || r > 2);
	}
	/* Every pair sits where its row and column say, once. */
	for (size_t i = 0; i < fx->f.s.pairing->n_pairs; i++)
		assert_int_equal(g->at[g->row_of[i] * g->n_cols + g->col_of[i]], (long)i);
	assert_int_equal(g->at[1 * g->n_cols + 1], -1); /* L0 has no attn.q */
	assert_int_equal(g->n_vrows, 5);
	assert_int_equal(g->n_vcols, 7);
	assert_selected(fx, "embed");
	/* A model row holds one pair, whatever the column. */
	assert_int_equal(grid_pair_at(g, 3, 5), pair_of(fx, "final_norm"));
	assert_int_equal(grid_pair_at(g, 1, 1), -1);
	assert_int_equal(grid_pair_at(g, 2, 4), pair_of(fx, "L1.mlp.up"));
	assert_int_equal(grid_pair_at(g, 5, 0), -1);
	assert_int_equal(grid_pair_at(g, 1, 7), -1);
}

static void test_fold(void **state)
{
	fixture *fx = *state;
	grid *g = &fx->g;

	assert_true(grid_select(g, pair_of(fx, "L1.attn.q")));
	assert_selected(fx, "L1.attn.q");
	g->folded = true;
	grid_relayout(g);
	assert_int_equal(g->n_vcols, 5);
	for (int vc = 0; vc < g->n_vcols; vc++)
		assert_false(grid_col_is_sub(g, g->vcols[vc]));
	/* The folded-away sub-tap hands the cursor to its parent. */
	assert_selected(fx, "L1.attn");
	g->folded = false;
	grid_relayout(g);
	assert_int_equal(g->n_vcols, 7);
	assert_selected(fx, "L1.attn");
	/* Selecting a folded-away sub-tap unfolds. */
	g->folded = true;
	grid_relayout(g);
	assert_true(grid_select(g, pair_of(fx, "L1.mlp.up")));
	assert_false(g->folded);
	assert_selected(fx, "L1.mlp.up");
	/* mlp.up's column folds away to mlp, not to the column now at its place (block). */
	g->folded = true;
	grid_relayout(g);
	assert_selected(fx, "L1.mlp");
}

static void test_filter(void **state)
{
	fixture *fx = *state;
	grid *g = &fx->g;
	char msg[256] = "";

	assert_true(grid_select(g, pair_of(fx, "L1.mlp")));
	assert_int_equal(grid_set_filter(g, "mlp", msg, sizeof msg), 0);
	assert_string_equal(g->filter_text, "mlp");
	assert_int_equal(g->n_vrows, 2);
	assert_int_equal(g->n_vcols, 3);
	assert_string_equal(g->cols[g->vcols[0]], "mlp_norm");
	assert_string_equal(g->cols[g->vcols[1]], "mlp.up");
	assert_string_equal(g->cols[g->vcols[2]], "mlp");
	assert_selected(fx, "L1.mlp");
	/* Only L1's cells are named L1.* */
	assert_int_equal(grid_set_filter(g, "^L1\\.", msg, sizeof msg), 0);
	assert_int_equal(g->n_vrows, 1);
	assert_int_equal(g->vrows[0], 2);
	assert_int_equal(g->n_vcols, 7);
	assert_selected(fx, "L1.mlp");
	/* Raw tensor names match too. */
	assert_int_equal(grid_set_filter(g, "^layers\\.0\\.", msg, sizeof msg), 0);
	assert_int_equal(g->n_vrows, 1);
	assert_int_equal(g->vrows[0], 1);
	assert_int_equal(g->n_vcols, 5);
	/* A model row alone: no column, the row still has its pair. */
	assert_int_equal(grid_set_filter(g, "final", msg, sizeof msg), 0);
	assert_int_equal(g->n_vrows, 1);
	assert_int_equal(g->n_vcols, 0);
	assert_selected(fx, "final_norm");
	/* A bad pattern changes nothing. */
	assert_int_equal(grid_set_filter(g, "(", msg, sizeof msg), -1);
	if (strncmp(msg, "filter: bad regular expression '(': ", 36))
		fail_msg("message: %s", msg);
	assert_string_equal(g->filter_text, "final");
	assert_int_equal(g->n_vrows, 1);
	/* Selecting a hidden cell clears the filter. */
	assert_true(grid_select(g, pair_of(fx, "L0.attn")));
	assert_false(g->have_filter);
	assert_string_equal(g->filter_text, "");
	assert_int_equal(g->n_vrows, 5);
	assert_int_equal(g->n_vcols, 7);
	assert_selected(fx, "L0.attn");
	assert_int_equal(grid_set_filter(g, "mlp", msg, sizeof msg), 0);
	assert_int_equal(grid_set_filter(g, NULL, msg, sizeof msg), 0);
	assert_int_equal(g->n_vrows, 5);
	assert_false(grid_select(g, -1));
	assert_false(grid_select(g, (long)fx->f.s.pairing->n_pairs));
}

/* Scrolled for a window of rows x cols cells, the first shown cell is (top, left). */
static void expect_scroll(grid *g, int rows, int cols, int top, int left)
{
	grid_scroll_to_cursor(g, rows, cols);
	assert_int_equal(g->top, top);
	assert_int_equal(g->left, left);
}

static void test_move_and_scroll(void **state)
{
	fixture *fx = *state;
	grid *g = &fx->g;

	assert_true(grid_select(g, pair_of(fx, "L0.mlp")));
	grid_move(g, -10, -10);
	assert_int_equal(g->cur_r, 0);
	assert_int_equal(g->cur_c, 0);
	grid_move(g, 2, 1);
	assert_selected(fx, "L1.attn.q");
	grid_move(g, 10, 10);
	assert_int_equal(g->cur_r, g->n_vrows - 1);
	assert_int_equal(g->cur_c, g->n_vcols - 1);
	assert_selected(fx, "logits");
	/* On a model-level row the first column, which holds its one cell, is
	 * shown: it is never drawn under another tap. */
	expect_scroll(g, 2, 3, 3, 0);
	grid_move(g, -2, 0);
	assert_selected(fx, "L1.block");
	expect_scroll(g, 2, 3, 2, 4);
	/* A taller window shows the last rows, not past them. */
	expect_scroll(g, 4, 3, 1, 4);
	grid_move(g, -10, -10);
	expect_scroll(g, 2, 3, 0, 0);
	/* A window larger than the grid never scrolls. */
	grid_move(g, 10, 10);
	expect_scroll(g, 50, 50, 0, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_layout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fold, setup, teardown),
		cmocka_unit_test_setup_teardown(test_filter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_move_and_scroll, setup, teardown),
	};
	return cmocka_run_group_tests_name("grid", tests, NULL, NULL);
}
