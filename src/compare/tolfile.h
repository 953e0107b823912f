/*
 * tolfile: per-tensor tolerances from a --tol JSON file: an ordered list of
 * {"match": REGEX, "atol": A, "rtol": R, "diverge": D, "max_kl": K,
 *  "mode": "rel"|"abs", "noise": {"rel_l2": N, ...}} (noise: what
 * `tbisect calibrate` measured between two runs of the reference).  The first entry whose regex fully matches the
 * cell's canonical name (L3.attn, logits) or a raw tensor name applies;
 * fields it leaves out keep the command-line values.  Read-only after load
 * (safe to use from compare workers); tb_tolfile_free releases it.
 */
#ifndef TB_TOLFILE_H
#define TB_TOLFILE_H

#include "base/error.h"
#include "compare/metrics.h"
#include "model/taps.h"
#include "tensor/tensor.h"

typedef struct tb_tolfile tb_tolfile;

int tb_tolfile_load(const char *path, tb_tolfile **out, tb_err *err);
void tb_tolfile_free(tb_tolfile *tf);

/* Overlay the fields of the first entry that matches the cell on *tol (the
 * command line's tolerance, or the TUI's after :tol); returns the entry
 * index used, or -1 (*tol unchanged). */
int tb_tolfile_apply(const tb_tolfile *tf, const tb_cell *cell, const char *ref_name, const char *cand_name,
		     tb_tolerance *tol);
/* The reference's own noise (rel_l2) the first matching entry records,
 * or -1 when none does. */
double tb_tolfile_noise(const tb_tolfile *tf, const tb_cell *cell, const char *ref_name, const char *cand_name);
/* The entry's "match" text, for `ls --tol`. */
const char *tb_tolfile_pattern(const tb_tolfile *tf, int entry);
/* Adapter for tb_compare_opts.tol_for (ud is the tb_tolfile). */
void tb_tolfile_for_cell(void *ud, const tb_cell *cell, const tb_tensor *ref, const tb_tensor *cand,
			 tb_tolerance *tol);

#endif
