/*
 * The loop of the interactive view: input (curses keys, or a script of keys
 * and commands for golden screens), resize, polling the runs, drawing with
 * wnoutrefresh and one doupdate per iteration; the screen stack, which only
 * this file touches; the signal handlers and the one idempotent shutdown.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tui/cmdline.h"
#include "tui/draw.h"
#include "compare/scale.h"
#include "tui/prompt.h"
#include "tui/reload.h"
#include "tui/screens/screens.h"
#include "tui/theme.h"
#include "tui/loop.h"

/* Smallest screen the layout fits in. */
#define MIN_LINES 12
#define MIN_COLS 50
/* How long the loop waits for a key before it polls the runs again (ms),
 * and while a change of the trees is settling (the reload then starts
 * close to the end of the settle delay). */
#define TICK_MS 100
#define TICK_SETTLE_MS 20
/* --watch reloads once no dump file has changed for this long (s), so a
 * file still being written is not read half-way. */
#define WATCH_SETTLE 0.3
#define MAX_DEPTH 8
#define WHEEL_LINES 3

static const screen_ops *const screens[SCREEN_COUNT] = {
#define TB_SCREEN_OPS(id, name, action) [SCREEN_##id] = &name##_screen,
	TB_SCREEN_LIST(TB_SCREEN_OPS)
#undef TB_SCREEN_OPS
};

/* The screen an action opens, or SCREEN_NONE. */
static screen_id screen_of(tb_action a)
{
#define TB_SCREEN_OPENER(id, name, action) \
	if (a == (action) && (action) != TB_ACT_NONE) \
		return SCREEN_##id;
	TB_SCREEN_LIST(TB_SCREEN_OPENER)
#undef TB_SCREEN_OPENER
	return SCREEN_NONE;
}

typedef struct loop {
	view v;
	const screen_ops *stack[MAX_DEPTH]; /* stack[0] is the heatmap */
	int depth;
	WINDOW *wmain, *wstatus;
	int lines, cols;
	bool too_small;
	bool quit;
	bool mouse_on; /* mouse reports are on */
	bool script;   /* keys come from a script, not a terminal */
} loop;

/* curses is initialised and the terminal not yet given back. */
static bool curses_on;
/* Set by SIGINT, SIGTERM, SIGHUP: the loop quits cleanly. */
static volatile sig_atomic_t got_signal;

static void ui_shutdown(void)
{
	if (!curses_on)
		return;
	curses_on = false;
	prompt_close();
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

/* Leave curses, print one line, exit 2: for errors the view cannot show. */
static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fatal(const char *fmt, ...)
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

static void layout(loop *l);

static const screen_ops *top(const loop *l)
{
	return l->stack[l->depth - 1];
}

static void push(loop *l, screen_id id, long cell)
{
	const screen_ops *s = screens[id];

	if (top(l) == s || l->depth == MAX_DEPTH)
		return;
	if (s->open)
		s->open(&l->v, cell);
	l->stack[l->depth++] = s;
}

/* The screens above the heatmap follow a replaced result; the first that
 * cannot closes, with every screen above it. */
static void follow(loop *l)
{
	for (int k = 1; k < l->depth; k++) {
		if (!l->stack[k]->follow)
			continue;
		if (l->stack[k]->follow(&l->v).flags & UI_BACK) {
			l->depth = k;
			return;
		}
	}
}

/* Mouse reports on or off as the view asks (--no-mouse, :set mouse): off,
 * the terminal's own selection works. */
static void apply_mouse(loop *l)
{
	if (!curses_on || l->mouse_on == l->v.mouse)
		return;
	l->mouse_on = l->v.mouse;
	mousemask(l->mouse_on ? BUTTON1_CLICKED | BUTTON1_PRESSED | BUTTON4_PRESSED | BUTTON5_PRESSED : 0, NULL);
}

/* Do what a handler asked: the only place the screen stack changes. */
static void act(loop *l, ui_ret r)
{
	if (r.flags & UI_FATAL)
		fatal("%s", l->v.msg);
	if (r.flags & UI_QUIT)
		l->quit = true;
	if (r.flags & UI_HOME)
		l->depth = 1;
	if (r.flags & UI_FOLLOW)
		follow(l);
	if ((r.flags & UI_BACK) && l->depth > 1)
		l->depth--;
	if (r.open != SCREEN_NONE)
		push(l, r.open, r.cell);
	l->v.on_grid = l->depth == 1;
	apply_mouse(l);
}

/* The metric named (or the next one, for m): every screen colors by it. */
static ui_ret set_metric(view *v, const char *name)
{
	int m = *name ? tb_scale_find(name) : (v->metric + 1) % (int)tb_n_scales;
	char names[160] = "";

	if (m < 0) {
		for (size_t i = 0; i < tb_n_scales; i++)
			snprintf(names + strlen(names), sizeof names - strlen(names), " %s", tb_scales[i].name);
		view_message(v, true, "metric: '%s' is not one of%s", name, names);
		return ui_flags(0);
	}
	v->metric = m;
	view_message(v, false, "metric: %s", tb_scales[m].name);
	return ui_flags(0);
}

static ui_ret open_screen(screen_id id)
{
	ui_ret r = {.open = id, .cell = -1};

	return r;
}

/* Ctrl-Z: the terminal is in raw mode, so the key reaches us instead of
 * stopping the job.  Give the terminal back, stop as the shell expects
 * (SIGTSTP at its default action), and on fg take the screen again at the
 * terminal's size then. */
static void suspend(loop *l)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL}, old;

	if (l->script) {
		view_message(&l->v, false, "suspend: not in script mode");
		return;
	}
	def_prog_mode();
	endwin();
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGTSTP, &dfl, &old);
	raise(SIGTSTP);
	sigaction(SIGTSTP, &old, NULL);
	reset_prog_mode();
	layout(l);
}

/* The wheel scrolls whatever screen is on top as its Up and Down keys do,
 * a few lines a notch. */
static ui_ret wheel(loop *l, tb_action a)
{
	ui_ret r = ui_flags(0);

	for (int k = 0; k < WHEEL_LINES && !r.flags && r.open == SCREEN_NONE; k++)
		r = top(l)->action(&l->v, l->wmain, a);
	return r;
}

/* Actions every screen shares; the rest go to the screen on top.  arg: the
 * argument of a `:` command that stands for the action, or "". */
static ui_ret dispatch(loop *l, tb_action a, const char *arg)
{
	MEVENT ev;

	/* Too small, the screen says so and q quits; Ctrl-L still repaints it
	 * whole (whatever else wrote on the terminal goes). */
	if (l->too_small && a != TB_ACT_REDRAW)
		return ui_flags(a == TB_ACT_QUIT || a == TB_ACT_INTERRUPT ? UI_QUIT : 0);
	switch (a) {
	case TB_ACT_NONE: return ui_flags(0);
	case TB_ACT_INTERRUPT: return ui_flags(UI_QUIT);
	case TB_ACT_HISTORY:
		if (!strcmp(arg, "clear"))
			return ui_flags(reload_history_clear(&l->v));
		if (*arg) {
			view_message(&l->v, true, "usage: history [clear]");
			return ui_flags(0);
		}
		return open_screen(SCREEN_HISTORY);
	case TB_ACT_RELOAD: return ui_flags(reload_start(&l->v));
	case TB_ACT_PREV_STEP: return ui_flags(reload_step(&l->v, -1));
	case TB_ACT_NEXT_STEP: return ui_flags(reload_step(&l->v, 1));
	case TB_ACT_TOWER: return ui_flags(reload_tower(&l->v, NULL, true));
	case TB_ACT_METRIC: return set_metric(&l->v, arg);
	case TB_ACT_PROMPT:
	case TB_ACT_SEARCH:
		prompt_open(&l->v, a == TB_ACT_PROMPT ? ':' : '/', "");
		return ui_flags(0);
	case TB_ACT_GOTO_POS:
		if (!top(l)->command) {
			view_message(&l->v, true, "go to position: in the detail screen (Enter opens a cell)");
			return ui_flags(0);
		}
		/* p: the command's word typed, the number is the user's */
		if (!*arg) {
			prompt_open(&l->v, ':', "pos ");
			return ui_flags(0);
		}
		return top(l)->command(&l->v, l->wmain, a, arg);
	case TB_ACT_REDRAW:
		clearok(curscr, TRUE);
		return ui_flags(0);
	case TB_ACT_SUSPEND: suspend(l); return ui_flags(0);
	case TB_ACT_CLICK:
		if (getmouse(&ev) != OK)
			return ui_flags(0);
		if (ev.bstate & (BUTTON4_PRESSED | BUTTON5_PRESSED))
			return wheel(l, ev.bstate & BUTTON4_PRESSED ? TB_ACT_UP : TB_ACT_DOWN);
		if (!(ev.bstate & (BUTTON1_CLICKED | BUTTON1_PRESSED | BUTTON1_RELEASED)))
			return ui_flags(0);
		return top(l)->click ? top(l)->click(&l->v, l->wmain, ev.y, ev.x) : ui_flags(0);
	default:
		if (screen_of(a) != SCREEN_NONE)
			return open_screen(screen_of(a));
		return top(l)->action(&l->v, l->wmain, a);
	}
}

/* Act on what a command line or prompt returned, then on the action it
 * stands for. */
static void act_call(loop *l, ui_ret r, const cmd_call *call)
{
	act(l, r);
	if (call->action != TB_ACT_NONE)
		act(l, dispatch(l, call->action, call->arg));
}

static void layout(loop *l)
{
	getmaxyx(stdscr, l->lines, l->cols);
	l->too_small = l->lines < MIN_LINES || l->cols < MIN_COLS;
	if (l->wmain)
		delwin(l->wmain);
	if (l->wstatus)
		delwin(l->wstatus);
	l->wmain = newwin(l->lines > 1 ? l->lines - 1 : 1, l->cols, 0, 0);
	l->wstatus = newwin(1, l->cols, l->lines > 1 ? l->lines - 1 : 0, 0);
	if (!l->wmain || !l->wstatus)
		fatal("cannot create curses windows for a %dx%d terminal", l->cols, l->lines);
	keypad(l->wstatus, TRUE);
	wtimeout(l->wstatus, TICK_MS);
	clearok(curscr, TRUE);
}

/* The message, or the key hints of the screen on top. */
static void draw_hints(loop *l)
{
	const screen_hint *h = top(l)->hints;
	WINDOW *w = l->wstatus;
	int x = 0;

	if (l->v.msg[0]) {
		ui_put(w, 0, 0, ui_attr(l->v.msg_err ? UI_ERROR : UI_HEADER), "%s", l->v.msg);
		return;
	}
	for (; h && h->action != TB_ACT_NONE && x < l->cols; h++) {
		char keys[64];
		tb_action_keys(h->action, keys, sizeof keys);
		*strchrnul(keys, ' ') = '\0';
		if (h->keys)
			snprintf(keys, sizeof keys, "%s", h->keys);
		ui_put(w, 0, x, ui_attr(UI_TITLE), "%s", keys);
		x += (int)strlen(keys);
		ui_put(w, 0, x, ui_attr(UI_DIM), " %s  ", h->label);
		x += (int)strlen(h->label) + 3;
	}
}

static void draw(loop *l)
{
	werase(l->wmain);
	werase(l->wstatus);
	if (l->too_small) {
		ui_put(l->wmain, 0, 0, ui_attr(UI_ERROR), "terminal too small: %dx%d", l->cols, l->lines);
		ui_put(l->wmain, 1, 0, 0, "tbisect needs %dx%d:", MIN_COLS, MIN_LINES);
		ui_put(l->wmain, 2, 0, 0, "enlarge the window,");
		ui_put(l->wmain, 3, 0, 0, "or use 'tbisect check'.");
		ui_put(l->wmain, 4, 0, 0, "q quits");
	} else {
		top(l)->draw(&l->v, l->wmain);
	}
	wnoutrefresh(l->wmain);
	if (prompt_is_open()) {
		prompt_draw(l->wstatus, l->wmain);
	} else {
		/* Too small, no screen takes keys: its hints would be stale. */
		if (!l->too_small)
			draw_hints(l);
		curs_set(0);
	}
	wnoutrefresh(l->wstatus);
}

static void handle_key(loop *l, int key)
{
	cmd_call call;

	if (key == KEY_RESIZE) {
		layout(l);
		return;
	}
	if (prompt_is_open()) {
		ui_ret r = prompt_key(&l->v, key, &call);
		act_call(l, r, &call);
		return;
	}
	l->v.msg[0] = '\0';
	act(l, dispatch(l, tb_key_action(key), ""));
}

/* Poll the runs; true when the screen changed. */
static bool poll_runs(loop *l)
{
	unsigned flags = reload_poll(&l->v);

	act(l, ui_flags(flags));
	return flags & UI_REDRAW;
}

/* --- script mode: keys and commands from a file, for exact screens --- */

/* One step of the script: wait for the comparison, and under --watch for
 * the reload of any change it has seen (files may have changed while the
 * script was read), then a line of keys, a `:` command or `resize
 * COLSxLINES`.  False at the end of the script. */
static bool script_step(loop *l, FILE *script)
{
	char line[1024], *save = NULL;
	int cols, lines;

	poll_runs(l);
	while (reload_busy(&l->v) || reload_watch_pending(&l->v)) {
		if (!poll_runs(l))
			usleep(2000);
	}
	draw(l);
	doupdate();
	if (!fgets(line, sizeof line, script))
		return false;
	line[strcspn(line, "\n")] = '\0';
	if (line[0] == '#' || line[0] == '\0')
		return true;
	if (line[0] == ':') {
		cmd_call call;
		ui_ret r = cmdline_run(&l->v, line + 1, &call);
		act_call(l, r, &call);
	} else if (sscanf(line, "resize %dx%d", &cols, &lines) == 2) {
		resizeterm(lines, cols);
		layout(l);
	} else {
		for (char *tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
			int key = tb_key_parse(tok);
			if (key < 0)
				fatal("script: unknown key '%s'", tok);
			handle_key(l, key);
		}
	}
	return true;
}

static void run_loop(loop *l, FILE *script)
{
	bool dirty = true;

	while (!l->quit && !got_signal) {
		if (script) {
			if (!script_step(l, script))
				break;
			continue;
		}
		dirty |= poll_runs(l);
		dirty |= reload_busy(&l->v);
		if (dirty) {
			draw(l);
			doupdate();
		}
		wtimeout(l->wstatus, l->v.watch && l->v.watch_state == UI_WATCH_SETTLING ? TICK_SETTLE_MS : TICK_MS);
		int key = wgetch(l->wstatus);
		dirty = key != ERR;
		if (key != ERR)
			handle_key(l, key);
	}
}

/* --- start and end --- */

static void start_curses(loop *l, FILE *script)
{
	if (script) {
		const char *term = getenv("TERM");
		FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
		if (!out || !in || !newterm(term && *term ? term : "xterm", out, in))
			fatal("script mode: cannot set up terminal '%s'", term ? term : "");
	} else {
		const char *term = getenv("TERM");
		char *cup;
		/* newterm, not initscr: an unknown TERM is an error here, not an exit inside curses. */
		if (!newterm(NULL, stdout, stdin))
			fatal("the terminal '%s' is unknown to curses; for a batch report use 'tbisect check REF CAND'",
			      term && *term ? term : "(TERM unset)");
		curses_on = true;
		/* Without cursor addressing (dumb) curses draws nothing: a blank view taking keys. */
		cup = tigetstr("cup");
		if (!cup || cup == (char *)-1)
			fatal("the terminal '%s' cannot move the cursor, so the interactive view cannot draw; "
			      "for a batch report use 'tbisect check REF CAND'",
			      term && *term ? term : "(TERM unset)");
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
	mouseinterval(0);
	apply_mouse(l);
	layout(l);
}

/* The script, or the terminal check; -1 with the error printed. */
static int open_input(const tui_opts *o, FILE **script)
{
	*script = NULL;
	if (o->script) {
		*script = fopen(o->script, "r");
		if (!*script) {
			fprintf(stderr, "tbisect: %s: cannot open the script: %s\n", o->script, strerror(errno));
			return -1;
		}
	} else if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		fprintf(stderr, "tbisect: the interactive view needs a terminal on stdin and stdout; "
				"for a batch report use 'tbisect check REF CAND'\n");
		return -1;
	}
	return 0;
}

int tui_main(const tui_opts *o, tb_run *run)
{
	FILE *script;
	loop *l;
	view *v;
	int rc;

	if (open_input(o, &script) < 0) {
		tb_run_done(run);
		return TB_EXIT_BAD_INPUT;
	}
	l = calloc(1, sizeof *l);
	if (!l) {
		fprintf(stderr, "tbisect: out of memory\n");
		tb_run_done(run);
		if (script)
			fclose(script);
		return TB_EXIT_BAD_INPUT;
	}
	v = &l->v;
	v->cfg = o->cfg;
	v->no_history = o->no_history;
	v->mouse = !o->no_mouse;
	v->tol = o->cfg->opts.tol;
	tb_run_move(&v->run, run);
	tb_scale_set_origin_factor(o->cfg->opts.origin_factor);
	if (grid_init(&v->g, view_pairing(v)) < 0)
		fatal("out of memory laying out the heatmap");
	l->stack[0] = &heatmap_screen;
	l->depth = 1;
	v->on_grid = true;
	if (o->no_history)
		tb_history_init_memory(&v->hist);
	act(l, ui_flags(reload_first(v)));
	if (v->run.map_warning[0])
		view_message(v, true, "%s", v->run.map_warning);
	if (o->watch) {
		const char *paths[2] = {o->cfg->opts.ref_path, o->cfg->opts.cand_path};
		char msg[256];
		v->watch = ui_watch_new(paths, 2, WATCH_SETTLE, msg, sizeof msg);
		if (!v->watch)
			view_message(v, true, "%s", msg);
	}
	prompt_init();
	install_signals();
	atexit(ui_shutdown);
	l->script = script != NULL;
	start_curses(l, script);
	if (grid_select(&v->g, 0))
		v->g.cur_c = 0;
	/* A partial pairing is the first thing to fix: show what did not pair. */
	if (v->run.partial)
		act(l, open_screen(SCREEN_UNPAIRED));
	run_loop(l, script);
	ui_shutdown();
	rc = got_signal ? 128 + got_signal : v->exit_code;
	if (script)
		fclose(script);
	reload_done(v);
	free(v->applied_map);
	tb_history_done(&v->hist);
	ui_watch_free(v->watch);
	grid_done(&v->g);
	free(l);
	return rc;
}
