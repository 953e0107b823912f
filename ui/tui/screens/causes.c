/*
 * The causes pane: the ranked causes of the first divergence, each with its
 * score, why (the measured facts that matched) and look_at (what to check
 * in the reference forward).
 */
#include "config.h"

#include "tui/doc.h"
#include "tui/explain.h"
#include "tui/screens/screens.h"

/* First document line shown. */
static int first_line;

static void fill(const view *v, doc *dc)
{
	explain_causes(v, dc, -1, NULL);
}

static void causes_open(view *v, long cell)
{
	(void)v;
	(void)cell;
	first_line = 0;
}

static void causes_draw(view *v, WINDOW *w)
{
	doc_screen_draw(v, w, "causes pane   (Esc/q back, Up/Down scroll)", fill, first_line);
}

static ui_ret causes_action(view *v, WINDOW *w, tb_action a)
{
	return doc_screen_action(v, w, a, fill, &first_line);
}

const screen_ops causes_screen = {
	.name = "causes",
	.hints = doc_screen_hints,
	.open = causes_open,
	.draw = causes_draw,
	.action = causes_action,
};
