/*
 * run: one comparison of a reference and a candidate tree, from the
 * options to the recorded pass.  Every mode runs the same steps, in this
 * order: load the rule table and the tolerance file (before any dump is
 * read, so a bad file fails first), open both trees and pair them, compare
 * with the tolerance file applied, diagnose (origin, dump sanity, causes of
 * the first divergence), record the pass.  `check` runs them at once
 * (tb_run_exec); the interactive view runs the comparison in the
 * background (tb_run_start, tb_run_finished, tb_run_finish) for its first
 * load, reloads and new tolerances.
 *
 * A tb_run_config is loaded once per process and read-only afterwards; a
 * tb_run borrows it and owns its trees, job, result and diagnosis
 * (tb_run_done releases them).
 */
#ifndef TB_RUN_H
#define TB_RUN_H

#include <stdbool.h>
#include <time.h>

#include "base/error.h"
#include "compare/compare.h"
#include "compare/routing.h"
#include "compare/tolfile.h"
#include "diagnose/diagnose.h"
#include "diagnose/rules.h"
#include "formats/tree.h"
#include "model/session.h"
#include "run/history.h"

/* The process exit codes of every mode (tbisect(1) EXIT STATUS). */
enum { TB_EXIT_OK = 0, TB_EXIT_DIVERGED = 1, TB_EXIT_BAD_INPUT = 2 };

/* Where the pass will be recorded, so the comparison adds up the value
 * digests the history lacks as it reads the rows. */
typedef enum tb_record {
	TB_RECORD_NONE,   /* not recorded: no digests */
	TB_RECORD_DISK,   /* in the pair's history file: digests of the trees changed since its last pass;
			     none when no file can be kept (check then records nothing) */
	TB_RECORD_DISK_OR_MEMORY, /* as TB_RECORD_DISK, but in memory when no file can be kept (the
				     interactive view): then all digests */
	TB_RECORD_MEMORY, /* in a history kept in memory (the interactive view's --no-history): all */
} tb_record;

/* What the command line says about a comparison (tbisect(1) OPTIONS). */
typedef struct tb_run_opts {
	const char *ref_path, *cand_path; /* borrowed */
	tb_open_opts open;
	const char *map_file, *rules_file, *tol_file; /* NULL: none */
	tb_tolerance tol;
	int threads;          /* 0: one per CPU */
	int heads, kv_heads;  /* 0: infer */
	const char *tower;    /* the grid compared: a tower's (tb_name_tower), or NULL for the text decoder's */
	double origin_factor; /* 0: TB_ORIGIN_FACTOR */
	double flip_margin;   /* 0: TB_FLIP_MARGIN */
	bool allow_partial;   /* go on when coverage is poor (no cause is named then) */
	bool allow_empty;     /* go on when no cell paired at all (suggest-map, whose job that is) */
	bool no_builtin_names; /* only the map file names tensors */
	tb_layout_opts layout; /* steps and ranks (--step, --steps, --shard) */
	tb_record record;     /* how the pass will be recorded (tb_run_record) */
} tb_run_opts;

void tb_run_opts_init(tb_run_opts *o);

typedef struct tb_run_config {
	tb_run_opts opts;
	tb_ruleset *rules;   /* shipped + user + --rules */
	tb_tolfile *tolfile; /* --tol, or NULL */
	char *map_text;      /* --map -: the map read from standard input once, or NULL */
	size_t map_len;
} tb_run_config;

/* Load the rules and the tolerance file, and a map given as "-" from
 * standard input; errors name the file. */
int tb_run_config_load(tb_run_config *cfg, const tb_run_opts *o, tb_err *err);
void tb_run_config_done(tb_run_config *cfg);
/* The diagnosis options the configuration gives. */
tb_diag_opts tb_run_diag_opts(const tb_run_config *cfg);

typedef struct tb_run {
	const tb_run_config *cfg; /* borrowed */
	tb_session sess;
	bool open;                /* sess holds the trees */
	tb_coverage coverage;
	bool partial;             /* coverage is poor (tb_coverage_poor), allowed by --allow-partial */
	char map_warning[1024];   /* the map file's rules that took no tensor, "" when none */
	struct timespec opened;   /* wall clock just before the trees were opened */
	tb_tolerance tol;         /* what the comparison ran with (before the tolerance file) */
	tb_job *job;              /* the comparison under way, or NULL */
	double started;           /* monotonic seconds when the job started */
	tb_result *res;           /* the finished comparison, or NULL */
	tb_routing routing;       /* its MoE layers' routing (res's topk cells judged by it) */
	tb_diagnosis diag;
	bool have_diag;
} tb_run;

/* Open and pair both trees (the map file is read again each time, so a
 * reload sees an edited map).  A pairing too partial to conclude from
 * fails, unless the options allow it. */
int tb_run_open(tb_run *r, const tb_run_config *cfg, tb_err *err);
/* Start comparing the open trees at tolerance tol (the command line's, or
 * one set later), with the tolerance file over it; any earlier result and
 * diagnosis are dropped. */
int tb_run_start(tb_run *r, const tb_tolerance *tol, tb_err *err);
bool tb_run_finished(const tb_run *r);
/* Wait for the comparison, then diagnose it (naming no cause on a partial
 * pairing).  -1 when the comparison failed (no result), or when the
 * diagnosis failed (the result stays, have_diag is false). */
int tb_run_finish(tb_run *r, tb_err *err);
/* Stop the comparison under way, if any (its result is dropped). */
void tb_run_cancel(tb_run *r);
/* Open, compare at the configured tolerance and diagnose, at once. */
int tb_run_exec(tb_run *r, const tb_run_config *cfg, tb_err *err);
/* TB_EXIT_DIVERGED when a cell diverged, else TB_EXIT_OK (also while no
 * result is there); TB_EXIT_BAD_INPUT when no cell paired (a view opened
 * with allow_empty). */
int tb_run_exit_code(const tb_run *r);
/* Take over another run's trees, result and diagnosis (src is left empty). */
void tb_run_move(tb_run *dst, tb_run *src);
void tb_run_done(tb_run *r);

/* One tree and the cells its names map to (`ls`). */
typedef struct tb_listing {
	tb_tree *tree;
	tb_namer *namer;
	tb_tree_names names;
} tb_listing;

/* Open one tree with the configuration's map. */
int tb_run_list(const tb_run_config *cfg, const char *path, tb_listing *out, tb_err *err);
void tb_listing_done(tb_listing *l);

/* Record the finished run as a pass of *h.  Unless *h is in memory only
 * (tb_history_init_memory, for --no-history), the pair's history is read
 * from disk again first, since another process may have added passes;
 * when it cannot be kept on disk (h->warning says why), the pass is kept
 * in memory under TB_RECORD_DISK_OR_MEMORY, else not at all.  1 when a
 * pass was recorded, 0 when not (the inputs are the last pass's, or no
 * history is kept), -1 when the pass could not be saved. */
int tb_run_record(const tb_run *r, tb_history *h, tb_err *err);

#endif
