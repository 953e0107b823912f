#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "tui/draw.h"
#include "compare/scale.h"
#include "tui/prompt.h"
#include "tui/theme.h"

/* Readline's callbacks take no context: the view they act on, */
static view *rl_view;
/* the key being handed to readline, */
static int rl_key = EOF;
/* ':' (command) or '/' (search), */
static char rl_kind;
/* what the accepted line asked the loop to do, */
static ui_ret rl_ret;
static cmd_call *rl_call;
/* whether the prompt is open, */
static bool open_now;
/* the windows it draws in, */
static WINDOW *rl_status, *rl_main;
/* and the last ambiguous completion, shown above the prompt. */
static char completions[512];

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
	if (rl_status)
		prompt_draw(rl_status, rl_main);
}

static unsigned run_search(view *v, const char *line)
{
	char why[128];
	int found;

	if (*line)
		snprintf(v->search, sizeof v->search, "%s", line);
	if (!v->search[0])
		return 0;
	found = view_search(v, v->search, 1, why, sizeof why);
	if (found > 0)
		return UI_HOME;
	if (found < 0)
		view_message(v, true, "search: bad regular expression '%s': %s", v->search, why);
	else
		view_message(v, true, "search: nothing matches '%s'", v->search);
	return 0;
}

static void line_cb(char *line)
{
	view *v = rl_view;

	rl_callback_handler_remove();
	open_now = false;
	completions[0] = '\0';
	if (line) {
		if (*line)
			add_history(line);
		if (rl_kind == ':')
			rl_ret = cmdline_run(v, line, rl_call);
		else
			rl_ret.flags |= run_search(v, line);
		free(line);
	}
}

/* Candidate k for a completion kind, or NULL past the last. */
static const char *candidate(cmd_completion kind, size_t k, char *buf, size_t size)
{
	const tb_pairing *p = view_pairing(rl_view);
	static const char *const tol_keys[] = {"atol=", "rtol=", "diverge=", "max_kl="};
	static const char *const set_keys[] = {"mouse", "nomouse"};

	switch (kind) {
	case CMP_METRIC: return k < tb_n_scales ? tb_scales[k].name : NULL;
	case CMP_TOL: return k < 4 ? tol_keys[k] : NULL;
	case CMP_SET: return k < 2 ? set_keys[k] : NULL;
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
	default:
		if (k < ui_n_cmds)
			return ui_cmds[k].name;
		/* then the actions no command stands for (p's is :pos) */
		k -= ui_n_cmds;
		if (k + 1 >= TB_ACT_COUNT)
			return NULL;
		for (size_t i = 0; i < ui_n_cmds; i++)
			if (ui_cmds[i].action == (tb_action)(k + 1) || !strcmp(ui_cmds[i].name, tb_action_infos[k + 1].name))
				return "";
		return cmdline_action(tb_action_infos[k + 1].name) != TB_ACT_NONE ? tb_action_infos[k + 1].name : "";
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
	size_t len;

	(void)max_len;
	len = (size_t)snprintf(completions, sizeof completions, "%d matches:", num);
	for (int i = 1; i <= num && len < sizeof completions; i++)
		len += (size_t)snprintf(completions + len, sizeof completions - len, " %s", matches[i]);
	redisplay_cb();
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

void prompt_open(view *v, char kind, const char *text)
{
	rl_view = v;
	rl_kind = kind;
	open_now = true;
	completions[0] = '\0';
	using_history();
	rl_callback_handler_install(kind == ':' ? ":" : "/", line_cb);
	rl_insert_text(text);
}

bool prompt_is_open(void)
{
	return open_now;
}

void prompt_close(void)
{
	if (!open_now)
		return;
	rl_callback_handler_remove();
	open_now = false;
	completions[0] = '\0';
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

ui_ret prompt_key(view *v, int key, cmd_call *call)
{
	rl_view = v;
	rl_call = call;
	call->action = TB_ACT_NONE;
	rl_ret = ui_flags(0);
	if (key == 27 || key == 3) {
		prompt_close();
		return rl_ret;
	}
	if (edit_key(key))
		return rl_ret;
	if (key == KEY_BACKSPACE)
		key = 127;
	else if (key == KEY_ENTER)
		key = '\r';
	else if (key >= KEY_MIN)
		return ui_flags(0);
	rl_key = key;
	rl_callback_read_char();
	return rl_ret;
}

void prompt_draw(WINDOW *status, WINDOW *main)
{
	int width = getmaxx(status) - 2, point = rl_point, off;

	rl_status = status;
	rl_main = main;
	if (completions[0]) {
		int y = getmaxy(main) - 1;
		wmove(main, y, 0);
		wclrtoeol(main);
		ui_put(main, y, 0, ui_attr(UI_DIM), "%s", completions);
		wnoutrefresh(main);
	}
	if (width < 1)
		width = 1;
	off = point >= width ? point - width + 1 : 0;
	werase(status);
	ui_put(status, 0, 0, ui_attr(UI_TITLE), "%c", rl_kind);
	ui_put(status, 0, 1, 0, "%.*s", width, rl_line_buffer + (off < rl_end ? off : rl_end));
	wmove(status, 0, 1 + point - off);
	curs_set(1);
	wnoutrefresh(status);
}
