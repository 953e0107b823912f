/*
 * compare: run every pair of a pairing through the metric kernels on a
 * pool of worker threads, then give each cell its status (tbisect(1) DESCRIPTION) and
 * the result its verdict and first divergence.
 *
 * Work is split into units of rows (a few MB each) in forward order, so
 * all cores help even on one big tensor, and cells finish roughly in
 * forward order.  A job runs in the background: the TUI polls progress and
 * reads cells as they finish (tb_job_cell_done); batch mode just waits.
 * The result borrows the pairing's tensors; it owns its metrics arrays.
 */
#ifndef TB_COMPARE_H
#define TB_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "compare/logits.h"
#include "compare/metrics.h"
#include "model/pairing.h"
#include "model/taps.h"
#include "tensor/tensor.h"

typedef enum tb_status {
	TB_ST_PENDING,
	TB_ST_MATCH,
	TB_ST_CLOSE,
	TB_ST_DIVERGED,
	TB_ST_MISSING,
	TB_ST_COUNT
} tb_status;

/* "match", "close", "diverged", "missing", "pending" */
const char *tb_status_name(tb_status st);

/* A shape as a reason quotes it ("[2, 16, 64]"), with its NUL. */
#define TB_REASON_SHAPE_MAX 96

typedef struct tb_cell_result {
	tb_cell cell;
	const tb_tensor *ref, *cand; /* either may be NULL (missing) */
	tb_tolerance tol;            /* the tolerance this cell was judged by */
	tb_status status;
	bool shape_mismatch;         /* squeezed shapes differ */
	int ndim;                    /* reported shape: the reference's, else the candidate's */
	int64_t shape[TB_MAX_DIMS];
	tb_metrics m;
	tb_logit_metrics *logits;    /* the logits cell only */
	uint64_t digest[2];          /* ref's and cand's values digests (tb_tensor_digest's), where digested */
	bool digested[2];            /* added up as the rows were read (tb_compare_opts.digest) */
	tb_run_sums *pos_sums;       /* each position's sums (m.n_pos), owned; kept when tb_compare_opts.keep_positions
				      * asked, so routing.h can leave positions out without reading the tensors again */
	int64_t excluded_positions;  /* positions left out of the metrics: an MoE flip upstream (routing.h) */
	bool by_sets;                /* mlp.topk_ids judged by its expert sets (routing.h): rel_l2 is the share of
				      * positions whose sets differ beyond a flip, allclose_frac the share that agree */
	int64_t *flips;              /* ... and its flipped positions, in order (owned; NULL when none) */
	size_t n_flips;
	bool by_slots;               /* one row per selected expert on both sides, compared matched by expert id
				      * (routing.h); its flips left out there */
	char reason[2 * TB_REASON_SHAPE_MAX + 32]; /* why the status, in words; the longest quotes two shapes */
} tb_cell_result;

typedef struct tb_result {
	tb_cell_result *cells; /* forward order, as in the pairing */
	size_t n_cells;
	int n_layers;
	tb_tolerance tol;      /* command-line tolerance */
	tb_status verdict;     /* TB_ST_MATCH, TB_ST_CLOSE or TB_ST_DIVERGED */
	long first_div;        /* index into cells, -1 when nothing diverged */
	size_t count[TB_ST_COUNT];
} tb_result;

/* Per-cell tolerance (per-tensor tolerance files); fill *tol or leave it. */
typedef void (*tb_tol_fn)(void *ud, const tb_cell *cell, const tb_tensor *ref, const tb_tensor *cand,
			  tb_tolerance *tol);

typedef struct tb_compare_opts {
	tb_tolerance tol;
	int threads;      /* 0: one per online CPU */
	uint64_t unit_elems; /* elements per work unit; 0: a few MB */
	tb_tol_fn tol_for; /* optional */
	void *tol_ud;
	bool digest[2];   /* add up the ref's (cand's) tensors' values digests as their rows are read,
			   * where their rows start at whole pairs of words (tensor/digest.h) */
	bool keep_positions; /* keep each cell's per-position sums (tb_cell_result.pos_sums) */
} tb_compare_opts;

void tb_compare_opts_init(tb_compare_opts *o);

typedef struct tb_job tb_job;

/* Start comparing in the background.  The pairing must outlive the job. */
tb_job *tb_compare_start(const tb_pairing *p, const tb_compare_opts *o, tb_err *err);
/* Cells done / total and bytes read / to read, at any moment. */
void tb_job_progress(const tb_job *job, size_t *cells_done, size_t *cells_total, uint64_t *bytes_done,
		     uint64_t *bytes_total);
/* The result being filled; a cell may be read once tb_job_cell_done says so. */
const tb_result *tb_job_result(const tb_job *job);
bool tb_job_cell_done(const tb_job *job, size_t i);
bool tb_job_finished(const tb_job *job);
/* Ask the workers to stop early (tb_job_finish then fails). */
void tb_job_cancel(tb_job *job);
/* Wait, free the job, hand over the result (or fail with the first read
 * error).  Always frees the job. */
int tb_job_finish(tb_job *job, tb_result **out, tb_err *err);

/* Start and finish in one call. */
int tb_compare(const tb_pairing *p, const tb_compare_opts *o, tb_result **out, tb_err *err);

/* Judge a finished cell by its tolerance (sets status and reason). */
void tb_cell_judge(tb_cell_result *c);
/* What a cell's dump printed of its tensors when only some values were
 * (doc/report.md, the JSON report's "partial"), or NULL. */
const tb_partial *tb_cell_partial(const tb_cell_result *c);
/* How pairing laid a side out to meet the other (tb_tensor.note: llama.cpp's
 * queries and keys in Hugging Face's order), or NULL. */
const char *tb_cell_note(const tb_cell_result *c);
/* Recount statuses, verdict and first divergence. */
void tb_result_summarise(tb_result *r);
void tb_result_free(tb_result *r);
/* Index of a cell in a result (cells are in forward order), or -1. */
long tb_result_find(const tb_result *r, const tb_cell *c);
/* The result of cell (layer, tap) for a table tap, or NULL. */
const tb_cell_result *tb_result_cell(const tb_result *r, int layer, tb_tap_id tap);

#endif
