/*
 * draw: the drawing helpers every screen uses: put formatted text at a
 * place of a window with an attribute, clipped to the window (a cut line
 * ends in a '>' at the edge); fit text to a column the same way; and
 * format a number in the few columns the screens give one.
 */
#ifndef TB_UI_DRAW_H
#define TB_UI_DRAW_H

#include <curses.h>
#include <stddef.h>

void ui_put(WINDOW *w, int y, int x, attr_t a, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* text in at most width columns: when it is longer, cut to end in a '>'
 * saying so, as ui_put cuts at the window's edge. */
void ui_fit(const char *text, int width, char *buf, size_t size);
/* "nan", "inf", "1.234e-05", "0.98765". */
void ui_fmt_num(double v, char *buf, size_t size);

#endif
