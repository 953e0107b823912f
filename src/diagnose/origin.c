#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/origin.h"

/* An input that is not dumped stands for its own inputs, this many levels up. */
#define MAX_HOPS 6

static bool compared(const tb_cell_result *c)
{
	return c->ref && c->cand;
}

/* A cell's error: rel_l2 over the finite pairs, or infinite where NaN/Inf
 * appear on one side only (an overflow is born where that starts). */
static double error_of(const tb_cell_result *c)
{
	return c->m.mismatch || c->shape_mismatch ? INFINITY : c->m.rel_l2;
}

/* Worst rel_l2 among the inputs of cell c, looking through undumped ones. */
static double input_error(const tb_result *r, const tb_cell *c, int hops, bool *found)
{
	tb_feed feeds[TB_MAX_FEEDS];
	int n = tb_cell_feeders(c, feeds);
	double worst = 0;

	for (int i = 0; i < n; i++) {
		tb_cell in;
		long k;
		if (!tb_feed_cell(&feeds[i], c, r->n_layers, &in))
			continue;
		k = tb_result_find(r, &in);
		if (k >= 0 && compared(&r->cells[k])) {
			double e = error_of(&r->cells[k]);
			*found = true;
			if (!(e <= worst)) /* NaN or infinite input: the worst there is */
				worst = isnan(e) ? INFINITY : e;
		} else if (hops < MAX_HOPS) {
			double e = input_error(r, &in, hops + 1, found);
			if (e > worst)
				worst = e;
		}
	}
	return worst;
}

/* Relative error that atol alone allows on this cell. */
static double floor_of(const tb_cell_result *c)
{
	double rms = c->m.n ? c->m.l2[0] / sqrt((double)c->m.n) : 0;
	double f = rms > 0 ? c->tol.atol / rms : c->tol.atol;

	return f > 1e-7 ? f : 1e-7;
}

double tb_origin_input_error(const tb_result *r, long cell)
{
	bool found = false;
	double e = input_error(r, &r->cells[cell].cell, 0, &found);

	return found ? e : NAN;
}

static void drift_of(const tb_result *r, tb_origin *o)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0;
	int n = 0;

	for (size_t i = 0; i < r->n_cells; i++) {
		const tb_cell_result *c = &r->cells[i];
		double e = c->m.rel_l2;
		if (!compared(c) || c->cell.id != TB_TAP_BLOCK || !(e > 0) || !isfinite(e))
			continue;
		sx += c->cell.layer;
		sy += log(e);
		sxx += (double)c->cell.layer * c->cell.layer;
		sxy += c->cell.layer * log(e);
		n++;
	}
	o->drift = NAN;
	if (n >= 2 && n * sxx - sx * sx > 0)
		o->drift = exp((n * sxy - sx * sy) / (n * sxx - sx * sx));
}

/* Precision drift starts at rounding size in the first layer and grows;
 * large error from the first layer on (a broken op there, or differing
 * inputs) is no drift.  Rounding size is judged by the default --diverge as
 * well as the cell's own: a tolerance loosened to 1 must not make an op
 * that adds rel_l2 0.5 read as rounding. */
static bool drift_like(const tb_result *r, double drift)
{
	tb_tolerance dflt;

	tb_tolerance_default(&dflt);
	for (size_t i = 0; i < r->n_cells; i++) {
		const tb_cell_result *c = &r->cells[i];
		if (compared(c) && c->cell.id == TB_TAP_BLOCK)
			return isfinite(drift) && drift > 1 && error_of(c) <= fmin(c->tol.diverge, dflt.diverge);
	}
	return false;
}

int tb_origin_compute(const tb_result *r, double factor, tb_origin *o, tb_err *err)
{
	memset(o, 0, sizeof *o);
	o->factor = factor;
	o->origin = -1;
	o->strongest = -1;
	o->input_rel_l2 = malloc((r->n_cells ? r->n_cells : 1) * sizeof *o->input_rel_l2);
	o->amplification = malloc((r->n_cells ? r->n_cells : 1) * sizeof *o->amplification);
	if (!o->input_rel_l2 || !o->amplification) {
		tb_origin_done(o);
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	for (size_t i = 0; i < r->n_cells; i++) {
		const tb_cell_result *c = &r->cells[i];
		bool found = false;
		double in, amp;

		if (!compared(c)) {
			o->input_rel_l2[i] = o->amplification[i] = NAN;
			continue;
		}
		in = input_error(r, &c->cell, 0, &found);
		/* NaN/Inf carried in from an input adds nothing here */
		amp = isinf(error_of(c)) && isinf(in) ? 1 : error_of(c) / fmax(in, floor_of(c));
		o->input_rel_l2[i] = in;
		o->amplification[i] = isnan(amp) ? INFINITY : amp;
		if (o->origin < 0 && c->status == TB_ST_DIVERGED && o->amplification[i] > factor)
			o->origin = (long)i;
		if (isfinite(o->amplification[i]) &&
		    (o->strongest < 0 || o->amplification[i] > o->amplification[o->strongest]))
			o->strongest = (long)i;
	}
	drift_of(r, o);
	o->drift_like = drift_like(r, o->drift);
	if (o->origin >= 0) {
		const tb_cell_result *c = &r->cells[o->origin];
		char name[TB_CELL_NAME_MAX];
		tb_cell_name(&c->cell, name, sizeof name);
		if (c->shape_mismatch)
			snprintf(o->text, sizeof o->text, "error is born at %s: %.180s, from inputs at rel_l2 %.3g", name,
				 c->reason, o->input_rel_l2[o->origin]);
		else if (c->m.mismatch)
			snprintf(o->text, sizeof o->text,
				 "error is born at %s: NaN/Inf on one side only at %llu elements, from finite inputs (rel_l2 %.3g)",
				 name, (unsigned long long)c->m.mismatch, o->input_rel_l2[o->origin]);
		else
			snprintf(o->text, sizeof o->text, "error is born at %s: rel_l2 %.3g from inputs at %.3g (x%.3g)",
				 name, c->m.rel_l2, o->input_rel_l2[o->origin], o->amplification[o->origin]);
	} else if (r->verdict != TB_ST_MATCH) {
		long k = o->strongest;
		int n;
		/* Say what the cells measured: a cell within a loose --diverge may
		 * still multiply its input error far beyond the factor. */
		if (k >= 0 && o->amplification[k] > factor) {
			const tb_cell_result *c = &r->cells[k];
			char name[TB_CELL_NAME_MAX];
			tb_cell_name(&c->cell, name, sizeof name);
			n = snprintf(o->text, sizeof o->text,
				     "no diverged cell adds more than x%g to its input error; %s does (x%.3g: rel_l2 %.3g from inputs at %.3g), within --diverge %g",
				     factor, name, o->amplification[k], c->m.rel_l2, o->input_rel_l2[k], c->tol.diverge);
		} else {
			n = snprintf(o->text, sizeof o->text, "no cell adds more than x%g to its input error", factor);
		}
		if (o->drift_like && n >= 0 && (size_t)n < sizeof o->text)
			snprintf(o->text + n, sizeof o->text - (size_t)n,
				 "; error grows smoothly from L0 by about x%.2g per layer: precision drift, not a broken op",
				 o->drift);
	}
	return 0;
}

void tb_origin_done(tb_origin *o)
{
	free(o->input_rel_l2);
	free(o->amplification);
	o->input_rel_l2 = o->amplification = NULL;
}
