/*
 * The causes pane: the ranked causes of the first divergence, each with its
 * score, why (the measured facts that matched) and look_at (what to check
 * in the reference forward).  Until diagnosis rules are loaded it says so;
 * it never invents causes.
 */
#include "config.h"

#include <stdio.h>

#include "tui/doc.h"
#include "tui/theme.h"
#include "tui/tui.h"

void causes_lines(tui *t, doc *dc, long cell)
{
	long first = tui_first_divergence(t), which = cell >= 0 ? cell : first;
	const tb_causes *cs = which == first || !t->have_diag ? &t->diag.causes : &t->d.causes;
	char name[128];

	tui_cell_label(t, which, name, sizeof name);
	if (which == first)
		doc_line(dc, ui_attr(UI_TITLE), "causes  (of the first divergence: %s)", name);
	else
		doc_line(dc, ui_attr(UI_TITLE), "causes  (of %s)", name);
	if (t->job) {
		doc_line(dc, ui_attr(UI_DIM), "  the comparison is still running");
		return;
	}
	if (t->have_diag) {
		for (size_t i = 0; i < t->diag.sanity.n_warnings; i++)
			doc_wrap(dc, ui_attr(UI_BAD), "  warning: ", 4, t->diag.sanity.warnings[i].text);
		if (t->diag.origin.text[0])
			doc_wrap(dc, ui_attr(UI_HEADER), "  origin: ", 4, t->diag.origin.text);
	}
	if (which < 0 && tui_result(t) && tui_result(t)->verdict == TB_ST_MATCH) {
		doc_line(dc, ui_attr(UI_DIM), "  none: no cell diverged");
		return;
	}
	if (!t->rules || !t->have_diag) {
		doc_line(dc, ui_attr(UI_DIM), "  no diagnosis rules loaded: causes are not ranked");
		return;
	}
	if (cs->n == 0) {
		doc_line(dc, ui_attr(UI_DIM), "  no rule matched the measured facts");
		return;
	}
	for (size_t i = 0; i < cs->n; i++) {
		const tb_cause *c = &cs->v[i];
		doc_line(dc, ui_attr(i == 0 ? UI_BAD : UI_HEADER), "  %zu. %s  score %.2f", i + 1, c->id, c->score);
		doc_line(dc, ui_attr(UI_LABEL), "     why:");
		doc_wrap(dc, 0, "", 8, c->why);
		doc_line(dc, ui_attr(UI_LABEL), "     look at:");
		doc_wrap(dc, 0, "", 8, c->look_at);
	}
}

static void first_causes_lines(tui *t, doc *dc)
{
	causes_lines(t, dc, -1);
}

static void causes_draw(tui *t, WINDOW *w)
{
	doc_screen_draw(t, w, "causes pane   (Esc/q back, Up/Down scroll)", first_causes_lines, t->causes_scroll);
}

static unsigned causes_action(tui *t, tb_action a)
{
	return doc_screen_action(t, a, first_causes_lines, &t->causes_scroll);
}

const screen_ops causes_screen = {
	.name = "causes",
	.draw = causes_draw,
	.action = causes_action,
};
