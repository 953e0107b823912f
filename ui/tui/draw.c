#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tui/draw.h"

void ui_put(WINDOW *w, int y, int x, attr_t a, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	int maxx = getmaxx(w);

	if (y < 0 || y >= getmaxy(w) || x < 0 || x >= maxx)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	wattrset(w, a);
	/* Text that runs past the edge ends in a '>' there: cut, and saying so
	 * (trailing blanks are no text). */
	int len = (int)strlen(buf);
	while (len > 0 && buf[len - 1] == ' ')
		len--;
	if (len > maxx - x && maxx - x > 1) {
		mvwaddnstr(w, y, x, buf, maxx - x - 1);
		wattrset(w, A_BOLD);
		waddch(w, '>');
	} else {
		mvwaddnstr(w, y, x, buf, maxx - x);
	}
	wattrset(w, A_NORMAL);
}

void ui_fit(const char *text, int width, char *buf, size_t size)
{
	int n = (int)strlen(text);

	if (n <= width || width < 2)
		snprintf(buf, size, "%.*s", width > 0 ? width : 0, text);
	else
		snprintf(buf, size, "%.*s>", width - 1, text);
}

void ui_fmt_num(double v, char *buf, size_t size)
{
	if (isnan(v) || isinf(v))
		snprintf(buf, size, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
	else if (v != 0 && (fabs(v) < 1e-3 || fabs(v) >= 1e5))
		snprintf(buf, size, "%.3e", v);
	else
		snprintf(buf, size, "%.5g", v);
}
