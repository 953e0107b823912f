/*
 * markdown: the short summary of a check for CI step summaries and pull
 * request comments (`tbisect check --markdown`): the verdict and first
 * divergence as a heading, coverage, cells and tolerance, the origin, the
 * likely causes with why and what to look at, and the glyph heatmap in a
 * code block, deep models folded to their first and last layers and the
 * first divergence's.  GitHub-flavoured; text from the dumps is escaped.
 */
#ifndef TB_MARKDOWN_H
#define TB_MARKDOWN_H

#include <stdio.h>

#include "run/report.h"

/* Models of more layers than this have their middle layers folded. */
#define TB_MARKDOWN_FOLD_ABOVE 12

/* Write r's summary to out; -1 on a write error. */
int tb_report_markdown(FILE *out, const tb_report *r);

#endif
