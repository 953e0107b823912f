/*
 * The suggested map (M, :suggest-map): the rules tbisect suggest-map would
 * print for the names that did not pair, each with the cell it gives, its
 * confidence and evidence.  y applies them: the trees are paired again with
 * the rules added to the map (the file itself is not written).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/suggest.h"
#include "tui/doc.h"
#include "tui/reload.h"
#include "tui/screens/screens.h"
#include "tui/theme.h"

/* First document line shown, and the suggestion shown. */
static int first_line;
static tb_suggestion shown;
static bool have_shown;
static char why[TB_ERR_TEXT_MAX];

static void fill(const view *v, doc *dc)
{
	(void)v;
	if (!have_shown) {
		doc_wrap(dc, ui_attr(UI_ERROR), "  ", 2, why);
		return;
	}
	if (shown.n == 0) {
		doc_line(dc, ui_attr(UI_DIM), "  %s", shown.unpaired[0] || shown.unpaired[1]
							  ? "no rule found for the unpaired names"
							  : "every tensor has a name tbisect knows: nothing to suggest");
		return;
	}
	doc_line(dc, ui_attr(UI_HEADER), "  %zu rules; y pairs the trees again with them, Esc leaves them", shown.n);
	for (size_t i = 0; i < shown.n; i++) {
		const tb_suggested_rule *r = &shown.rules[i];
		char cell[96];
		if (r->layer_from_name)
			snprintf(cell, sizeof cell, "layer from the name, %s", r->tap);
		else if (r->layer >= 0)
			snprintf(cell, sizeof cell, "L%d.%s", r->layer, r->tap);
		else
			snprintf(cell, sizeof cell, "%s", r->tap);
		doc_line(dc, 0, "%s", "");
		doc_line(dc, ui_attr(r->confidence >= 0.5 ? UI_GOOD : UI_BAD), "  %s  ->  %s   confidence %.2f", r->match, cell,
			 r->confidence);
		doc_wrap(dc, ui_attr(UI_DIM), "    ", 4, r->evidence);
	}
}

static void suggest_open(view *v, long cell)
{
	tb_err err;
	char buf[TB_ERR_TEXT_MAX];

	(void)cell;
	first_line = 0;
	if (have_shown)
		tb_suggestion_done(&shown);
	have_shown = tb_suggest_map(&v->run.sess, &shown, &err) == 0;
	if (!have_shown)
		snprintf(why, sizeof why, "%s", tb_err_text(&err, buf, sizeof buf));
}

static void suggest_draw(view *v, WINDOW *w)
{
	doc_screen_draw(v, w, "suggested map   (y apply, Esc/q back, Up/Down scroll)", fill, first_line);
}

/* The view's map becomes its map plus the shown rules; the trees are
 * paired again with it. */
static ui_ret apply(view *v)
{
	const tb_run_config *cfg = v->cfg;
	char buf[TB_ERR_TEXT_MAX];
	tb_err err;
	char *text;

	if (!have_shown || shown.n == 0) {
		view_message(v, true, "no suggested rule to apply");
		return ui_flags(0);
	}
	text = tb_suggestion_merged(&shown, cfg->opts.map_file, cfg->map_text, cfg->map_len, &err);
	if (!text) {
		view_message(v, true, "suggest-map: %s", tb_err_text(&err, buf, sizeof buf));
		return ui_flags(0);
	}
	v->applied = *cfg;
	free(v->applied_map);
	v->applied_map = text;
	v->applied.map_text = text;
	v->applied.map_len = strlen(text);
	v->applied.opts.map_file = "the suggested map";
	v->cfg = &v->applied;
	return ui_flags(reload_start(v) | UI_HOME);
}

static ui_ret suggest_action(view *v, WINDOW *w, tb_action a)
{
	if (a == TB_ACT_CONFIRM)
		return apply(v);
	return doc_screen_action(v, w, a, fill, &first_line);
}

static const screen_hint hints[] = {{.action = TB_ACT_CONFIRM, .label = "apply the map"},
				    {.action = TB_ACT_DOWN, .label = "scroll", .keys = "Up/Down"},
				    {.action = TB_ACT_BACK, .label = "back"},
				    {.action = TB_ACT_NONE}};

const screen_ops suggest_screen = {
	.name = "suggest-map",
	.hints = hints,
	.open = suggest_open,
	.draw = suggest_draw,
	.action = suggest_action,
};
