/*
 * theme: the colors of the interactive view as one table, each element with
 * its color pair for 8- and 256-color terminals and a monochrome attribute,
 * plus the 256-color green-to-red gradient of the heatmap.  With NO_COLOR
 * set, or on a terminal without colors, only the mono column is used; cells
 * always carry a glyph too, so nothing depends on color alone.
 */
#ifndef TB_UI_THEME_H
#define TB_UI_THEME_H

#include <curses.h>
#include <stdbool.h>

typedef enum ui_elem {
	UI_TITLE,    /* program name, section titles */
	UI_HEADER,   /* header lines */
	UI_LABEL,    /* row and column labels */
	UI_LABEL_SEL, /* the labels of the selected row and column */
	UI_CURSOR,   /* the selected cell, position, line */
	UI_GOOD,     /* verdict match, match glyphs */
	UI_CLOSE,    /* verdict close */
	UI_BAD,      /* verdict diverged, first divergence */
	UI_MISSING,  /* a cell on one side only */
	UI_PENDING,  /* not compared yet */
	UI_STATUS,   /* the selected cell's status lines */
	UI_PROGRESS, /* the progress bar */
	UI_ERROR,    /* error messages */
	UI_MARK,     /* markers: first bad position, thresholds */
	UI_DIM,      /* secondary text */
	UI_CHANGED,  /* a cell whose status changed in the last pass (added to the cell's own look) */
	UI_N
} ui_elem;

typedef enum ui_color_mode { UI_MONO, UI_COLOR8, UI_COLOR256 } ui_color_mode;

/* After initscr: pick the mode (NO_COLOR, has_colors, COLORS) and set pairs. */
void ui_theme_init(void);
ui_color_mode ui_theme_mode(void);
const char *ui_theme_mode_name(void);
attr_t ui_attr(ui_elem e);
/* The element's attributes without its color pair, to add to another
 * element's look (a pair cannot be added to a pair). */
attr_t ui_attr_only(ui_elem e);
/* The cursor's look on a thing drawn with look a: a's color pair goes (two
 * pairs OR'd together are a third pair, unset: black on black on 8
 * colors), its other attributes stay. */
attr_t ui_cursor(attr_t a);
/* A heatmap cell of a status (tb_status) whose metric sits at level 0..1 of
 * its log scale. */
attr_t ui_cell_attr(int status, double level);

#endif
