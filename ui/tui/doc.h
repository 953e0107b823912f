/*
 * doc: a scrolling document drawn line by line into a window below a
 * sticky title line, for the detail, causes, help and history screens.
 * Lines scrolled out of view are counted but not drawn, so a screen learns
 * its document's length from one draw.  A screen that is nothing but a
 * document (help, causes, history) gives a fill function and a scroll
 * offset; doc_screen_draw and doc_screen_action do the rest.
 */
#ifndef TB_UI_DOC_H
#define TB_UI_DOC_H

#include <curses.h>

#include "tui/screen.h"
#include "tui/view.h"

typedef struct doc {
	WINDOW *w;
	int y;      /* next document line */
	int scroll; /* first document line shown */
	int h;      /* window lines (line 0 is the title) */
} doc;

/* Window row of the next document line, or -1 when it is scrolled away. */
int doc_row(doc *d);
/* One line of text; wider than the window, it is word-wrapped onto the
 * lines below, indented two past its own indent. */
void doc_line(doc *d, attr_t a, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* prefix, then text word-wrapped to the window width; continuation lines
 * start at column indent.  Returns the width of the last line. */
int doc_wrap(doc *d, attr_t a, const char *prefix, int indent, const char *text);
/* Clamp a scroll offset to a document of `lines` in a window of h lines. */
int doc_clamp(int scroll, int lines, int h);

/* Fill a document of a screen that is one. */
typedef void (*doc_fill)(const view *v, doc *dc);
void doc_screen_draw(const view *v, WINDOW *w, const char *title, doc_fill fill, int scroll);
/* The footer of such a screen. */
extern const screen_hint doc_screen_hints[];
/* Up/Down/PgUp/PgDn/g/G scroll it; Esc/q go back. */
ui_ret doc_screen_action(const view *v, WINDOW *w, tb_action a, doc_fill fill, int *scroll);

#endif
