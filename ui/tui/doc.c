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

/* Where to cut s (n bytes) to fit width: after the last blank that lets
 * it fit, else at width (a word longer than the line). */
static int fit(const char *s, int n, int width)
{
	int cut = width;

	if (n <= width)
		return n;
	while (cut > 0 && s[cut] != ' ')
		cut--;
	return cut > 0 ? cut : width;
}

static void put_row(doc *d, attr_t a, const char *text, int len)
{
	int r = doc_row(d);

	if (r >= 0)
		ui_put(d->w, r, 0, a, "%.*s", len, text);
}

/* Lines wider than the window go on, word-wrapped, on the lines below,
 * indented two past the line's own indent: nothing is cut off at the
 * window's edge. */
void doc_line(doc *d, attr_t a, const char *fmt, ...)
{
	char buf[1024];
	const char *rest;
	va_list ap;
	int width = getmaxx(d->w), n, cut, lead;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	n = (int)strlen(buf);
	if (n <= width || width < 20) {
		put_row(d, a, buf, n);
		return;
	}
	lead = (int)strspn(buf, " ");
	if (lead > width / 2)
		lead = 0;
	cut = fit(buf, n, width);
	put_row(d, a, buf, cut);
	rest = buf + cut + strspn(buf + cut, " ");
	if (*rest)
		doc_wrap(d, a, "", lead + 2, rest);
}

int doc_wrap(doc *d, attr_t a, const char *prefix, int indent, const char *text)
{
	int plen = (int)strlen(prefix), last = 0;
	const char *s = text;
	bool first = true;
	char line[1024];

	do {
		/* The first line starts after the prefix, which may be wider than
		 * the indent ("  origin: "): a line cut to the indent's width
		 * would run past the edge, and its last words with it. */
		int width = getmaxx(d->w) - (first && plen > indent ? plen : indent);
		if (width < 10)
			width = 10;
		int cut = fit(s, (int)strlen(s), width);
		snprintf(line, sizeof line, "%-*s%.*s", indent, first ? prefix : "", cut, s);
		put_row(d, a, line, (int)strlen(line));
		last = (first && plen > indent ? plen : indent) + cut;
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
