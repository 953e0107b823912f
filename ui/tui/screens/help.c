/*
 * The help screen, generated from the keymap (tui/keymap.c) and the
 * command table (tui/cmdline.c): nothing here lists a key or a command by
 * hand.  `tbisect --keys` prints the same tables for the man page.
 */
#include "config.h"

#include <stdio.h>

#include "tui/cmdline.h"
#include "tui/doc.h"
#include "tui/keymap.h"
#include "tui/screens/screens.h"
#include "tui/theme.h"

/* First document line shown. */
static int first_line;

static void fill(const view *v, doc *dc)
{
	char keys[128], prefix[160];

	(void)v;
	doc_line(dc, ui_attr(UI_TITLE), "keys");
	for (int a = 1; a < TB_ACT_COUNT; a++) {
		tb_action_keys((tb_action)a, keys, sizeof keys);
		snprintf(prefix, sizeof prefix, "  %-20s %-17s ", keys, tb_action_infos[a].name);
		doc_wrap(dc, 0, prefix, 41, tb_action_infos[a].help);
	}
	doc_line(dc, 0, "%s", "");
	doc_line(dc, ui_attr(UI_TITLE), "commands  (after ':', as is each key's action by its name, :causes; Tab completes)");
	for (size_t i = 0; i < ui_n_cmds; i++) {
		snprintf(prefix, sizeof prefix, "  %-38s ", ui_cmds[i].usage);
		doc_wrap(dc, 0, prefix, 41, ui_cmds[i].help);
	}
	doc_line(dc, 0, "%s", "");
	doc_line(dc, ui_attr(UI_TITLE), "cells");
	doc_line(dc, 0, "  . match   ~ close   X diverged   - missing (one side only)   ? not compared yet");
	doc_line(dc, 0, "  blank: not dumped.  The number is the chosen metric; the color its log scale.");
	doc_line(dc, 0, "  colors: %s (NO_COLOR=1 for none)", ui_theme_mode_name());
}

static void help_open(view *v, long cell)
{
	(void)v;
	(void)cell;
	first_line = 0;
}

static void help_draw(view *v, WINDOW *w)
{
	doc_screen_draw(v, w, "tbisect help   (Esc/q back, Up/Down scroll)", fill, first_line);
}

static ui_ret help_action(view *v, WINDOW *w, tb_action a)
{
	return doc_screen_action(v, w, a, fill, &first_line);
}

const screen_ops help_screen = {
	.name = "help",
	.hints = doc_screen_hints,
	.open = help_open,
	.draw = help_draw,
	.action = help_action,
};
