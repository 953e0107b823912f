/*
 * grid: the heatmap's layout of a pairing: rows embed, L0 .. L{N-1},
 * final_norm, logits; columns the layer taps present (the five canonical
 * ones always, sub-taps where dumped) in forward order.  It also owns what
 * is shown (sub-taps folded, a name filter), the cursor and the scroll
 * offsets.  No drawing here: heatmap.c draws a grid.
 */
#ifndef TB_UI_GRID_H
#define TB_UI_GRID_H

#include <regex.h>
#include <stdbool.h>

#include "model/pairing.h"
#include "model/taps.h"

typedef struct grid {
	const tb_pairing *p;   /* borrowed */
	int n_layers;
	int n_rows;            /* n_layers + 3: embed, layers, final_norm, logits */
	int n_cols;
	char (*cols)[TB_TAP_LEN]; /* layer taps, forward order */
	long *at;              /* n_rows * n_cols pair indices, -1: not dumped; model rows use column 0 */
	int *row_of, *col_of;  /* per pair */
	bool folded;           /* sub-tap columns hidden */
	bool have_filter;
	regex_t filter;
	char filter_text[256];
	int *vrows, n_vrows;   /* rows shown */
	int *vcols, n_vcols;   /* columns shown */
	int cur_r, cur_c;      /* cursor, as indices into vrows / vcols */
	int top, left;         /* first shown row / column index */
} grid;

int grid_init(grid *g, const tb_pairing *p);
void grid_done(grid *g);

/* Row label: "embed", "L3", "final_norm", "logits". */
const char *grid_row_label(const grid *g, int row, char *buf, size_t size);
bool grid_row_is_model(const grid *g, int row);
bool grid_col_is_sub(const grid *g, int col);

/* Recompute the shown rows and columns after a fold or filter change,
 * keeping the cursor on the same pair when it stays visible. */
void grid_relayout(grid *g);
/* Set (or clear, with NULL or "") the filter; -1 with a message on a bad regex. */
int grid_set_filter(grid *g, const char *re, char *msg, size_t size);

/* The pair under the cursor, or -1 (a row or column with nothing dumped). */
long grid_selected(const grid *g);
/* The pair at shown row vr, shown column vc (model rows: their one pair). */
long grid_pair_at(const grid *g, int vr, int vc);
/* Move the cursor to a pair, unfolding or clearing the filter when it is
 * hidden; false when the pair index is out of range. */
bool grid_select(grid *g, long pair);
/* Move by rows/columns, clamped. */
void grid_move(grid *g, int drow, int dcol);
/* Keep the cursor inside a window of rows x cols cells. */
void grid_scroll_to_cursor(grid *g, int rows, int cols);

#endif
