/*
 * draw: the two drawing helpers every screen uses: put formatted text at a
 * place of a window with an attribute, clipped to the window (a cut line
 * ends in a '>' at the edge); and format a
 * number in the few columns the screens give one.
 */
#ifndef TB_UI_DRAW_H
#define TB_UI_DRAW_H

#include <curses.h>
#include <stddef.h>

void ui_put(WINDOW *w, int y, int x, attr_t a, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* "nan", "inf", "1.234e-05", "0.98765". */
void ui_fmt_num(double v, char *buf, size_t size);

#endif
