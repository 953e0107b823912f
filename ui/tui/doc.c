#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tui/doc.h"
#include "tui/draw.h"
#include "tui/theme.h"

int doc_row(doc *d)
{
	int r = d->y++ - d->scroll + 1;

	return r >= 1 && r < d->h ? r : -1;
}

void doc_line(doc *d, attr_t a, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int r = doc_row(d);

	if (r < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	ui_put(d->w, r, 0, a, "%s", buf);
}

int doc_wrap(doc *d, attr_t a, const char *prefix, int indent, const char *text)
{
	int width = getmaxx(d->w) - indent, last = 0;
	const char *s = text;
	bool first = true;

	if (width < 10)
		width = 10;
	do {
		int n = (int)strlen(s), cut = n;
		if (n > width) {
			cut = width;
			while (cut > 0 && s[cut] != ' ')
				cut--;
			if (cut == 0)
				cut = width;
		}
		doc_line(d, a, "%-*s%.*s", indent, first ? prefix : "", cut, s);
		last = indent + cut;
		first = false;
		s += cut;
		while (*s == ' ')
			s++;
	} while (*s);
	return last;
}

int doc_clamp(int scroll, int lines, int h)
{
	int max = lines - (h - 1);

	if (scroll > max)
		scroll = max;
	return scroll < 0 ? 0 : scroll;
}

void doc_screen_draw(const view *v, WINDOW *w, const char *title, doc_fill fill, int scroll)
{
	doc dc = {w, 0, scroll, getmaxy(w)};

	ui_put(w, 0, 0, ui_attr(UI_TITLE), "%s", title);
	fill(v, &dc);
}

ui_ret doc_screen_action(const view *v, WINDOW *w, tb_action a, doc_fill fill, int *scroll)
{
	int h = getmaxy(w), page = h - 2;
	doc dc = {w, 0, 1 << 20, h};

	fill(v, &dc);
	switch (a) {
	case TB_ACT_UP: (*scroll)--; break;
	case TB_ACT_DOWN: (*scroll)++; break;
	case TB_ACT_PAGE_UP: *scroll -= page; break;
	case TB_ACT_PAGE_DOWN: *scroll += page; break;
	case TB_ACT_TOP: *scroll = 0; break;
	case TB_ACT_BOTTOM: *scroll = dc.y; break;
	case TB_ACT_BACK:
	case TB_ACT_QUIT: return ui_flags(UI_BACK);
	default: return ui_flags(0);
	}
	*scroll = doc_clamp(*scroll, dc.y, h);
	return ui_flags(0);
}

const screen_hint doc_screen_hints[] = {{.action = TB_ACT_DOWN, .label = "scroll", .keys = "Up/Down"},
					{.action = TB_ACT_PAGE_DOWN, .label = "page", .keys = "PgDn"},
					{.action = TB_ACT_BACK, .label = "back"},
					{.action = TB_ACT_NONE}};
