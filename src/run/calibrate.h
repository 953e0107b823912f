/*
 * calibrate: per-cell tolerances from two runs of the reference that
 * differ only in harmless ways (another dtype, device, batch composition
 * or kernel).  Each cell's tolerance is the noise seen between the two
 * runs times a safety factor, floored at the rounding of the reference's
 * dtype, written in the --tol format (tolfile.h) with the noise itself, so
 * that a check with that file reports each cell's error in units of it
 * (JSON "noise_ratio").
 */
#ifndef TB_CALIBRATE_H
#define TB_CALIBRATE_H

#include "base/error.h"
#include "compare/compare.h"

/* The factor over the observed noise, unless --factor says otherwise. */
#define TB_CALIBRATE_FACTOR 4.0

/* The --tol file for the comparison res of two reference runs (malloc'd
 * JSON text); ref and ref2 are recorded in it.  NULL and err when out of
 * memory or when no cell was compared. */
char *tb_calibrate_json(const tb_result *res, const char *ref, const char *ref2, double factor, tb_err *err);

#endif
