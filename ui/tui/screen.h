/*
 * screen: the interface between the loop and its screens (TB_SCREEN_LIST).  A screen is a screen_ops table; each
 * keeps its own state in its file.  Handlers never touch the screen stack
 * nor call another screen: they return a ui_ret saying what the loop
 * should do (redraw, go back, go home to the heatmap, open a screen on a
 * cell, quit), and the loop, the only owner of the stack, does it.
 */
#ifndef TB_UI_SCREEN_H
#define TB_UI_SCREEN_H

#include <curses.h>

#include "tui/keymap.h"
#include "tui/view.h"

/* What a handler asks the loop to do.  The loop draws after every key; a
 * poll of the runs asks for a draw with UI_REDRAW. */
enum {
	UI_REDRAW = 1 << 0,
	UI_BACK = 1 << 1,    /* close the screen on top */
	UI_HOME = 1 << 2,    /* close every screen above the heatmap */
	UI_QUIT = 1 << 3,
	UI_FOLLOW = 1 << 4,  /* the shown result was replaced: screens follow it */
	UI_FATAL = 1 << 5,   /* leave with the message line as the error */
};

/* The screens: one row each.  A row gives the id, the screen_ops (NAME_screen,
 * defined in tui/screens/NAME.c) and the action that opens it from any
 * screen (TB_ACT_NONE: opened by another screen, as detail from a cell, or
 * the heatmap, the bottom of the stack).  The enum, the loop's table and
 * its dispatch are generated from this list. */
#define TB_SCREEN_LIST(X) \
	X(HEATMAP, heatmap, TB_ACT_NONE) \
	X(DETAIL, detail, TB_ACT_NONE) \
	X(CAUSES, causes, TB_ACT_CAUSES) \
	X(HELP, help, TB_ACT_HELP) \
	X(HISTORY, history, TB_ACT_HISTORY) \
	X(UNPAIRED, unpaired, TB_ACT_UNPAIRED) \
	X(SUGGEST, suggest, TB_ACT_SUGGEST)

typedef enum screen_id {
	SCREEN_NONE,
#define TB_SCREEN_ENUM(id, name, action) SCREEN_##id,
	TB_SCREEN_LIST(TB_SCREEN_ENUM)
#undef TB_SCREEN_ENUM
	SCREEN_COUNT
} screen_id;

typedef struct ui_ret {
	unsigned flags;
	screen_id open; /* a screen to open on top, or SCREEN_NONE */
	long cell;      /* the cell it opens on (detail) */
} ui_ret;

/* A key hint of the footer: what the action does on this screen, after
 * keys, or the action's first key when keys is NULL. */
typedef struct screen_hint {
	tb_action action;
	const char *label;
	const char *keys;
} screen_hint;

typedef struct screen_ops {
	const char *name;
	const screen_hint *hints; /* the footer's, ended by {TB_ACT_NONE} */
	/* Before the screen is shown, on a cell (detail) or -1. */
	void (*open)(view *v, long cell);
	void (*draw)(view *v, WINDOW *w);
	/* w: the window the screen draws in (its size pages). */
	ui_ret (*action)(view *v, WINDOW *w, tb_action a);
	ui_ret (*click)(view *v, WINDOW *w, int y, int x); /* may be NULL */
	/* An action with the argument of the `:` command that stands for it
	 * (:pos N); NULL: the screen takes no such command. */
	ui_ret (*command)(view *v, WINDOW *w, tb_action a, const char *arg);
	/* The result was replaced by a reload: follow it, or ask UI_BACK. */
	ui_ret (*follow)(view *v); /* may be NULL */
} screen_ops;

static inline ui_ret ui_flags(unsigned flags)
{
	ui_ret r = {.flags = flags};

	return r;
}

#endif
