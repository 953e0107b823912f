#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curses.h>

#include "base/writefile.h"
#include "model/naming.h"
#include "run/html.h"
#include "run/markdown.h"
#include "run/report.h"
#include "tui/cmdline.h"
#include "tui/reload.h"

/* A path as the shell would read its leading ~ or ~user; -1 when the user
 * or HOME is unknown. */
static int expand_home(const char *in, char *out, size_t size)
{
	const char *rest, *home;
	char user[256];

	if (in[0] != '~') {
		snprintf(out, size, "%s", in);
		return 0;
	}
	rest = in + 1 + strcspn(in + 1, "/");
	if (rest == in + 1) {
		home = getenv("HOME");
	} else {
		struct passwd *pw;
		snprintf(user, sizeof user, "%.*s", (int)(rest - in - 1), in + 1);
		pw = getpwnam(user);
		home = pw ? pw->pw_dir : NULL;
	}
	if (!home || !*home)
		return -1;
	snprintf(out, size, "%s%s", home, rest);
	return 0;
}

/* A command's FILE argument with ~ expanded into out; false, with the
 * message, when it cannot be. */
static bool file_arg(view *v, const char *cmd, const char *in, char *out, size_t size)
{
	if (expand_home(in, out, size) == 0)
		return true;
	view_message(v, true, "%s: cannot expand '%s' (no such user, or HOME unset)", cmd, in);
	return false;
}

static ui_ret cmd_goto(view *v, char *args)
{
	const tb_pairing *p = view_pairing(v);
	tb_cell c;
	char *end;
	long i = -1;

	if (!*args) {
		view_message(v, true, "usage: goto CELL | goto LAYER");
		return ui_flags(0);
	}
	/* "L3", as the row labels read, or "3" */
	const char *num = (args[0] == 'L' || args[0] == 'l') && isdigit((unsigned char)args[1]) ? args + 1 : args;
	long layer = strtol(num, &end, 10);
	if (end != num && !*end) {
		const char *col = v->g.n_vcols ? v->g.cols[v->g.vcols[v->g.cur_c]] : "";
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
		view_message(v, true, "goto: no cell '%s'", args);
		return ui_flags(0);
	}
	grid_select(&v->g, i);
	return ui_flags(UI_HOME);
}

static ui_ret cmd_tol(view *v, char *args)
{
	tb_tolerance tol = v->tol;
	char *save = NULL;
	int n = 0;

	for (char *tok = strtok_r(args, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(tok, '='), *end;
		double x;
		if (!eq) {
			view_message(v, true, "tol: '%s' is not KEY=VALUE (atol, rtol, diverge, max_kl)", tok);
			return ui_flags(0);
		}
		*eq = '\0';
		x = strtod(eq + 1, &end);
		if (end == eq + 1 || *end || !isfinite(x) || x < 0) {
			view_message(v, true, "tol: %s: '%s' is not a non-negative number", tok, eq + 1);
			return ui_flags(0);
		}
		if (!strcmp(tok, "atol"))
			tol.atol = x;
		else if (!strcmp(tok, "rtol"))
			tol.rtol = x;
		else if (!strcmp(tok, "diverge"))
			tol.diverge = x;
		else if (!strcmp(tok, "max_kl") || !strcmp(tok, "max-kl"))
			tol.max_kl = x;
		else {
			view_message(v, true, "tol: unknown key '%s' (atol, rtol, diverge, max_kl)", tok);
			return ui_flags(0);
		}
		n++;
	}
	if (n == 0) {
		view_message(v, true, "tol: atol=%g rtol=%g diverge=%g max_kl=%g", v->tol.atol, v->tol.rtol,
			     v->tol.diverge, v->tol.max_kl);
		return ui_flags(0);
	}
	v->tol = tol;
	return ui_flags(reload_recompare(v));
}

/* :heads N: the head count --heads gives, without a restart. */
static ui_ret cmd_heads(view *v, char *args)
{
	char *end;
	long n;

	if (!*args) {
		if (v->cfg->opts.heads > 0)
			view_message(v, false, "heads: %d (heads N sets another)", v->cfg->opts.heads);
		else
			view_message(v, false, "heads: inferred from the attn.q/attn.k shapes (heads N sets them)");
		return ui_flags(0);
	}
	n = strtol(args, &end, 10);
	if (end == args || *end || n < 1 || n > 65536) {
		view_message(v, true, "heads: '%s' is not a head count (1 to 65536)", args);
		return ui_flags(0);
	}
	return ui_flags(reload_heads(v, (int)n));
}

static ui_ret cmd_tower(view *v, char *args)
{
	char *name = strtok(args, " \t");

	if (!name)
		return ui_flags(reload_tower(v, NULL, true));
	if (!strcmp(name, "text"))
		return ui_flags(reload_tower(v, NULL, false));
	if (!tb_tower_known(name)) {
		view_message(v, true, "tower: '%s' is none (text, vision, audio)", name);
		return ui_flags(0);
	}
	return ui_flags(reload_tower(v, name, false));
}

static ui_ret cmd_filter(view *v, char *args)
{
	char msg[256];

	if (grid_set_filter(&v->g, args, msg, sizeof msg) < 0) {
		view_message(v, true, "%s", msg);
		return ui_flags(0);
	}
	if (*args)
		view_message(v, false, "filter '%s': %d rows, %d columns shown", args, v->g.n_vrows, v->g.n_vcols);
	else
		view_message(v, false, "filter cleared");
	return ui_flags(UI_HOME);
}

/* The report formats :export writes: a first word names one, else the
 * file's extension does, else JSON. */
typedef enum export_fmt { EXPORT_JSON, EXPORT_MD, EXPORT_HTML } export_fmt;

static const struct {
	const char *word, *ext;
} export_fmts[] = {[EXPORT_JSON] = {"json", ".json"}, [EXPORT_MD] = {"md", ".md"}, [EXPORT_HTML] = {"html", ".html"}};

/* "md FILE", "json FILE" or "FILE": the format, and the file in *path. */
static export_fmt export_args(char *args, const char **path)
{
	size_t n = strcspn(args, " \t"), len;

	for (size_t f = 0; f < sizeof export_fmts / sizeof *export_fmts; f++) {
		if (strlen(export_fmts[f].word) == n && !strncmp(args, export_fmts[f].word, n)) {
			*path = args + n + strspn(args + n, " \t");
			return (export_fmt)f;
		}
	}
	*path = args;
	len = strlen(args);
	for (size_t f = 0; f < sizeof export_fmts / sizeof *export_fmts; f++) {
		size_t el = strlen(export_fmts[f].ext);
		if (len > el && !strcmp(args + len - el, export_fmts[f].ext))
			return (export_fmt)f;
	}
	return EXPORT_JSON;
}

static ui_ret cmd_export(view *v, char *args)
{
	tb_report rep = {0};
	char path[PATH_MAX], *text = NULL;
	const char *file;
	export_fmt fmt;
	FILE *f;
	int bad;

	fmt = export_args(args, &file);
	if (!*file) {
		view_message(v, true, "usage: export [json|md|html] FILE");
		return ui_flags(0);
	}
	if (!file_arg(v, "export", file, path, sizeof path))
		return ui_flags(0);
	if (!v->run.res) {
		view_message(v, true, "export: %s", v->run.job ? "the comparison is still running" : "no result to export");
		return ui_flags(0);
	}
	tb_report_from_run(&rep, &v->run, v->cfg);
	/* What the diagnosis measured, as `check --json --features` writes it. */
	rep.show_features = rep.diag != NULL;
	if (fmt == EXPORT_JSON && !(text = tb_report_json(&rep))) {
		view_message(v, true, "export: out of memory");
		return ui_flags(0);
	}
	f = fopen(path, "w");
	bad = !f;
	if (f && fmt == EXPORT_JSON)
		bad = fputs(text, f) < 0 || fputc('\n', f) < 0;
	else if (f && fmt == EXPORT_MD)
		bad = tb_report_markdown(f, &rep) < 0;
	else if (f)
		bad = tb_report_html(f, &rep, &(tb_html_opts){0}) < 0;
	if (f && fclose(f) != 0)
		bad = 1;
	free(text);
	if (bad) {
		view_message(v, true, "export: %s: %s", path, strerror(errno));
		return ui_flags(0);
	}
	view_message(v, false, "wrote %s (%s, %zu cells, verdict %s)", path, export_fmts[fmt].word, v->run.res->n_cells,
		     tb_status_name(v->run.res->verdict));
	return ui_flags(0);
}

static ui_ret cmd_set(view *v, char *args)
{
	if (!strcmp(args, "mouse") || !strcmp(args, "nomouse")) {
		v->mouse = args[0] == 'm';
	} else if (*args) {
		view_message(v, true, "set: unknown setting '%s' (mouse, nomouse)", args);
		return ui_flags(0);
	}
	view_message(v, false, "%s",
		     v->mouse ? "mouse: on (clicks select, the wheel scrolls; :set nomouse)"
			      : "nomouse: the terminal selects text (:set mouse)");
	return ui_flags(0);
}

/* The screen's text, as the terminal shows it, into a file. */
static int save_display(const char *path)
{
	FILE *f = fopen(path, "w");
	int lines = getmaxy(curscr), cols = getmaxx(curscr);
	char line[1024];

	if (!f)
		return -1;
	for (int y = 0; y < lines; y++) {
		int n = cols < (int)sizeof line - 1 ? cols : (int)sizeof line - 1;
		if (mvwinnstr(curscr, y, 0, line, n) == ERR)
			line[0] = '\0';
		for (int k = (int)strlen(line); k > 0 && line[k - 1] == ' '; k--)
			line[k - 1] = '\0';
		fprintf(f, "%s\n", line);
	}
	return fclose(f) == 0 ? 0 : -1;
}

static ui_ret cmd_save_display(view *v, char *args)
{
	char path[PATH_MAX];

	if (!*args) {
		view_message(v, true, "usage: save-display FILE");
		return ui_flags(0);
	}
	if (file_arg(v, "save-display", args, path, sizeof path) && save_display(path) < 0)
		view_message(v, true, "save-display: %s: %s", path, strerror(errno));
	return ui_flags(0);
}

static int fill_text(FILE *f, const void *text)
{
	return fputs(text, f) < 0 || fputc('\n', f) == EOF ? -1 : 0;
}

/* The map M and y applied (the --map given, with the suggested rules
 * added), as `check --map FILE` reads it; written whole or not at all. */
static ui_ret cmd_save_map(view *v, char *args)
{
	char path[PATH_MAX], buf[TB_ERR_TEXT_MAX];
	tb_err err;

	if (!*args) {
		view_message(v, true, "usage: save-map FILE");
		return ui_flags(0);
	}
	if (!v->applied_map) {
		view_message(v, true, "save-map: no map applied (M suggests one, y applies it)");
		return ui_flags(0);
	}
	if (!file_arg(v, "save-map", args, path, sizeof path))
		return ui_flags(0);
	if (tb_write_file(path, "the map", 0, fill_text, v->applied_map, &err) < 0)
		view_message(v, true, "save-map: %s", tb_err_text(&err, buf, sizeof buf));
	else
		view_message(v, false, "wrote %s: check --map %s pairs the trees as the view does", path, path);
	return ui_flags(0);
}

const ui_cmd ui_cmds[] = {
	{.name = "goto", .usage = "goto CELL | goto LAYER", .exec = cmd_goto, .complete = CMP_CELL,
	 .help = "select a cell (L12.mlp, embed, a tensor name) or layer N (12 or L12) in the current column"},
	{.name = "tol", .usage = "tol atol=A rtol=R diverge=D max_kl=K", .exec = cmd_tol, .complete = CMP_TOL,
	 .help = "change the tolerance (any of the keys) and compare again"},
	{.name = "metric", .usage = "metric NAME", .action = TB_ACT_METRIC, .complete = CMP_METRIC,
	 .help = "color and number the cells by rel_l2, cosine, max_abs, norm_ratio, allclose_frac or added"},
	{.name = "pos", .usage = "pos N", .action = TB_ACT_GOTO_POS, .complete = CMP_NONE,
	 .help = "detail: select position N of the strip, its page with it (as p)"},
	{.name = "filter", .usage = "filter [REGEX]", .exec = cmd_filter, .complete = CMP_CELL,
	 .help = "show only the layers and taps whose cell or tensor names match; no REGEX: all"},
	{.name = "export", .usage = "export [json|md|html] FILE", .exec = cmd_export, .complete = CMP_FILE,
	 .help = "write the JSON report (as 'tbisect check --json --features'), or with md or html (or a .md or .html FILE) the Markdown summary or the HTML report"},
	{.name = "heads", .usage = "heads [N]", .exec = cmd_heads, .complete = CMP_NONE,
	 .help = "set the attention heads (as --heads) and pair, compare and diagnose again; no N: the count shown"},
	{.name = "tower", .usage = "tower [text|vision|audio]", .exec = cmd_tower, .complete = CMP_NONE,
	 .help = "show the text decoder's grid or a tower's (both trees must hold it); no NAME: the next grid (as t)"},
	{.name = "reload", .usage = "reload", .action = TB_ACT_RELOAD, .complete = CMP_NONE,
	 .help = "compare both trees again: a new pass (as r)"},
	{.name = "history", .usage = "history [clear]", .action = TB_ACT_HISTORY, .complete = CMP_NONE,
	 .help = "show the passes of this pair (as H); clear: forget them, the next pass is pass 1"},
	{.name = "help", .usage = "help", .action = TB_ACT_HELP, .complete = CMP_NONE, .help = "show the help screen"},
	{.name = "suggest-map", .usage = "suggest-map", .action = TB_ACT_SUGGEST, .complete = CMP_NONE,
	 .help = "suggest map rules for the unpaired names and show them; y applies them (as M)"},
	{.name = "save-map", .usage = "save-map FILE", .exec = cmd_save_map, .complete = CMP_FILE,
	 .help = "write the map applied with M and y to FILE, as --map takes it (check --map FILE)"},
	{.name = "set", .usage = "set mouse | set nomouse", .exec = cmd_set, .complete = CMP_SET,
	 .help = "mouse: clicks select and the wheel scrolls; nomouse: the terminal's own selection"},
	{.name = "quit", .usage = "quit", .action = TB_ACT_INTERRUPT, .complete = CMP_NONE, .help = "quit tbisect"},
	{.name = "save-display", .usage = "save-display FILE", .exec = cmd_save_display, .complete = CMP_FILE,
	 .help = "write the screen's text to FILE (for tests and bug reports)"},
};
const size_t ui_n_cmds = sizeof ui_cmds / sizeof ui_cmds[0];

/* The action a word names whole (":causes", ":fold"): every key's action
 * can be typed, not only the commands of ui_cmds.  The prompt and the
 * mouse are no commands. */
tb_action cmdline_action(const char *word)
{
	for (int a = 1; a < TB_ACT_COUNT; a++)
		if (a != TB_ACT_PROMPT && a != TB_ACT_SEARCH && a != TB_ACT_CLICK &&
		    !strcmp(tb_action_infos[a].name, word))
			return (tb_action)a;
	return TB_ACT_NONE;
}

/* The command a word names: its whole name, or a prefix of one name only
 * (":exp", ":q"); a trailing '!' (":q!") is accepted as vi has it.  NULL,
 * with *action set when the word names an action whole, else with the
 * message set. */
static const ui_cmd *find_cmd(view *v, char *word, tb_action *action)
{
	const ui_cmd *found = NULL;
	size_t len, n = 0;
	char names[256] = "";

	len = strlen(word);
	if (len > 1 && word[len - 1] == '!')
		word[--len] = '\0';
	for (size_t i = 0; i < ui_n_cmds; i++)
		if (!strcmp(ui_cmds[i].name, word))
			return &ui_cmds[i];
	*action = cmdline_action(word);
	if (*action != TB_ACT_NONE)
		return NULL;
	for (size_t i = 0; i < ui_n_cmds; i++) {
		if (strncmp(ui_cmds[i].name, word, len) != 0)
			continue;
		found = &ui_cmds[i];
		n++;
		snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", n > 1 ? ", " : "", found->name);
	}
	if (n == 1)
		return found;
	if (n == 0)
		view_message(v, true, "unknown command '%s' (try :help)", word);
	else
		view_message(v, true, "'%s' is ambiguous: %s", word, names);
	return NULL;
}

ui_ret cmdline_run(view *v, const char *line, cmd_call *call)
{
	char buf[1024], *cmd, *args, *end;
	const ui_cmd *c;

	call->action = TB_ACT_NONE;
	call->arg[0] = '\0';
	snprintf(buf, sizeof buf, "%s", line);
	cmd = buf;
	while (isspace((unsigned char)*cmd))
		cmd++;
	end = cmd + strlen(cmd);
	while (end > cmd && isspace((unsigned char)end[-1]))
		*--end = '\0';
	if (!*cmd)
		return ui_flags(0);
	args = cmd + strcspn(cmd, " \t");
	if (*args)
		*args++ = '\0';
	while (isspace((unsigned char)*args))
		args++;
	c = find_cmd(v, cmd, &call->action);
	if (!c) {
		snprintf(call->arg, sizeof call->arg, "%s", args);
		return ui_flags(0);
	}
	if (c->exec)
		return c->exec(v, args);
	call->action = c->action;
	snprintf(call->arg, sizeof call->arg, "%s", args);
	return ui_flags(0);
}
