/*
 * prompt: the `:` and `/` prompt, GNU readline's callback API run inside
 * curses.  Curses reads every key; while the prompt is open each one is
 * handed to rl_callback_read_char() through rl_getc_function, and
 * rl_redisplay_function draws the line in the status window.  Readline
 * never touches the terminal itself: no signal handlers, no terminal
 * preparation, no environment changes.  History and Tab completion of
 * commands, cell and tensor names come with it.  An accepted `:` line runs
 * through cmdline; a `/` line searches the view.
 */
#ifndef TB_UI_PROMPT_H
#define TB_UI_PROMPT_H

#include <curses.h>
#include <stdbool.h>

#include "tui/cmdline.h"
#include "tui/screen.h"
#include "tui/view.h"

void prompt_init(void);
/* kind: ':' command, '/' search; text: the line typed so far ("pos "). */
void prompt_open(view *v, char kind, const char *text);
bool prompt_is_open(void);
/* Feed one curses key; an accepted command line may leave a call for the
 * loop to dispatch in *call. */
ui_ret prompt_key(view *v, int key, cmd_call *call);
/* The line in the status window, and the last ambiguous completion on the
 * main window's last line. */
void prompt_draw(WINDOW *status, WINDOW *main);
void prompt_close(void);

#endif
