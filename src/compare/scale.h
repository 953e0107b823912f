/*
 * scale: the metrics a heatmap can be colored by (rel_l2, cosine, max_abs,
 * norm_ratio, allclose_frac, and "added": the amplification of the error a
 * cell's inputs brought, which lights up where error is born), as one
 * table: how to read the value from a cell, how to print it in a few
 * columns, and its "badness" on a log scale with the marks where it reads
 * as match and as diverged for a given tolerance.  The TUI's heatmap,
 * legend and status line and the HTML report color by it.
 */
#ifndef TB_SCALE_H
#define TB_SCALE_H

#include <stddef.h>

#include "compare/compare.h"

typedef struct tb_scale {
	const char *name;        /* as `metric NAME` takes it */
	const char *scale;       /* what the color scale measures: "rel_l2", "1-cosine", ... */
	double (*value)(const tb_metrics *m, double amplification);
	double (*badness)(double value); /* >= 0, 0 is a perfect match */
	int fixed;               /* print as %.4f (1) or %.1e (0) */
	double lo, hi;           /* badness at the ends of the log scale */
	double (*match_mark)(const tb_tolerance *t);   /* at or below: reads as match; NAN: none */
	double (*diverge_mark)(const tb_tolerance *t); /* above: diverged; NAN: none */
} tb_scale;

extern const tb_scale tb_scales[];
extern const size_t tb_n_scales;

/* The --origin-factor the "added" scale marks as diverged (set once at start). */
void tb_scale_set_origin_factor(double factor);

/* Index of a metric by name, or -1. */
int tb_scale_find(const char *name);
/* Value in at most 7 columns ("5.0e-01", "0.9998", "inf"). */
void tb_scale_format(const tb_scale *mt, double v, char *buf, size_t size);
/* Position of a badness on the log scale, 0 (lo or better) .. 1 (hi or worse). */
double tb_scale_level(const tb_scale *mt, double badness);

/* The status a badness reads as on this metric's scale (match, close, diverged). */
int tb_scale_band(const tb_scale *mt, const tb_tolerance *tol, double badness);

#endif
