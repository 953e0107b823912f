/*
 * The `:` and `/` prompt: GNU readline's callback API run inside curses.
 * Curses reads every key; in prompt mode each one is handed to
 * rl_callback_read_char() through rl_getc_function, and
 * rl_redisplay_function draws the line in the status window.  Readline
 * never touches the terminal itself: no signal handlers, no terminal
 * preparation, no environment changes.  History and Tab completion of
 * commands, cell and tensor names come with it.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "tui/metric.h"
#include "tui/theme.h"
#include "tui/tui.h"

/* Readline's callbacks take no context: the view they act on, */
static tui *rl_view;
/* the key being handed to readline, */
static int rl_key = EOF;
/* ':' (command) or '/' (search), */
static char rl_kind;
/* and what the accepted line asked the loop to do. */
static unsigned rl_flags;

static int getc_cb(FILE *f)
{
	int k = rl_key;

	(void)f;
	rl_key = EOF;
	return k;
}

static int no_input_cb(void)
{
	return 0;
}

static void redisplay_cb(void)
{
	if (rl_view)
		prompt_draw(rl_view);
}

static void run_search(tui *t, const char *line)
{
	char why[128];
	int found;

	if (*line)
		snprintf(t->search, sizeof t->search, "%s", line);
	if (!t->search[0])
		return;
	found = tui_search(t, t->search, 1, why, sizeof why);
	if (found > 0)
		t->depth = 1;
	else if (found < 0)
		tui_message(t, true, "search: bad regular expression '%s': %s", t->search, why);
	else
		tui_message(t, true, "search: nothing matches '%s'", t->search);
}

static void line_cb(char *line)
{
	tui *t = rl_view;

	rl_callback_handler_remove();
	t->prompt_on = false;
	t->completions[0] = '\0';
	if (line) {
		if (*line)
			add_history(line);
		if (rl_kind == ':')
			rl_flags |= cmdline_run(t, line);
		else
			run_search(t, line);
		free(line);
	}
	rl_flags |= UI_REDRAW;
}

/* Candidate k for a completion kind, or NULL past the last. */
static const char *candidate(cmd_completion kind, size_t k, char *buf, size_t size)
{
	const tb_pairing *p = rl_view->sess.pairing;
	static const char *const tol_keys[] = {"atol=", "rtol=", "diverge=", "max_kl="};

	switch (kind) {
	case CMP_METRIC: return k < ui_n_metrics ? ui_metrics[k].name : NULL;
	case CMP_TOL: return k < 4 ? tol_keys[k] : NULL;
	case CMP_CELL:
		if (k < p->n_pairs) {
			tb_cell_name(&p->pairs[k].cell, buf, size);
			return buf;
		}
		k -= p->n_pairs;
		if (k < p->n_pairs)
			return p->pairs[k].ref ? p->pairs[k].ref->name : "";
		k -= p->n_pairs;
		if (k < p->n_pairs)
			return p->pairs[k].cand ? p->pairs[k].cand->name : "";
		return NULL;
	default: return k < ui_n_cmds ? ui_cmds[k].name : NULL;
	}
}

/* The kind of the word being completed (CMP_NONE: command names). */
static cmd_completion gen_kind;

static char *generator(const char *text, int state)
{
	static size_t k;
	size_t len = strlen(text);
	const char *c;
	char buf[128];

	if (state == 0)
		k = 0;
	while ((c = candidate(gen_kind, k++, buf, sizeof buf)))
		if (*c && !strncmp(c, text, len))
			return strdup(c);
	return NULL;
}

static char **complete_cb(const char *text, int start, int end)
{
	char word[64];
	size_t n;

	(void)end;
	rl_attempted_completion_over = 1;
	gen_kind = CMP_NONE;
	if (rl_kind == '/') {
		gen_kind = CMP_CELL;
	} else if (start > 0) {
		n = strcspn(rl_line_buffer, " ");
		snprintf(word, sizeof word, "%.*s", (int)n, rl_line_buffer);
		gen_kind = CMP_FILE;
		for (size_t i = 0; i < ui_n_cmds; i++)
			if (!strcmp(ui_cmds[i].name, word))
				gen_kind = ui_cmds[i].complete;
		if (gen_kind == CMP_FILE) {
			rl_attempted_completion_over = 0;
			return NULL;
		}
		if (gen_kind == CMP_NONE)
			return NULL;
		if (gen_kind == CMP_TOL)
			rl_completion_append_character = '\0';
	}
	return rl_completion_matches(text, generator);
}

static void display_matches_cb(char **matches, int num, int max_len)
{
	tui *t = rl_view;
	size_t len;

	(void)max_len;
	len = (size_t)snprintf(t->completions, sizeof t->completions, "%d matches:", num);
	for (int i = 1; i <= num && len < sizeof t->completions; i++)
		len += (size_t)snprintf(t->completions + len, sizeof t->completions - len, " %s", matches[i]);
	prompt_draw(t);
}

void prompt_init(void)
{
	static FILE *devnull;

	rl_readline_name = "tbisect";
	rl_catch_signals = 0;
	rl_catch_sigwinch = 0;
	rl_change_environment = 0;
	rl_prep_term_function = NULL;
	rl_deprep_term_function = NULL;
	rl_getc_function = getc_cb;
	rl_input_available_hook = no_input_cb;
	rl_redisplay_function = redisplay_cb;
	rl_attempted_completion_function = complete_cb;
	rl_completion_display_matches_hook = display_matches_cb;
	/* Readline must not write to the terminal curses owns. */
	if (!devnull)
		devnull = fopen("/dev/null", "w");
	if (devnull)
		rl_outstream = devnull;
	rl_initialize();
	rl_variable_bind("bell-style", "none");
	rl_variable_bind("show-all-if-ambiguous", "on");
	rl_variable_bind("enable-bracketed-paste", "off");
	using_history();
}

void prompt_open(tui *t, char kind)
{
	rl_view = t;
	rl_kind = kind;
	t->prompt_on = true;
	t->completions[0] = '\0';
	using_history();
	rl_callback_handler_install(kind == ':' ? ":" : "/", line_cb);
}

void prompt_close(tui *t)
{
	if (!t->prompt_on)
		return;
	rl_callback_handler_remove();
	t->prompt_on = false;
	t->completions[0] = '\0';
}

/* Keys curses has already decoded go to the readline command they mean. */
static bool edit_key(int key)
{
	switch (key) {
	case KEY_LEFT: rl_backward_char(1, 0); break;
	case KEY_RIGHT: rl_forward_char(1, 0); break;
	case KEY_HOME: rl_beg_of_line(1, 0); break;
	case KEY_END: rl_end_of_line(1, 0); break;
	case KEY_UP: rl_get_previous_history(1, 0); break;
	case KEY_DOWN: rl_get_next_history(1, 0); break;
	case KEY_DC: rl_delete(1, 0); break;
	default: return false;
	}
	return true;
}

unsigned prompt_key(tui *t, int key)
{
	rl_view = t;
	rl_flags = UI_REDRAW;
	if (key == 27 || key == 3) {
		prompt_close(t);
		return UI_REDRAW;
	}
	if (edit_key(key))
		return rl_flags;
	if (key == KEY_BACKSPACE)
		key = 127;
	else if (key == KEY_ENTER)
		key = '\r';
	else if (key >= KEY_MIN)
		return 0;
	rl_key = key;
	rl_callback_read_char();
	return rl_flags;
}

void prompt_draw(tui *t)
{
	WINDOW *w = t->wstatus;
	int width = t->cols - 2, point = rl_point, off;

	if (t->completions[0]) {
		int y = getmaxy(t->wmain) - 1;
		wmove(t->wmain, y, 0);
		wclrtoeol(t->wmain);
		ui_put(t->wmain, y, 0, ui_attr(UI_DIM), "%s", t->completions);
		wnoutrefresh(t->wmain);
	}
	if (width < 1)
		width = 1;
	off = point >= width ? point - width + 1 : 0;
	werase(w);
	ui_put(w, 0, 0, ui_attr(UI_TITLE), "%c", rl_kind);
	ui_put(w, 0, 1, 0, "%.*s", width, rl_line_buffer + (off < rl_end ? off : rl_end));
	wmove(w, 0, 1 + point - off);
	curs_set(1);
	wnoutrefresh(w);
}
