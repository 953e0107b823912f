#include "config.h"

#include <stdio.h>

#include "run/report.h"
#include "tui/explain.h"
#include "tui/theme.h"

void explain_causes(const view *v, doc *dc, long cell, const tb_causes *own)
{
	const tb_diagnosis *dg = view_diag(v);
	const tb_result *r = view_result(v);
	long first = view_first_divergence(v), which = cell >= 0 ? cell : first;
	static const tb_causes none;
	const tb_causes *cs = !dg ? NULL : which == first ? &dg->causes : own ? own : &none;
	char name[TB_CELL_NAME_MAX];

	view_cell_label(v, which, name, sizeof name);
	if (which == first && dg) {
		char measured[256];
		tb_diagnosis_measured_text(dg, r, measured, sizeof measured);
		doc_line(dc, ui_attr(UI_TITLE), "causes  (of the first divergence: %s%s%s)", name, measured[0] ? "; " : "",
			 measured);
	} else if (which == first)
		doc_line(dc, ui_attr(UI_TITLE), "causes  (of the first divergence: %s)", name);
	else
		doc_line(dc, ui_attr(UI_TITLE), "causes  (of %s)", name);
	if (v->run.job) {
		doc_line(dc, ui_attr(UI_DIM), "  the comparison is still running");
		return;
	}
	if (v->run.map_warning[0])
		doc_wrap(dc, ui_attr(UI_BAD), "  warning: ", 4, v->run.map_warning);
	if (dg) {
		for (size_t i = 0; i < dg->sanity.n_warnings; i++)
			doc_wrap(dc, ui_attr(UI_BAD), "  warning: ", 4, dg->sanity.warnings[i].text);
		if (dg->origin.text[0])
			doc_wrap(dc, ui_attr(UI_HEADER), "  origin: ", 4, dg->origin.text);
	}
	if (v->run.partial) {
		char cov[TB_COVERAGE_TEXT_MAX];
		tb_coverage_text(&v->run.coverage, cov, sizeof cov);
		doc_wrap(dc, ui_attr(UI_ERROR), "  none named: ", 4, cov);
		return;
	}
	if (which < 0 && r && r->verdict == TB_ST_MATCH) {
		doc_line(dc, ui_attr(UI_DIM), "  none: no cell diverged");
		return;
	}
	if (!cs) {
		doc_line(dc, ui_attr(UI_DIM), "  no diagnosis rules loaded: causes are not ranked");
		return;
	}
	if (which == first && tb_replay_worth_saying(&dg->replay))
		doc_wrap(dc, ui_attr(UI_DIM), "  ", 4, dg->replay.note);
	if (cs->n == 0) {
		doc_line(dc, ui_attr(UI_DIM), "  no rule matched the measured facts");
		return;
	}
	for (size_t i = 0; i < cs->n; i++) {
		const tb_cause *c = &cs->v[i];
		char cf[160];
		doc_line(dc, ui_attr(i == 0 ? UI_BAD : UI_HEADER), "  %zu. %s  score %.2f", i + 1, c->id, c->score);
		if (tb_cause_confirmation(c, cf, sizeof cf))
			doc_wrap(dc, ui_attr(UI_GOOD), "     ", 8, cf);
		doc_line(dc, ui_attr(UI_LABEL), "     why:");
		doc_wrap(dc, 0, "", 8, c->why);
		doc_line(dc, ui_attr(UI_LABEL), "     look at:");
		doc_wrap(dc, 0, "", 8, c->look_at);
	}
}
