/*
 * The `:` commands, as one table (name, usage, help, handler, what the
 * argument completes).  The help screen and the prompt's completion read
 * the same table.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui/metric.h"
#include "run/report.h"
#include "tui/tui.h"

static unsigned cmd_goto(tui *t, char *args)
{
	const tb_pairing *p = t->sess.pairing;
	tb_cell c;
	char *end;
	long i = -1;

	if (!*args) {
		tui_message(t, true, "usage: goto CELL | goto LAYER");
		return 0;
	}
	/* "L3", as the row labels read, or "3" */
	const char *num = (args[0] == 'L' || args[0] == 'l') && isdigit((unsigned char)args[1]) ? args + 1 : args;
	long layer = strtol(num, &end, 10);
	if (end != num && !*end) {
		const char *col = t->g.n_vcols ? t->g.cols[t->g.vcols[t->g.cur_c]] : "";
		for (size_t k = 0; k < p->n_pairs; k++) {
			if (p->pairs[k].cell.layer != layer)
				continue;
			if (i < 0 || !strcmp(p->pairs[k].cell.tap, col))
				i = (long)k;
		}
	} else if (tb_cell_parse(args, &c) == 0) {
		i = tb_pairing_find(p, &c);
	} else {
		for (size_t k = 0; k < p->n_pairs && i < 0; k++)
			if ((p->pairs[k].ref && !strcmp(p->pairs[k].ref->name, args)) ||
			    (p->pairs[k].cand && !strcmp(p->pairs[k].cand->name, args)))
				i = (long)k;
	}
	if (i < 0) {
		tui_message(t, true, "goto: no cell '%s'", args);
		return 0;
	}
	grid_select(&t->g, i);
	t->depth = 1;
	return UI_REDRAW;
}

static unsigned cmd_tol(tui *t, char *args)
{
	tb_tolerance tol = t->tol;
	char *save = NULL;
	int n = 0;

	for (char *tok = strtok_r(args, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(tok, '='), *end;
		double v;
		if (!eq) {
			tui_message(t, true, "tol: '%s' is not KEY=VALUE (atol, rtol, diverge, max_kl)", tok);
			return 0;
		}
		*eq = '\0';
		v = strtod(eq + 1, &end);
		if (end == eq + 1 || *end || !isfinite(v) || v < 0) {
			tui_message(t, true, "tol: %s: '%s' is not a non-negative number", tok, eq + 1);
			return 0;
		}
		if (!strcmp(tok, "atol"))
			tol.atol = v;
		else if (!strcmp(tok, "rtol"))
			tol.rtol = v;
		else if (!strcmp(tok, "diverge"))
			tol.diverge = v;
		else if (!strcmp(tok, "max_kl") || !strcmp(tok, "max-kl"))
			tol.max_kl = v;
		else {
			tui_message(t, true, "tol: unknown key '%s' (atol, rtol, diverge, max_kl)", tok);
			return 0;
		}
		n++;
	}
	if (n == 0) {
		tui_message(t, true, "tol: atol=%g rtol=%g diverge=%g max_kl=%g", t->tol.atol, t->tol.rtol,
			    t->tol.diverge, t->tol.max_kl);
		return 0;
	}
	t->tol = tol;
	if (tui_recompare(t) == 0)
		tui_message(t, false, "tolerance atol=%g rtol=%g diverge=%g max_kl=%g: comparing again", tol.atol,
			    tol.rtol, tol.diverge, tol.max_kl);
	return UI_REDRAW;
}

static unsigned cmd_metric(tui *t, char *args)
{
	int m = ui_metric_find(args);

	if (m < 0) {
		tui_message(t, true, "metric: '%s' is not one of rel_l2 cosine max_abs norm_ratio allclose_frac added", args);
		return 0;
	}
	t->metric = m;
	tui_message(t, false, "metric: %s", ui_metrics[m].name);
	return UI_REDRAW;
}

static unsigned cmd_filter(tui *t, char *args)
{
	char msg[256];

	if (grid_set_filter(&t->g, args, msg, sizeof msg) < 0) {
		tui_message(t, true, "%s", msg);
		return 0;
	}
	t->depth = 1;
	if (*args)
		tui_message(t, false, "filter '%s': %d rows, %d columns shown", args, t->g.n_vrows, t->g.n_vcols);
	else
		tui_message(t, false, "filter cleared");
	return UI_REDRAW;
}

static unsigned cmd_export(tui *t, char *args)
{
	tb_report rep = {0};
	char *text;
	FILE *f;

	if (!*args) {
		tui_message(t, true, "usage: export FILE.json");
		return 0;
	}
	if (!t->res) {
		tui_message(t, true, "export: %s", t->job ? "the comparison is still running" : "no result to export");
		return 0;
	}
	rep.ref_path = t->opt->paths[0];
	rep.cand_path = t->opt->paths[1];
	rep.pairing = t->sess.pairing;
	rep.result = t->res;
	rep.diag = t->have_diag ? &t->diag : NULL;
	text = tb_report_json(&rep);
	if (!text) {
		tui_message(t, true, "export: out of memory");
		return 0;
	}
	f = fopen(args, "w");
	if (!f || fputs(text, f) < 0 || fputc('\n', f) < 0 || fclose(f) != 0) {
		tui_message(t, true, "export: %s: %s", args, strerror(errno));
		free(text);
		return 0;
	}
	free(text);
	tui_message(t, false, "wrote %s (%zu cells, verdict %s)", args, t->res->n_cells,
		    tb_status_name(t->res->verdict));
	return UI_REDRAW;
}

static unsigned cmd_reload(tui *t, char *args)
{
	(void)args;
	tui_reload(t);
	return UI_REDRAW;
}

static unsigned cmd_history(tui *t, char *args)
{
	(void)args;
	t->history_scroll = 0;
	tui_push(t, &history_screen);
	return UI_REDRAW;
}

static unsigned cmd_help(tui *t, char *args)
{
	(void)args;
	t->help_scroll = 0;
	tui_push(t, &help_screen);
	return UI_REDRAW;
}

static unsigned cmd_quit(tui *t, char *args)
{
	(void)t;
	(void)args;
	return UI_QUIT;
}

static unsigned cmd_save_display(tui *t, char *args)
{
	if (!*args) {
		tui_message(t, true, "usage: save-display FILE");
		return 0;
	}
	if (tui_save_display(t, args) < 0)
		tui_message(t, true, "save-display: %s: %s", args, strerror(errno));
	return 0;
}

const ui_cmd ui_cmds[] = {
	{.name = "goto", .usage = "goto CELL | goto LAYER", .exec = cmd_goto, .complete = CMP_CELL,
	 .help = "select a cell (L12.mlp, embed, a tensor name) or layer N (12 or L12) in the current column"},
	{.name = "tol", .usage = "tol atol=A rtol=R diverge=D max_kl=K", .exec = cmd_tol, .complete = CMP_TOL,
	 .help = "change the tolerance (any of the keys) and compare again"},
	{.name = "metric", .usage = "metric NAME", .exec = cmd_metric, .complete = CMP_METRIC,
	 .help = "color and number the cells by rel_l2, cosine, max_abs, norm_ratio, allclose_frac or added"},
	{.name = "filter", .usage = "filter [REGEX]", .exec = cmd_filter, .complete = CMP_CELL,
	 .help = "show only the layers and taps whose cell or tensor names match; no REGEX: all"},
	{.name = "export", .usage = "export FILE.json", .exec = cmd_export, .complete = CMP_FILE,
	 .help = "write the JSON report (as 'tbisect check --json') to FILE"},
	{.name = "reload", .usage = "reload", .exec = cmd_reload, .complete = CMP_NONE,
	 .help = "compare both trees again: a new pass (as r)"},
	{.name = "history", .usage = "history", .exec = cmd_history, .complete = CMP_NONE,
	 .help = "show the passes of this pair (as H)"},
	{.name = "help", .usage = "help", .exec = cmd_help, .complete = CMP_NONE, .help = "show the help screen"},
	{.name = "quit", .usage = "quit", .exec = cmd_quit, .complete = CMP_NONE, .help = "quit tbisect"},
	{.name = "save-display", .usage = "save-display FILE", .exec = cmd_save_display, .complete = CMP_FILE,
	 .help = "write the screen's text to FILE (for tests and bug reports)"},
};
const size_t ui_n_cmds = sizeof ui_cmds / sizeof ui_cmds[0];

unsigned cmdline_run(tui *t, const char *line)
{
	char buf[1024], *cmd, *args, *end;

	snprintf(buf, sizeof buf, "%s", line);
	cmd = buf;
	while (isspace((unsigned char)*cmd))
		cmd++;
	end = cmd + strlen(cmd);
	while (end > cmd && isspace((unsigned char)end[-1]))
		*--end = '\0';
	if (!*cmd)
		return 0;
	args = cmd + strcspn(cmd, " \t");
	if (*args)
		*args++ = '\0';
	while (isspace((unsigned char)*args))
		args++;
	for (size_t i = 0; i < ui_n_cmds; i++)
		if (!strcmp(ui_cmds[i].name, cmd))
			return ui_cmds[i].exec(t, args);
	tui_message(t, true, "unknown command '%s' (try :help)", cmd);
	return 0;
}
