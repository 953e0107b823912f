/*
 * The help screen, generated from the keymap (ui/keymap.c) and the command
 * table (ui/cmdline.c): nothing here lists a key or a command by hand.
 * `tbisect --keys` prints the same tables for the man page.
 */
#include "config.h"

#include <stdio.h>

#include "cli/commands.h"
#include "tui/doc.h"
#include "tui/theme.h"
#include "tui/tui.h"

static void help_lines(tui *t, doc *dc)
{
	char keys[128];

	doc_line(dc, ui_attr(UI_TITLE), "keys");
	for (int a = 1; a < TB_ACT_COUNT; a++) {
		tb_action_keys((tb_action)a, keys, sizeof keys);
		char prefix[160];
		snprintf(prefix, sizeof prefix, "  %-20s %-17s ", keys, tb_action_infos[a].name);
		doc_wrap(dc, 0, prefix, 41, tb_action_infos[a].help);
	}
	doc_line(dc, 0, "%s", "");
	doc_line(dc, ui_attr(UI_TITLE), "commands  (after ':'; Tab completes commands, cells and tensor names)");
	for (size_t i = 0; i < ui_n_cmds; i++) {
		char prefix[160];
		snprintf(prefix, sizeof prefix, "  %-38s ", ui_cmds[i].usage);
		doc_wrap(dc, 0, prefix, 41, ui_cmds[i].help);
	}
	doc_line(dc, 0, "%s", "");
	doc_line(dc, ui_attr(UI_TITLE), "cells");
	doc_line(dc, 0, "  . match   ~ close   X diverged   - missing (one side only)   ? not compared yet");
	doc_line(dc, 0, "  blank: not dumped.  The number is the chosen metric; the color its log scale.");
	doc_line(dc, 0, "  colors: %s (NO_COLOR=1 for none)", ui_theme_mode_name());
	(void)t;
}

int tb_cmd_keys(void)
{
	char keys[128];

	for (int a = 1; a < TB_ACT_COUNT; a++) {
		tb_action_keys((tb_action)a, keys, sizeof keys);
		printf("key\t%s\t%s\t%s\n", keys, tb_action_infos[a].name, tb_action_infos[a].help);
	}
	for (size_t i = 0; i < ui_n_cmds; i++)
		printf("command\t%s\t%s\n", ui_cmds[i].usage, ui_cmds[i].help);
	return fflush(stdout) == 0 ? TB_EXIT_OK : TB_EXIT_BAD_INPUT;
}

static void help_draw(tui *t, WINDOW *w)
{
	doc_screen_draw(t, w, "tbisect help   (Esc/q back, Up/Down scroll)", help_lines, t->help_scroll);
}

static unsigned help_action(tui *t, tb_action a)
{
	return doc_screen_action(t, a, help_lines, &t->help_scroll);
}

const screen_ops help_screen = {
	.name = "help",
	.draw = help_draw,
	.action = help_action,
};
