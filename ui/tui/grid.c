#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pattern.h"
#include "tui/grid.h"

/* Columns every heatmap has, dumped or not. */
static const char *const base_cols[] = {"attn_norm", "attn", "mlp_norm", "mlp", "block"};

static int col_index(const grid *g, const char *tap)
{
	for (int c = 0; c < g->n_cols; c++)
		if (!strcmp(g->cols[c], tap))
			return c;
	return -1;
}

static int tap_cmp(const void *a, const void *b)
{
	tb_cell x, y;

	tb_cell_make(&x, 0, a);
	tb_cell_make(&y, 0, b);
	return tb_cell_cmp(&x, &y);
}

static int row_of_cell(const grid *g, const tb_cell *c)
{
	if (c->layer >= 0)
		return c->layer + 1;
	if (c->id == TB_TAP_EMBED)
		return 0;
	return c->id == TB_TAP_FINAL_NORM ? g->n_layers + 1 : g->n_layers + 2;
}

int grid_init(grid *g, const tb_pairing *p)
{
	size_t max_cols = sizeof base_cols / sizeof base_cols[0] + p->n_pairs;

	memset(g, 0, sizeof *g);
	g->p = p;
	g->n_layers = p->n_layers;
	g->n_rows = p->n_layers + 3;
	g->cols = calloc(max_cols, sizeof *g->cols);
	g->row_of = calloc(p->n_pairs + 1, sizeof *g->row_of);
	g->col_of = calloc(p->n_pairs + 1, sizeof *g->col_of);
	g->vrows = calloc((size_t)g->n_rows, sizeof *g->vrows);
	if (!g->cols || !g->row_of || !g->col_of || !g->vrows)
		return -1;
	for (size_t i = 0; i < sizeof base_cols / sizeof base_cols[0]; i++)
		snprintf(g->cols[g->n_cols++], TB_TAP_LEN, "%s", base_cols[i]);
	for (size_t i = 0; i < p->n_pairs; i++) {
		const tb_cell *c = &p->pairs[i].cell;
		if (c->layer >= 0 && col_index(g, c->tap) < 0)
			snprintf(g->cols[g->n_cols++], TB_TAP_LEN, "%s", c->tap);
	}
	qsort(g->cols, (size_t)g->n_cols, sizeof *g->cols, tap_cmp);
	g->at = malloc((size_t)g->n_rows * (size_t)g->n_cols * sizeof *g->at);
	g->vcols = calloc((size_t)g->n_cols, sizeof *g->vcols);
	if (!g->at || !g->vcols)
		return -1;
	for (int i = 0; i < g->n_rows * g->n_cols; i++)
		g->at[i] = -1;
	for (size_t i = 0; i < p->n_pairs; i++) {
		const tb_cell *c = &p->pairs[i].cell;
		int r = row_of_cell(g, c), col = c->layer >= 0 ? col_index(g, c->tap) : 0;
		g->at[r * g->n_cols + col] = (long)i;
		g->row_of[i] = r;
		g->col_of[i] = col;
	}
	grid_relayout(g);
	return 0;
}

void grid_done(grid *g)
{
	if (g->have_filter)
		regfree(&g->filter);
	free(g->cols);
	free(g->at);
	free(g->row_of);
	free(g->col_of);
	free(g->vrows);
	free(g->vcols);
	memset(g, 0, sizeof *g);
}

const char *grid_row_label(const grid *g, int row, char *buf, size_t size)
{
	if (row == 0)
		snprintf(buf, size, "embed");
	else if (row == g->n_layers + 1)
		snprintf(buf, size, "final_norm");
	else if (row == g->n_layers + 2)
		snprintf(buf, size, "logits");
	else
		snprintf(buf, size, "L%d", row - 1);
	return buf;
}

bool grid_row_is_model(const grid *g, int row)
{
	return row == 0 || row > g->n_layers;
}

bool grid_col_is_sub(const grid *g, int col)
{
	return tb_tap_parent(g->cols[col]) != NULL;
}

static bool pair_matches(const grid *g, long i)
{
	const tb_pair *p = &g->p->pairs[i];
	char name[128];

	if (!g->have_filter)
		return true;
	tb_cell_name(&p->cell, name, sizeof name);
	return !regexec(&g->filter, name, 0, NULL, 0) ||
	       (p->ref && !regexec(&g->filter, p->ref->name, 0, NULL, 0)) ||
	       (p->cand && !regexec(&g->filter, p->cand->name, 0, NULL, 0));
}

static bool col_shown(const grid *g, int col)
{
	if (g->folded && grid_col_is_sub(g, col))
		return false;
	if (!g->have_filter)
		return true;
	for (int r = 0; r < g->n_rows; r++) {
		long i = g->at[r * g->n_cols + col];
		if (!grid_row_is_model(g, r) && i >= 0 && pair_matches(g, i))
			return true;
	}
	return false;
}

static bool row_shown(const grid *g, int row)
{
	if (!g->have_filter)
		return true;
	if (grid_row_is_model(g, row)) {
		long i = g->at[row * g->n_cols];
		return i >= 0 && pair_matches(g, i);
	}
	for (int vc = 0; vc < g->n_vcols; vc++) {
		long i = g->at[row * g->n_cols + g->vcols[vc]];
		if (i >= 0 && pair_matches(g, i))
			return true;
	}
	return false;
}

static bool find_shown(const grid *g, long pair, int *vr, int *vc)
{
	int r = g->row_of[pair], c = g->col_of[pair];

	*vr = *vc = -1;
	for (int i = 0; i < g->n_vrows; i++)
		if (g->vrows[i] == r)
			*vr = i;
	if (grid_row_is_model(g, r))
		*vc = g->cur_c;
	for (int i = 0; i < g->n_vcols && *vc < 0; i++)
		if (g->vcols[i] == c)
			*vc = i;
	return *vr >= 0 && *vc >= 0;
}

void grid_relayout(grid *g)
{
	long sel = grid_selected(g);
	int vr, vc;

	g->n_vcols = 0;
	for (int c = 0; c < g->n_cols; c++)
		if (col_shown(g, c))
			g->vcols[g->n_vcols++] = c;
	g->n_vrows = 0;
	for (int r = 0; r < g->n_rows; r++)
		if (row_shown(g, r))
			g->vrows[g->n_vrows++] = r;
	if (g->cur_c >= g->n_vcols)
		g->cur_c = g->n_vcols > 0 ? g->n_vcols - 1 : 0;
	/* A folded-away sub-tap hands the cursor to its parent tap. */
	if (sel >= 0 && !find_shown(g, sel, &vr, &vc) && grid_col_is_sub(g, g->col_of[sel])) {
		int pc = col_index(g, tb_tap_parent(g->cols[g->col_of[sel]]));
		if (pc >= 0)
			sel = g->at[g->row_of[sel] * g->n_cols + pc];
	}
	if (sel >= 0 && find_shown(g, sel, &vr, &vc)) {
		g->cur_r = vr;
		g->cur_c = vc;
	}
	if (g->cur_r >= g->n_vrows)
		g->cur_r = g->n_vrows > 0 ? g->n_vrows - 1 : 0;
	g->top = g->left = 0;
}

int grid_set_filter(grid *g, const char *re, char *msg, size_t size)
{
	regex_t nre;

	if (re && *re) {
		char why[160];
		if (tb_pattern_compile(&nre, re, REG_NOSUB, why, sizeof why) < 0) {
			snprintf(msg, size, "filter: bad regular expression '%s': %s", re, why);
			return -1;
		}
	}
	if (g->have_filter)
		regfree(&g->filter);
	g->have_filter = re && *re;
	if (g->have_filter) {
		g->filter = nre;
		snprintf(g->filter_text, sizeof g->filter_text, "%s", re);
	} else {
		g->filter_text[0] = '\0';
	}
	grid_relayout(g);
	return 0;
}

long grid_pair_at(const grid *g, int vr, int vc)
{
	int row;

	if (vr < 0 || vr >= g->n_vrows)
		return -1;
	row = g->vrows[vr];
	if (grid_row_is_model(g, row))
		return g->at[row * g->n_cols];
	if (vc < 0 || vc >= g->n_vcols)
		return -1;
	return g->at[row * g->n_cols + g->vcols[vc]];
}

long grid_selected(const grid *g)
{
	return grid_pair_at(g, g->cur_r, g->cur_c);
}

bool grid_select(grid *g, long pair)
{
	int vr, vc;

	if (pair < 0 || (size_t)pair >= g->p->n_pairs)
		return false;
	if (g->folded && grid_col_is_sub(g, g->col_of[pair])) {
		g->folded = false;
		grid_relayout(g);
	}
	if (!find_shown(g, pair, &vr, &vc)) {
		char none[1];
		grid_set_filter(g, NULL, none, sizeof none);
		find_shown(g, pair, &vr, &vc);
	}
	g->cur_r = vr;
	g->cur_c = vc;
	return true;
}

void grid_move(grid *g, int drow, int dcol)
{
	int r = g->cur_r + drow, c = g->cur_c + dcol;

	g->cur_r = r < 0 ? 0 : r >= g->n_vrows ? (g->n_vrows ? g->n_vrows - 1 : 0) : r;
	g->cur_c = c < 0 ? 0 : c >= g->n_vcols ? (g->n_vcols ? g->n_vcols - 1 : 0) : c;
}

void grid_scroll_to_cursor(grid *g, int rows, int cols)
{
	if (rows < 1)
		rows = 1;
	if (cols < 1)
		cols = 1;
	if (g->cur_r < g->top)
		g->top = g->cur_r;
	if (g->cur_r >= g->top + rows)
		g->top = g->cur_r - rows + 1;
	if (g->top > 0 && g->top > g->n_vrows - rows)
		g->top = g->n_vrows - rows > 0 ? g->n_vrows - rows : 0;
	/* A model-level row's one cell is in the first column: shown when the
	 * cursor is on it, so that it is never drawn under another tap. */
	int c = g->n_vrows && grid_row_is_model(g, g->vrows[g->cur_r]) ? 0 : g->cur_c;
	if (c < g->left)
		g->left = c;
	if (c >= g->left + cols)
		g->left = c - cols + 1;
	if (g->left > 0 && g->left > g->n_vcols - cols)
		g->left = g->n_vcols - cols > 0 ? g->n_vcols - cols : 0;
}
