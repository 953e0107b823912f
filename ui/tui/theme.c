#include "config.h"

#include <stdlib.h>

#include "compare/compare.h"
#include "tui/theme.h"

typedef struct theme_entry {
	short fg, bg;   /* -1: terminal default */
	attr_t color;   /* added to the pair in color modes */
	attr_t mono;    /* the whole look without color */
} theme_entry;

static const theme_entry theme[UI_N] = {
	[UI_TITLE] = {COLOR_CYAN, -1, A_BOLD, A_BOLD},
	[UI_HEADER] = {-1, -1, 0, 0},
	[UI_LABEL] = {COLOR_CYAN, -1, 0, 0},
	[UI_LABEL_SEL] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD | A_UNDERLINE},
	[UI_CURSOR] = {-1, -1, A_REVERSE | A_BOLD, A_REVERSE},
	[UI_GOOD] = {COLOR_GREEN, -1, A_BOLD, 0},
	[UI_CLOSE] = {COLOR_YELLOW, -1, A_BOLD, 0},
	[UI_BAD] = {COLOR_RED, -1, A_BOLD, A_BOLD},
	[UI_MISSING] = {COLOR_WHITE, COLOR_BLUE, 0, A_DIM},
	[UI_PENDING] = {-1, -1, A_DIM, A_DIM},
	[UI_STATUS] = {-1, -1, 0, 0},
	[UI_PROGRESS] = {COLOR_BLACK, COLOR_CYAN, 0, A_REVERSE},
	[UI_ERROR] = {COLOR_RED, -1, A_BOLD, A_BOLD},
	[UI_MARK] = {COLOR_MAGENTA, -1, A_BOLD, A_BOLD},
	[UI_DIM] = {-1, -1, A_DIM, A_DIM},
	[UI_CHANGED] = {-1, -1, A_UNDERLINE | A_BOLD, A_UNDERLINE},
};

/* Background of the heatmap gradient on 256 colors, best to worst. */
static const short gradient[] = {28, 34, 70, 112, 148, 184, 214, 208, 202, 196};
#define N_GRAD ((int)(sizeof gradient / sizeof gradient[0]))
/* Pair numbers: theme elements first, then the gradient, then 8-color statuses. */
#define PAIR_GRAD (UI_N + 1)
#define PAIR_STATUS (PAIR_GRAD + N_GRAD)

/* The mode chosen at start-up. */
static ui_color_mode mode = UI_MONO;

void ui_theme_init(void)
{
	const char *nc = getenv("NO_COLOR");

	mode = UI_MONO;
	if ((nc && *nc) || !has_colors() || start_color() == ERR)
		return;
	use_default_colors();
	mode = COLORS >= 256 && COLOR_PAIRS > PAIR_STATUS + 4 ? UI_COLOR256 : UI_COLOR8;
	for (int e = 0; e < UI_N; e++)
		init_pair((short)(e + 1), theme[e].fg, theme[e].bg);
	if (mode == UI_COLOR256)
		for (int i = 0; i < N_GRAD; i++)
			init_pair((short)(PAIR_GRAD + i), 16, gradient[i]);
	init_pair(PAIR_STATUS + 0, COLOR_BLACK, COLOR_GREEN);
	init_pair(PAIR_STATUS + 1, COLOR_BLACK, COLOR_YELLOW);
	init_pair(PAIR_STATUS + 2, COLOR_WHITE, COLOR_RED);
}

ui_color_mode ui_theme_mode(void)
{
	return mode;
}

const char *ui_theme_mode_name(void)
{
	return mode == UI_COLOR256 ? "256 colors" : mode == UI_COLOR8 ? "8 colors" : "mono";
}

attr_t ui_attr(ui_elem e)
{
	if (mode == UI_MONO)
		return theme[e].mono;
	return COLOR_PAIR(e + 1) | theme[e].color;
}

attr_t ui_attr_only(ui_elem e)
{
	return mode == UI_MONO ? theme[e].mono : theme[e].color;
}

attr_t ui_cursor(attr_t a)
{
	return (a & ~A_COLOR) | ui_attr(UI_CURSOR);
}

attr_t ui_cell_attr(int status, double level)
{
	switch (status) {
	case TB_ST_MISSING: return ui_attr(UI_MISSING);
	case TB_ST_PENDING: return ui_attr(UI_PENDING);
	default: break;
	}
	if (mode == UI_MONO)
		return status == TB_ST_DIVERGED ? A_BOLD : 0;
	if (mode == UI_COLOR8)
		return COLOR_PAIR(PAIR_STATUS + (status == TB_ST_MATCH ? 0 : status == TB_ST_CLOSE ? 1 : 2));
	int i = (int)(level * (N_GRAD - 1) + 0.5);
	return COLOR_PAIR(PAIR_GRAD + (i < 0 ? 0 : i >= N_GRAD ? N_GRAD - 1 : i));
}
