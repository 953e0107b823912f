/*
 * The history screen (H, :history): the passes recorded for this pair,
 * newest first, each with its time, verdict, first divergence, movement,
 * top cause and the note that says how the first divergence moved (with
 * the advice for a regression or a fix that did not take).
 */
#include "config.h"

#include <stdio.h>
#include <time.h>

#include "tui/doc.h"
#include "tui/screens/screens.h"
#include "tui/theme.h"

/* First document line shown. */
static int first_line;

static void fill(const view *v, doc *dc)
{
	const tb_history *h = &v->hist;

	if (h->path[0])
		doc_wrap(dc, ui_attr(UI_DIM), "  file ", 7, h->path);
	else if (v->no_history)
		doc_line(dc, ui_attr(UI_DIM), "  not kept (--no-history): the passes of this session only");
	else
		doc_line(dc, ui_attr(UI_DIM), "  not kept on disk: the passes of this session only");
	if (h->warning[0])
		doc_wrap(dc, ui_attr(UI_ERROR), "  warning: ", 4, h->warning);
	if (!h->n) {
		doc_line(dc, ui_attr(UI_DIM), "  no pass yet: the first comparison is still running");
		return;
	}
	doc_line(dc, 0, "%s", "");
	doc_line(dc, ui_attr(UI_LABEL), "  %4s %-16s %-8s %-16s %-11s %s", "pass", "time", "verdict",
		 "first divergence", "movement", "top cause");
	for (size_t k = h->n; k-- > 0;) {
		const tb_pass *p = &h->passes[k];
		bool bad = tb_move_is_bad(p->move);
		char when[32] = "?", move[32];
		struct tm tm;
		if (localtime_r(&p->when, &tm))
			strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
		if (p->move == TB_MOVE_LATER || p->move == TB_MOVE_EARLIER)
			snprintf(move, sizeof move, "%s %+ld", tb_move_name(p->move), p->delta);
		else
			snprintf(move, sizeof move, "%s", tb_move_name(p->move));
		doc_line(dc, ui_attr(bad ? UI_BAD : UI_HEADER), "  %4d %-16s %-8s %-16s %-11s %s", p->number, when,
			 p->verdict, p->first_div[0] ? p->first_div : "none", move, p->top_cause[0] ? p->top_cause : "-");
		doc_wrap(dc, ui_attr(bad ? UI_ERROR : UI_DIM), "        ", 8, p->note);
	}
}

static void history_open(view *v, long cell)
{
	(void)v;
	(void)cell;
	first_line = 0;
}

static void history_draw(view *v, WINDOW *w)
{
	char title[160];

	snprintf(title, sizeof title, "history: %zu pass%s of this pair, newest first   (Esc/q back, Up/Down scroll)",
		 v->hist.n, v->hist.n == 1 ? "" : "es");
	doc_screen_draw(v, w, title, fill, first_line);
}

static ui_ret history_action(view *v, WINDOW *w, tb_action a)
{
	return doc_screen_action(v, w, a, fill, &first_line);
}

const screen_ops history_screen = {
	.name = "history",
	.hints = doc_screen_hints,
	.open = history_open,
	.draw = history_draw,
	.action = history_action,
};
