/*
 * html: the self-contained HTML report of a check (`tbisect check --html
 * FILE`): one file with inline CSS, SVG and a small script, nothing fetched
 * from anywhere, readable without the script and in print.  It holds the
 * header (verdict, first divergence, coverage, tolerance, paths, version,
 * the command line), the layer x tap heatmap as SVG on the TUI's log color
 * scale with its glyphs and legend (sticky labels; the script adds a metric
 * switch and sub-tap folding), the causes with why and what to look at,
 * the origin, the first divergence in detail (its per-position rel_l2 and
 * cosine strips, worst elements, |diff| histogram, worst channels at the
 * first bad position and per-head table, re-read from the dumps), the
 * logits' per-position KL, the pass history as a plot, and a table of
 * every cell's statistics, metrics and per-position glyph strip that the
 * heatmap's cells link to.
 *
 * The markup is well-formed XML as well as HTML; text from the dumps is
 * escaped, and bytes that are not UTF-8 or are control characters are
 * written as '?'.  Identical inputs give identical bytes.
 */
#ifndef TB_HTML_H
#define TB_HTML_H

#include <stdio.h>

#include "run/report.h"

typedef struct tb_html_opts {
	const char *command;   /* the command line as typed (shell-quoted), or NULL */
	const char *timestamp; /* shown in the header when not NULL */
	int heads, kv_heads;   /* --heads / --kv-heads for the per-head table, 0: inferred */
} tb_html_opts;

/* Write r as HTML to out; -1 on a write error. */
int tb_report_html(FILE *out, const tb_report *r, const tb_html_opts *o);

#endif
