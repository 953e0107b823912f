/*
 * The unpaired screen (u, and at start when the pairing is partial): the
 * tensors of each tree that did not pair, side by side, each with why (no
 * naming rule matched, another tensor took its cell, or the other tree
 * has nothing for its cell), under the coverage of the pairing.
 */
#include "config.h"

#include <stdio.h>

#include "tui/doc.h"
#include "tui/draw.h"
#include "tui/screens/screens.h"
#include "tui/theme.h"

/* First document line shown. */
static int first_line;

/* Why a tensor did not pair, short enough for half a screen, by kind. */
static const char *const tags[] = {
	[TB_UNP_UNMAPPED] = "? ",
	[TB_UNP_DUPLICATE] = "2 ",
	[TB_UNP_ONE_SIDED] = "- ",
	[TB_UNP_UNSPLIT] = "f ",
	[TB_UNP_TOWER] = "t ",
};

static void fill(const view *v, doc *dc)
{
	const tb_pairing *p = view_pairing(v);
	int half = (getmaxx(dc->w) - 1) / 2;
	size_t n = p->n_unp[0] > p->n_unp[1] ? p->n_unp[0] : p->n_unp[1];
	char cov[TB_COVERAGE_TEXT_MAX], note[TB_COVERAGE_TEXT_MAX], side[2][512], cut[2][512];

	tb_coverage_text(&v->run.coverage, cov, sizeof cov);
	if (v->run.partial) {
		doc_wrap(dc, ui_attr(UI_ERROR), "  ", 2, cov);
		doc_wrap(dc, ui_attr(UI_ERROR), "  ", 2,
			 "under --allow-partial no cause is named: pair the rest with a --map (tbisect suggest-map writes one)");
	} else {
		doc_wrap(dc, ui_attr(UI_DIM), "  ", 2, cov);
	}
	tb_coverage_subtap_note(&v->run.coverage, note, sizeof note);
	if (note[0])
		doc_wrap(dc, ui_attr(UI_DIM), "  ", 2, note);
	doc_line(dc, 0, "%s", "");
	doc_line(dc, ui_attr(UI_LABEL), "%-*.*s %-.*s", half, half, "ref (unpaired)", half, "cand (unpaired)");
	if (n == 0)
		doc_line(dc, ui_attr(UI_DIM), "  none: every tensor paired");
	for (size_t i = 0; i < n; i++) {
		for (int s = 0; s < 2; s++) {
			const tb_unpaired *u = i < p->n_unp[s] ? &p->unp[s][i] : NULL;
			snprintf(side[s], sizeof side[s], "%s%s", u ? tags[u->kind] : "", u ? u->tensor->name : "");
			/* a name longer than its half ends in '>', as the TUI marks a cut */
			ui_fit(side[s], half, cut[s], sizeof cut[s]);
		}
		doc_line(dc, 0, "%-*s %s", half, cut[0], cut[1]);
	}
	doc_line(dc, 0, "%s", "");
	for (int k = TB_UNP_UNMAPPED; k < TB_UNP_KINDS; k++)
		doc_line(dc, ui_attr(UI_DIM), "  %s%s", tags[k], tb_unpaired_reason((tb_unpaired_kind)k));
}

static void unpaired_open(view *v, long cell)
{
	(void)v;
	(void)cell;
	first_line = 0;
}

static void unpaired_draw(view *v, WINDOW *w)
{
	char title[160];
	const tb_pairing *p = view_pairing(v);

	snprintf(title, sizeof title, "unpaired tensors: ref %zu, cand %zu   (Esc/q back, Up/Down scroll)", p->n_unp[0],
		 p->n_unp[1]);
	doc_screen_draw(v, w, title, fill, first_line);
}

static ui_ret unpaired_action(view *v, WINDOW *w, tb_action a)
{
	return doc_screen_action(v, w, a, fill, &first_line);
}

const screen_ops unpaired_screen = {
	.name = "unpaired",
	.hints = doc_screen_hints,
	.open = unpaired_open,
	.draw = unpaired_draw,
	.action = unpaired_action,
};
