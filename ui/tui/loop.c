/*
 * The loop of the interactive view: input (curses keys, or a script of keys
 * and commands for golden screens), resize, progress polling, drawing with
 * wnoutrefresh and one doupdate per iteration; the comparison job; the
 * signal handlers and the one idempotent shutdown.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "tui/metric.h"
#include "run/report.h"
#include "tui/theme.h"
#include "tui/tui.h"

/* Smallest screen the layout fits in. */
#define MIN_LINES 12
#define MIN_COLS 50
/* How long the loop waits for a key before it polls the job again (ms),
 * and while a change of the trees is settling (the reload then starts
 * close to the end of the settle delay). */
#define TICK_MS 100
#define TICK_SETTLE_MS 20
/* --watch reloads once no dump file has changed for this long (s), so a
 * file still being written is not read half-way. */
#define WATCH_SETTLE 0.3

/* The one view of the process, for the shutdown and the signal handlers. */
static tui *the_tui;
/* curses is initialised and the terminal not yet given back. */
static bool curses_on;
/* Set by SIGINT, SIGTERM, SIGHUP: the loop quits cleanly. */
static volatile sig_atomic_t got_signal;

static void ui_shutdown(void)
{
	if (!curses_on)
		return;
	curses_on = false;
	if (the_tui && the_tui->prompt_on)
		prompt_close(the_tui);
	mousemask(0, NULL);
	endwin();
}

static void on_quit_signal(int sig)
{
	got_signal = sig;
}

/* Restore the terminal, then die of the same signal (the handler was reset
 * by SA_RESETHAND). */
static void on_crash(int sig)
{
	static const char bus[] = "tbisect: a dump file shrank while it was being read (rewritten in place?)\n";
	const char *p = bus;
	size_t n = sizeof bus - 1;

	ui_shutdown();
	/* The trees are mapped: a file truncated under the view faults.  Only
	 * write(2) is safe here. */
	while (sig == SIGBUS && n > 0) {
		ssize_t w = write(STDERR_FILENO, p, n);
		if (w <= 0)
			break;
		p += w;
		n -= (size_t)w;
	}
	raise(sig);
}

static void install_signals(void)
{
	static const int quit_sigs[] = {SIGINT, SIGTERM, SIGHUP};
	static const int crash_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_quit_signal;
	for (size_t i = 0; i < sizeof quit_sigs / sizeof *quit_sigs; i++)
		sigaction(quit_sigs[i], &sa, NULL);
	sa.sa_handler = on_crash;
	sa.sa_flags = SA_RESETHAND;
	for (size_t i = 0; i < sizeof crash_sigs / sizeof *crash_sigs; i++)
		sigaction(crash_sigs[i], &sa, NULL);
}

void tui_fatal(const char *fmt, ...)
{
	va_list ap;

	ui_shutdown();
	fputs("tbisect: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(TB_EXIT_BAD_INPUT);
}

double tui_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --- the comparison job --- */

const tb_result *tui_result(const tui *t)
{
	return t->res ? t->res : t->job ? tb_job_result(t->job) : NULL;
}

bool tui_cell_ready(const tui *t, size_t i)
{
	return t->res ? i < t->res->n_cells : t->job ? tb_job_cell_done(t->job, i) : false;
}

int tui_cell_status(const tui *t, size_t i)
{
	return tui_cell_ready(t, i) ? (int)tui_result(t)->cells[i].status : TB_ST_PENDING;
}

long tui_first_divergence(const tui *t)
{
	const tb_result *r = tui_result(t);

	if (t->res)
		return t->res->first_div;
	for (size_t i = 0; r && i < r->n_cells; i++)
		if (tui_cell_status(t, i) == TB_ST_DIVERGED)
			return (long)i;
	return -1;
}

const char *tui_cell_label(const tui *t, long i, char *buf, size_t size)
{
	if (i < 0 || (size_t)i >= t->sess.pairing->n_pairs)
		snprintf(buf, size, "none");
	else
		tb_cell_name(&t->sess.pairing->pairs[i].cell, buf, size);
	return buf;
}

tb_job *tui_compare_start(tui *t, const tb_pairing *p)
{
	tb_compare_opts co;
	tb_err err;
	tb_job *job;

	tb_compare_opts_init(&co);
	co.tol = t->tol;
	co.threads = t->opt->threads;
	t->job_err[0] = '\0';
	job = tb_compare_start(p, &co, &err);
	if (!job)
		tb_err_text(&err, t->job_err, sizeof t->job_err);
	return job;
}

int tui_start_job(tui *t)
{
	t->job = tui_compare_start(t, t->sess.pairing);
	if (!t->job)
		return -1;
	t->t_start = tui_now();
	return 0;
}

static void stop_job(tui *t)
{
	tb_result *r;
	tb_err err;

	if (!t->job)
		return;
	tb_job_cancel(t->job);
	if (tb_job_finish(t->job, &r, &err) == 0)
		tb_result_free(r);
	t->job = NULL;
}

tb_diag_opts tui_diag_opts(const tui *t)
{
	tb_diag_opts o = {t->rules, t->opt->heads, t->opt->kv_heads, t->opt->origin_factor};

	return o;
}

/* A comparison at a new tolerance is no pass (the files did not change):
 * the banner says where the first divergence is now, instead of the last
 * pass's movement. */
static void tolerance_banner(tui *t)
{
	char cell[96] = "none";

	if (t->res->first_div >= 0)
		tb_cell_name(&t->res->cells[t->res->first_div].cell, cell, sizeof cell);
	snprintf(t->banner, sizeof t->banner,
		 "tolerance atol=%g rtol=%g diverge=%g max_kl=%g: first divergence %s (passes keep the tolerance they ran with)",
		 t->tol.atol, t->tol.rtol, t->tol.diverge, t->tol.max_kl, cell);
	t->banner_bad = false;
	t->banner_good = false;
	tui_message(t, false, "compared at the new tolerance");
}

/* The comparison finished: diagnose it (origin, dump checks, causes of the
 * first divergence); a load is a pass. */
static void job_done(tui *t)
{
	tb_err err;

	if (tb_job_finish(t->job, &t->res, &err) < 0) {
		tb_err_text(&err, t->job_err, sizeof t->job_err);
		tui_message(t, true, "comparison failed: %s", t->job_err);
	}
	t->job = NULL;
	if (t->res) {
		tb_diag_opts o = tui_diag_opts(t);
		if (tb_diagnose(&t->sess, t->res, &o, TB_TARGET_FIRST_DIVERGENCE, &t->diag, &err) == 0)
			t->have_diag = true;
		else
			tui_message(t, true, "diagnosis failed: %s", err.msg);
	}
	t->exit_code = t->res && t->res->verdict == TB_ST_DIVERGED ? TB_EXIT_DIVERGED : TB_EXIT_OK;
	if (t->res && t->job_is_pass)
		tui_record_pass(t);
	else if (t->res)
		tolerance_banner(t);
	t->job_is_pass = false;
}

/* True when the job just finished. */
static bool poll_job(tui *t)
{
	if (!t->job || !tb_job_finished(t->job))
		return false;
	job_done(t);
	return true;
}

void tui_drop_result(tui *t)
{
	stop_job(t);
	tb_result_free(t->res);
	t->res = NULL;
	if (t->have_diag)
		tb_diagnosis_done(&t->diag);
	t->have_diag = false;
	tb_causes_free(&t->d.causes);
	free(t->changed);
	t->changed = NULL;
	t->n_changed = 0;
}

int tui_recompare(tui *t)
{
	tui_reload_cancel(t);
	tui_drop_result(t);
	t->depth = 1;
	t->job_is_pass = false;
	if (tui_start_job(t) < 0) {
		tui_message(t, true, "cannot compare: %s", t->job_err);
		return -1;
	}
	return 0;
}

/* --- screens, messages --- */

void tui_message(tui *t, bool error, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->msg, sizeof t->msg, fmt, ap);
	va_end(ap);
	t->msg_err = error;
}

void tui_push(tui *t, const screen_ops *s)
{
	if (t->stack[t->depth - 1] == s)
		return;
	if (t->depth < (int)(sizeof t->stack / sizeof t->stack[0]))
		t->stack[t->depth++] = s;
}

int tui_search(tui *t, const char *pattern, int dir, char *why, size_t size)
{
	const tb_pairing *p = t->sess.pairing;
	long n = (long)p->n_pairs, start = grid_selected(&t->g);
	regex_t re;
	int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB | REG_ICASE);

	if (rc != 0) {
		regerror(rc, &re, why, size);
		return -1;
	}
	if (n == 0) {
		regfree(&re);
		return 0;
	}
	for (long k = 1; k <= n; k++) {
		long i = ((start < 0 ? -dir : start) + dir * k + n * 2) % n;
		char name[128];
		tb_cell_name(&p->pairs[i].cell, name, sizeof name);
		if (!regexec(&re, name, 0, NULL, 0) || (p->pairs[i].ref && !regexec(&re, p->pairs[i].ref->name, 0, NULL, 0)) ||
		    (p->pairs[i].cand && !regexec(&re, p->pairs[i].cand->name, 0, NULL, 0))) {
			regfree(&re);
			return grid_select(&t->g, i) ? 1 : 0;
		}
	}
	regfree(&re);
	return 0;
}

int tui_save_display(tui *t, const char *path)
{
	FILE *f = fopen(path, "w");
	char line[1024];

	if (!f)
		return -1;
	for (int y = 0; y < t->lines; y++) {
		int n = t->cols < (int)sizeof line - 1 ? t->cols : (int)sizeof line - 1;
		if (mvwinnstr(curscr, y, 0, line, n) == ERR)
			line[0] = '\0';
		for (int k = (int)strlen(line); k > 0 && line[k - 1] == ' '; k--)
			line[k - 1] = '\0';
		fprintf(f, "%s\n", line);
	}
	return fclose(f) == 0 ? 0 : -1;
}

static void layout(tui *t)
{
	getmaxyx(stdscr, t->lines, t->cols);
	t->too_small = t->lines < MIN_LINES || t->cols < MIN_COLS;
	if (t->wmain)
		delwin(t->wmain);
	if (t->wstatus)
		delwin(t->wstatus);
	t->wmain = newwin(t->lines > 1 ? t->lines - 1 : 1, t->cols, 0, 0);
	t->wstatus = newwin(1, t->cols, t->lines > 1 ? t->lines - 1 : 0, 0);
	if (!t->wmain || !t->wstatus)
		tui_fatal("cannot create curses windows for a %dx%d terminal", t->cols, t->lines);
	keypad(t->wstatus, TRUE);
	wtimeout(t->wstatus, TICK_MS);
	clearok(curscr, TRUE);
}

static void draw_hints(tui *t)
{
	static const tb_action hints[] = {TB_ACT_HELP, TB_ACT_OPEN, TB_ACT_FIRST_DIV, TB_ACT_PROMPT, TB_ACT_QUIT};
	WINDOW *w = t->wstatus;
	int x = 0;

	if (t->msg[0]) {
		ui_put(w, 0, 0, ui_attr(t->msg_err ? UI_ERROR : UI_HEADER), "%s", t->msg);
		return;
	}
	for (size_t i = 0; i < sizeof hints / sizeof *hints && x < t->cols; i++) {
		char keys[64];
		tb_action_keys(hints[i], keys, sizeof keys);
		*strchrnul(keys, ' ') = '\0';
		ui_put(w, 0, x, ui_attr(UI_TITLE), "%s", keys);
		x += (int)strlen(keys);
		ui_put(w, 0, x, ui_attr(UI_DIM), " %s  ", tb_action_infos[hints[i]].name);
		x += (int)strlen(tb_action_infos[hints[i]].name) + 3;
	}
}

static void draw(tui *t)
{
	werase(t->wmain);
	werase(t->wstatus);
	if (t->too_small) {
		ui_put(t->wmain, 0, 0, ui_attr(UI_ERROR), "terminal too small: %dx%d", t->cols, t->lines);
		ui_put(t->wmain, 1, 0, 0, "tbisect needs %dx%d:", MIN_COLS, MIN_LINES);
		ui_put(t->wmain, 2, 0, 0, "enlarge the window,");
		ui_put(t->wmain, 3, 0, 0, "or use 'tbisect check'.");
		ui_put(t->wmain, 4, 0, 0, "q quits");
	} else {
		t->stack[t->depth - 1]->draw(t, t->wmain);
	}
	wnoutrefresh(t->wmain);
	if (t->prompt_on) {
		prompt_draw(t);
	} else {
		draw_hints(t);
		curs_set(0);
	}
	wnoutrefresh(t->wstatus);
}

/* Actions every screen shares; the rest go to the screen on top. */
static unsigned dispatch(tui *t, tb_action a)
{
	const screen_ops *top = t->stack[t->depth - 1];
	MEVENT ev;

	if (t->too_small)
		return a == TB_ACT_QUIT || a == TB_ACT_INTERRUPT ? UI_QUIT : 0;
	switch (a) {
	case TB_ACT_NONE: return 0;
	case TB_ACT_INTERRUPT: return UI_QUIT;
	case TB_ACT_HELP:
		t->help_scroll = 0;
		tui_push(t, &help_screen);
		return UI_REDRAW;
	case TB_ACT_CAUSES:
		t->causes_scroll = 0;
		tui_push(t, &causes_screen);
		return UI_REDRAW;
	case TB_ACT_HISTORY:
		t->history_scroll = 0;
		tui_push(t, &history_screen);
		return UI_REDRAW;
	case TB_ACT_RELOAD:
		tui_reload(t);
		return UI_REDRAW;
	case TB_ACT_PROMPT:
	case TB_ACT_SEARCH:
		prompt_open(t, a == TB_ACT_PROMPT ? ':' : '/');
		return UI_REDRAW;
	case TB_ACT_REDRAW:
		clearok(curscr, TRUE);
		return UI_REDRAW;
	case TB_ACT_CLICK:
		if (getmouse(&ev) != OK || !(ev.bstate & (BUTTON1_CLICKED | BUTTON1_PRESSED | BUTTON1_RELEASED)))
			return 0;
		return top->click ? top->click(t, ev.y, ev.x) : 0;
	default: return top->action(t, a);
	}
}

static void act(tui *t, unsigned flags)
{
	if (flags & UI_QUIT)
		t->quit = true;
	if ((flags & UI_BACK) && t->depth > 1)
		t->depth--;
}

static void handle_key(tui *t, int key)
{
	if (key == KEY_RESIZE) {
		layout(t);
		return;
	}
	if (t->prompt_on) {
		act(t, prompt_key(t, key));
		return;
	}
	t->msg[0] = '\0';
	act(t, dispatch(t, tb_key_action(key)));
}

/* --- script mode: keys and commands from a file, for exact screens --- */

/* One step of the script: wait for the comparison, then a line of keys,
 * a `:` command or `resize COLSxLINES`.  False at the end of the script. */
static bool script_step(tui *t, FILE *script)
{
	char line[1024], *save = NULL;
	int cols, lines;

	while (t->job || tui_reloading(t)) {
		if (!poll_job(t) && !tui_reload_poll(t))
			usleep(2000);
	}
	draw(t);
	doupdate();
	if (!fgets(line, sizeof line, script))
		return false;
	line[strcspn(line, "\n")] = '\0';
	if (line[0] == '#' || line[0] == '\0')
		return true;
	if (line[0] == ':') {
		act(t, cmdline_run(t, line + 1));
	} else if (sscanf(line, "resize %dx%d", &cols, &lines) == 2) {
		resizeterm(lines, cols);
		layout(t);
	} else {
		for (char *tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
			int key = tb_key_parse(tok);
			if (key < 0)
				tui_fatal("script: unknown key '%s'", tok);
			handle_key(t, key);
		}
	}
	return true;
}

static void loop(tui *t, FILE *script)
{
	bool dirty = true;

	while (!t->quit && !got_signal) {
		if (script) {
			if (!script_step(t, script))
				break;
			continue;
		}
		/* Each is polled every time: no short cut past the reload and the watch. */
		dirty |= poll_job(t);
		dirty |= tui_reload_poll(t);
		dirty |= t->job || tui_reloading(t);
		if (dirty) {
			draw(t);
			doupdate();
		}
		wtimeout(t->wstatus, t->watch && t->watch_state == UI_WATCH_SETTLING ? TICK_SETTLE_MS : TICK_MS);
		int key = wgetch(t->wstatus);
		dirty = key != ERR;
		if (key != ERR)
			handle_key(t, key);
	}
}

/* --- start and end --- */

static void start_curses(tui *t, FILE *script)
{
	if (script) {
		const char *term = getenv("TERM");
		FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
		if (!out || !in || !newterm(term && *term ? term : "xterm", out, in))
			tui_fatal("script mode: cannot set up terminal '%s'", term ? term : "");
	} else if (!initscr()) {
		tui_fatal("cannot initialise the terminal");
	}
	curses_on = true;
	raw();
	noecho();
	nonl();
	if (!getenv("ESCDELAY"))
		set_escdelay(50);
	/* Home and End as tmux, screen and the Linux console send them, which
	 * some terminfo entries (xterm's) lack: unknown, they read as Esc. */
	define_key("\033[1~", KEY_HOME);
	define_key("\033[4~", KEY_END);
	define_key("\033[7~", KEY_HOME);
	define_key("\033[8~", KEY_END);
	ui_theme_init();
	mousemask(BUTTON1_CLICKED | BUTTON1_PRESSED, NULL);
	mouseinterval(0);
	layout(t);
}

int tb_cmd_tui(const tb_options *o)
{
	const char *script_path = getenv("TBISECT_SCRIPT");
	FILE *script = NULL;
	tb_err err;
	tui *t;
	int rc;

	t = calloc(1, sizeof *t);
	if (!t) {
		fprintf(stderr, "tbisect: out of memory\n");
		return TB_EXIT_BAD_INPUT;
	}
	/* Bad input is reported as in every mode, before the terminal matters. */
	t->rules = tb_ruleset_new();
	if (!t->rules) {
		free(t);
		tb_err_set(&err, NULL, "out of memory");
		return tb_die(&err);
	}
	clock_gettime(CLOCK_REALTIME, &t->loaded);
	if (tb_ruleset_add_standard(t->rules, o->rules_file, &err) < 0 ||
	    tb_session_open(&t->sess, o->paths[0], o->paths[1], &o->open, o->map_file, &err) < 0) {
		tb_ruleset_free(t->rules);
		free(t);
		return tb_die(&err);
	}
	if (script_path && *script_path) {
		script = fopen(script_path, "r");
		if (!script) {
			fprintf(stderr, "tbisect: %s: cannot open the script: %s\n", script_path, strerror(errno));
			tb_session_free(&t->sess);
			tb_ruleset_free(t->rules);
			free(t);
			return TB_EXIT_BAD_INPUT;
		}
	} else if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		fprintf(stderr, "tbisect: the interactive view needs a terminal on stdin and stdout; "
				"for a batch report use 'tbisect check REF CAND'\n");
		tb_session_free(&t->sess);
		tb_ruleset_free(t->rules);
		free(t);
		return TB_EXIT_BAD_INPUT;
	}
	t->opt = o;
	t->tol = o->tol;
	ui_metric_set_origin_factor(o->origin_factor);
	t->d.chan_pos = -1;
	if (grid_init(&t->g, t->sess.pairing) < 0) {
		fprintf(stderr, "tbisect: out of memory\n");
		grid_done(&t->g);
		tb_session_free(&t->sess);
		tb_ruleset_free(t->rules);
		free(t);
		return TB_EXIT_BAD_INPUT;
	}
	t->stack[0] = &heatmap_screen;
	t->depth = 1;
	if (o->no_history)
		tb_history_init_memory(&t->hist);
	t->job_is_pass = true;
	if (tui_start_job(t) < 0)
		tui_message(t, true, "cannot compare: %s", t->job_err);
	if (o->watch) {
		char msg[256];
		t->watch = ui_watch_new(o->paths, 2, WATCH_SETTLE, msg, sizeof msg);
		if (!t->watch)
			tui_message(t, true, "%s", msg);
	}
	the_tui = t;
	prompt_init();
	install_signals();
	atexit(ui_shutdown);
	start_curses(t, script);
	if (grid_select(&t->g, 0))
		t->g.cur_c = 0;
	loop(t, script);
	ui_shutdown();
	stop_job(t);
	tui_reload_cancel(t);
	rc = got_signal ? 128 + got_signal : t->exit_code;
	if (script)
		fclose(script);
	tui_drop_result(t);
	tb_history_free(&t->hist);
	tb_ruleset_free(t->rules);
	ui_watch_free(t->watch);
	free(t->d.head);
	grid_done(&t->g);
	tb_session_free(&t->sess);
	the_tui = NULL;
	free(t);
	return rc;
}
