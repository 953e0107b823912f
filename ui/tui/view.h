/*
 * view: what the interactive view shows, shared by its screens: the run
 * on screen (its trees, and the result the comparison job fills or has
 * filled), the tolerance, the pass history and banner, a reload under way
 * in the background, the heatmap's grid, the chosen metric and the message
 * line.  The loop owns the one view; screens read it and change only the
 * grid, the metric and the message.  Nothing here draws: view.c runs
 * without a terminal.
 */
#ifndef TB_UI_VIEW_H
#define TB_UI_VIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "compare/compare.h"
#include "model/taps.h"
#include "run/history.h"
#include "run/run.h"
#include "tui/grid.h"
#include "tui/watch.h"

typedef struct view {
	const tb_run_config *cfg; /* borrowed: rules, tolerance file, options */
	bool no_history;          /* --no-history: passes kept in memory only */
	tb_run run;               /* the shown trees and their comparison */
	tb_tolerance tol;         /* the shown tolerance: the command line's, or :tol's */
	char job_err[512];        /* why the last comparison failed */
	bool job_is_pass;         /* the running job is a load: record a pass when it ends */
	bool stale;               /* the trees changed on disk since the shown view read them */
	tb_run next;              /* a reload compared in the background (next.job set) */
	tb_history hist;          /* the passes of this pair */
	int my_last_pass;         /* number of the last pass this view recorded, 0: none */
	char banner[400];         /* the last pass: how the first divergence moved */
	bool banner_bad;          /* a regression, stuck, broke: shown in the error style */
	bool banner_good;         /* moved later, or matched */
	char reload_err[TB_ERR_TEXT_MAX + 64]; /* why the last reload failed, "" after a good one */
	unsigned char *changed;   /* per cell: status changed since the previous pass */
	size_t n_changed;
	grid g;
	int metric;               /* index into tb_scales */
	char msg[512];            /* the message line, "" for the key hints */
	bool msg_err;
	char search[256];         /* last `/` pattern */
	ui_watch *watch;          /* --watch on both trees, or NULL */
	ui_watch_state watch_state; /* at the last poll */
	bool mouse;               /* mouse reports wanted (--no-mouse, :set) */
	bool on_grid;             /* the heatmap is the screen on top (set by the loop) */
	tb_run_config applied;    /* the configuration with a suggested map applied (cfg points here then) */
	char *applied_map;        /* that map's text, owned */
	int exit_code;
} view;

/* Monotonic seconds. */
double view_now(void);
const tb_pairing *view_pairing(const view *v);
/* The result shown: finished, or being filled by the job (NULL: neither). */
const tb_result *view_result(const view *v);
/* Whether cell i has its status yet. */
bool view_cell_ready(const view *v, size_t i);
/* Status of cell i (TB_ST_PENDING while it is compared). */
int view_cell_status(const view *v, size_t i);
/* Index of the first diverged cell among the ready ones, or -1. */
long view_first_divergence(const view *v);
/* "L3.attn", or "none" for an index out of range. */
const char *view_cell_label(const view *v, long i, char *buf, size_t size);
/* The diagnosis of the finished result, or NULL. */
const tb_diagnosis *view_diag(const view *v);

void view_message(view *v, bool error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Select the next cell (dir +1 / -1) after the cursor whose cell or tensor
 * name matches pattern (POSIX extended regex): 1, or 0 when none does, or
 * -1 with the regex error in why when the pattern is not a regex. */
int view_search(view *v, const char *pattern, int dir, char *why, size_t size);

/* True, with a message, when the files of cell c changed on disk since the
 * shown view read them (re-reading them could see a half-written file). */
bool view_refuse_stale(view *v, const tb_cell_result *c);

#endif
