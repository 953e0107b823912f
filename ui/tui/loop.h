/*
 * loop: the interactive view (`tbisect REF CAND`), started by the command
 * line once the rules, the tolerance file and both trees have loaded (so
 * bad input is reported as in every mode, before the terminal matters).
 * The loop owns the terminal, the screen stack and the one idempotent
 * shutdown; see tui/screen.h for the screens and tui/reload.h for the runs.
 */
#ifndef TB_UI_LOOP_H
#define TB_UI_LOOP_H

#include <stdbool.h>

#include "run/run.h"

typedef struct tui_opts {
	const tb_run_config *cfg; /* borrowed */
	bool watch;               /* --watch */
	bool no_history;          /* --no-history */
	bool no_mouse;            /* --no-mouse: leave the mouse to the terminal */
	const char *script;       /* keys and commands from this file, for exact screens; NULL: a terminal */
} tui_opts;

/* Show run (opened by tb_run_open, taken over) until the user quits;
 * returns the exit code. */
int tui_main(const tui_opts *o, tb_run *run);

#endif
