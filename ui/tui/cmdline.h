/*
 * cmdline: the `:` commands, as one table (name, usage, help, what the
 * argument completes, and either a handler or the action it stands for).
 * A command that is also a key (:help, :history, :reload, :quit, :metric)
 * names its action: the loop dispatches it through the action table as if
 * the key was pressed, with the argument.  The help screen, the man page's
 * key list and the prompt's completion read the same table.
 */
#ifndef TB_UI_CMDLINE_H
#define TB_UI_CMDLINE_H

#include <stddef.h>

#include "tui/keymap.h"
#include "tui/screen.h"
#include "tui/view.h"

typedef enum cmd_completion { CMP_NONE, CMP_CELL, CMP_METRIC, CMP_TOL, CMP_FILE, CMP_SET } cmd_completion;

typedef struct ui_cmd {
	const char *name;
	const char *usage;
	const char *help;
	ui_ret (*exec)(view *v, char *args); /* NULL: dispatch .action */
	tb_action action;
	cmd_completion complete;
} ui_cmd;

extern const ui_cmd ui_cmds[];
extern const size_t ui_n_cmds;

/* What a command line asks of the loop besides its flags: an action to
 * dispatch with an argument (TB_ACT_NONE: none). */
typedef struct cmd_call {
	tb_action action;
	char arg[256];
} cmd_call;

/* The action a word names whole (tb_action_infos' names), or TB_ACT_NONE:
 * a key's action typed at ':' (":causes"). */
tb_action cmdline_action(const char *word);

/* Run one command line: a command of ui_cmds, or an action by its name. */
ui_ret cmdline_run(view *v, const char *line, cmd_call *call);

#endif
