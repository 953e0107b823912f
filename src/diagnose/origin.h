/*
 * origin: where the error is born.  For every cell, the error of the cells
 * that feed it (the wiring table in taps.h), the amplification
 * rel_l2 / max(input rel_l2, floor), and the first cell in forward order
 * that both diverges and amplifies its input error beyond a factor.  When
 * no cell does, the growth of the block error per layer (precision drift).
 *
 * Reads a finished tb_result; owns its per-cell arrays (tb_origin_done).
 */
#ifndef TB_ORIGIN_H
#define TB_ORIGIN_H

#include "compare/compare.h"

#define TB_ORIGIN_FACTOR 10.0

typedef struct tb_origin {
	double factor;         /* amplification that marks an origin */
	double *input_rel_l2;  /* per cell; 0 for cells with no input (embed); NaN for missing cells */
	double *amplification; /* per cell; NaN for missing cells */
	long origin;           /* index into result cells, -1 when none */
	long strongest;        /* the compared cell of largest amplification, diverged or not; -1 when none */
	double drift;          /* block rel_l2 growth per layer (geometric), NaN when unknown */
	bool drift_like;       /* the error starts at rounding size in layer 0 and grows */
	char text[320];        /* the finding in words */
} tb_origin;

int tb_origin_compute(const tb_result *r, double factor, tb_origin *o, tb_err *err);
void tb_origin_done(tb_origin *o);

/* The worst rel_l2 among the cells feeding result cell `cell` (looking
 * through undumped ones), NaN when none of them was compared. */
double tb_origin_input_error(const tb_result *r, long cell);

#endif
