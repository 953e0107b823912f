/*
 * report: the batch reports of `tbisect check`: a compact human text report
 * and the JSON report of doc/report.md (built with cJSON).
 *
 * Inputs are borrowed; tb_report_json returns a malloc'd string the caller
 * frees.  The text report is written to the stream the front end passes.
 */
#ifndef TB_REPORT_H
#define TB_REPORT_H

#include <stdio.h>

#include "diagnose/cause.h"
#include "compare/compare.h"
#include "compare/routing.h"
#include "compare/tolfile.h"
#include "diagnose/diagnose.h"
#include "run/history.h"
#include "run/run.h"
#include "model/pairing.h"
#include "run/towers.h"

typedef struct tb_report {
	const char *ref_path, *cand_path; /* as given on the command line */
	const tb_pairing *pairing;
	const tb_result *result;
	const tb_diagnosis *diag;         /* may be NULL: no diagnosis run */
	const tb_coverage *coverage;      /* may be NULL: not reported */
	bool partial;                     /* the coverage is poor (no cause named) */
	const char *map_warning;          /* map rules that took no tensor, or NULL / "" */
	bool show_features;               /* include the target's feature values */
	const tb_history *history;        /* may be NULL: history off */
	bool show_history;                /* text report: print the trajectory */
	bool history_unchanged;           /* this run recorded no pass: its inputs are the last pass's */
	const tb_tree_layout *layout[2];  /* ranks and steps of ref, cand (NULL: not reported) */
	const tb_tolfile *tolfile;        /* --tol, whose calibrated noise gives noise_ratio (may be NULL) */
	const char *tower;                /* the grid reported: a tower's (--tower), or NULL for the text decoder's */
	const tb_tower_summary *towers;   /* with the text grid: each tower compared beside it */
	size_t n_towers;
	const tb_routing *routing;        /* the MoE layers' routing (NULL or empty: none compared) */
} tb_report;

/* The report of a run's comparison, as every front end gives it (check,
 * the view's export, the MCP server): rep zeroed, then what the run and
 * its configuration hold; the caller adds what only it has (history,
 * features, towers). */
void tb_report_from_run(tb_report *rep, const tb_run *run, const tb_run_config *cfg);

/* Each warning a report gives, in order: coverage, the map's unused
 * rules, then the dumps' own faults (sanity); fn gets its id and text. */
void tb_report_each_warning(const tb_report *r, void (*fn)(void *ctx, const char *id, const char *text), void *ctx);

/* "confirmed by replay: gelu (tanh) reproduces the candidate (rel_l2
 * 3.1e-07)" for a cause a replay confirmed; false for the others. */
bool tb_cause_confirmation(const tb_cause *c, char *buf, size_t size);
/* Whether the reports say what the replay found though it confirmed
 * nothing: it ran, or it lacked the taps it needs (its note says which). */
bool tb_replay_worth_saying(const tb_replay *rp);

/* What the routing section is about, and one MoE layer's line in it: "L0: 11
 * of 12 positions agree (top-2); flipped at 5 (gap 1e-06)". */
#define TB_ROUTING_ABOUT "the experts each position chose; a near tie of the reference's scores is a flip"
#define TB_ROUTING_TEXT_MAX 512
void tb_routing_layer_text(const tb_routing_layer *l, char *buf, size_t size);

/* A cell's rel_l2 in units of the reference's own noise (calibrate): 0
 * when it is 0, infinite over a noise of 0. */
double tb_noise_ratio(double rel_l2, double noise);

/* "2 tensor-parallel ranks joined, step 1 of 0..3" for a tree's layout;
 * "" when it had neither ranks nor steps. */
void tb_layout_text(const tb_tree_layout *lo, char *buf, size_t size);
/* The step every cell was compared at (the candidate's, else the
 * reference's), or -1 when no single step was picked. */
int tb_report_step(const tb_report *r);

/* The per-layer taps present anywhere in the result, in forward order, as
 * cells of layer 0 (at most max). */
size_t tb_result_layer_taps(const tb_result *res, tb_cell *cols, size_t max);
/* The layer x tap grid of status glyphs, embed first and logits last, with
 * its legend.  fold_above > 0: a model of more layers shows the first and
 * last few and the first divergence's, each run of others as one line. */
void tb_report_grid(FILE *out, const tb_result *res, int fold_above);
/* The JSON report (doc/report.md), pretty-printed; NULL when out of memory. */
char *tb_report_json(const tb_report *r);
/* The same report as a cJSON tree the caller owns (tbisect mcp answers
 * with parts of it); NULL when out of memory. */
cJSON *tb_report_json_tree(const tb_report *r);
int tb_report_text(FILE *out, const tb_report *r);

/* The warning a partial pairing gets, in every report: the coverage and
 * what --allow-partial leaves out. */
void tb_report_coverage_warning(const tb_report *r, char *buf, size_t size);
/* A verdict as headers shout it: "DIVERGED", "CLOSE", "MATCH". */
const char *tb_verdict_word(int verdict);
/* One status glyph per cell for text and screens: '.', '~', 'X', '-', '?'. */
char tb_status_glyph(int status);
/* Flat index -> "[0, 3, 17]" in the given shape. */
void tb_index_format(uint64_t index, int ndim, const int64_t *shape, char *buf, size_t size);

#endif
