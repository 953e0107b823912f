/*
 * tui: the interactive view's shared state and the seams between its parts.
 * tui.c owns the loop (keys, resize, progress polling, one doupdate per
 * iteration), the comparison job and the one idempotent shutdown; reload.c
 * the reloads (by hand or --watch), compared in the background while the
 * last good view stays, and the passes they record; each screen (heatmap,
 * detail, causes, help, history) is a screen_ops table whose handlers
 * return flags for the loop to act on; prompt.c runs readline's callback
 * API inside the status window; cmdline.c holds the `:` commands.
 */
#ifndef TB_UI_TUI_H
#define TB_UI_TUI_H

#include <curses.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "diagnose/cause.h"
#include "compare/compare.h"
#include "diagnose/diagnose.h"
#include "tui/doc.h"
#include "tui/grid.h"
#include "run/history.h"
#include "compare/inspect.h"
#include "tui/keymap.h"
#include "cli/options.h"
#include "model/session.h"
#include "tui/watch.h"

/* What a handler asks the loop to do. */
enum {
	UI_HANDLED = 1 << 0,
	UI_REDRAW = 1 << 1,
	UI_BACK = 1 << 2, /* pop the screen */
	UI_QUIT = 1 << 3,
};

typedef struct tui tui;

typedef struct screen_ops {
	const char *name;
	void (*draw)(tui *t, WINDOW *w);
	unsigned (*action)(tui *t, tb_action a);
	unsigned (*click)(tui *t, int y, int x); /* may be NULL */
} screen_ops;

extern const screen_ops heatmap_screen, detail_screen, causes_screen, help_screen, history_screen;

/* What the detail screen shows of one cell (computed when it opens). */
#define DETAIL_TOPK 10
#define DETAIL_CHANNELS 6
typedef struct detail {
	long pair;               /* cell index */
	int64_t pos;             /* selected position */
	int scroll;              /* first document line shown */
	int lines;               /* document length at the last draw */
	int strip_left;          /* first position shown in the strip */
	tb_elem worst[DETAIL_TOPK];
	size_t n_worst;
	tb_diff_hist hist;
	bool have_diff;
	tb_elem chan[DETAIL_CHANNELS]; /* worst channels of pos */
	size_t n_chan;
	int64_t chan_pos;        /* position chan belongs to, -1: none */
	int heads;               /* 0: unknown */
	int64_t head_dim;
	const char *heads_from;  /* "--heads", "inferred from attn.q/attn.k shapes" */
	tb_head_metrics *head;   /* heads entries, owned */
	tb_causes causes;        /* causes of this cell when it is not the first divergence, owned */
	char note[256];          /* why the per-head view is absent */
	int strip_y, strip_x;    /* where the position strip was drawn, -1: not shown */
} detail;

/* A reload: the trees opened again and compared in the background while
 * the last good view stays on the screen (reload.c). */
typedef struct pending {
	tb_session sess;         /* valid while job is set */
	tb_job *job;             /* NULL: no reload running */
	double t_start;          /* monotonic seconds */
	struct timespec opened;  /* wall clock just before the trees were opened */
} pending;

struct tui {
	const tb_options *opt;
	tb_session sess;
	tb_tolerance tol;
	tb_job *job;             /* running comparison of the shown trees, or NULL */
	tb_result *res;          /* finished result (owned), or NULL */
	double t_start;          /* when the job started (monotonic seconds) */
	char job_err[512];       /* why the last comparison failed */
	bool job_is_pass;        /* the shown job is a load: record a pass when it ends */
	struct timespec loaded;  /* wall clock just before the shown trees were opened */
	bool stale;              /* the trees changed on disk since the shown view read them */
	pending next;            /* a reload in the background */
	tb_history hist;         /* the passes of this pair (reloaded from disk before each record) */
	int my_last_pass;        /* number of the last pass this view recorded, 0: none yet */
	char banner[400];        /* the last pass: how the first divergence moved */
	bool banner_bad;         /* a regression, stuck, broke: shown in the error style */
	bool banner_good;        /* moved later, or matched */
	char reload_err[600];    /* why the last reload failed, "" after a good one */
	unsigned char *changed;  /* per cell of the shown result: status changed since the previous pass */
	size_t n_changed;        /* cells flagged in changed */
	grid g;
	int metric;              /* index into ui_metrics */
	const screen_ops *stack[8];
	int depth;
	detail d;
	int help_scroll, causes_scroll, history_scroll;
	tb_ruleset *rules;       /* the diagnosis rules (shipped + user), owned */
	tb_diagnosis diag;       /* of the finished result: origin, warnings, causes of the first divergence */
	bool have_diag;
	char msg[512];
	bool msg_err;
	char search[256];        /* last `/` pattern */
	bool prompt_on;          /* the readline prompt owns the status line */
	char completions[512];   /* last ambiguous completion, shown above the prompt */
	ui_watch *watch;         /* --watch on both trees, or NULL */
	ui_watch_state watch_state; /* at the last poll */
	WINDOW *wmain, *wstatus;
	int lines, cols;
	bool too_small;
	bool quit;
	int exit_code;
};

/* Monotonic seconds. */
double tui_now(void);
/* The result being shown: finished, or being filled by the job. */
const tb_result *tui_result(const tui *t);
/* Whether cell i has its status yet. */
bool tui_cell_ready(const tui *t, size_t i);
/* Status of cell i (TB_ST_PENDING while it is compared). */
int tui_cell_status(const tui *t, size_t i);
/* Index of the first diverged cell among the ready ones, or -1. */
long tui_first_divergence(const tui *t);
const char *tui_cell_label(const tui *t, long i, char *buf, size_t size);

void tui_message(tui *t, bool error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void tui_push(tui *t, const screen_ops *s);
/* Open the detail screen on a cell. */
void tui_open_detail(tui *t, long pair);
/* Point the open detail screen at a cell of a new result, keeping the
 * selected position and the scroll. */
void tui_detail_reopen(tui *t, long pair);

/* Leave curses, print one line, exit 2: for errors the view cannot show. */
void tui_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Start comparing a pairing with t->tol; NULL with t->job_err set. */
tb_job *tui_compare_start(tui *t, const tb_pairing *p);
/* Start comparing the shown trees with t->tol; -1 with t->job_err set. */
int tui_start_job(tui *t);
/* Stop the shown job; free the result, its diagnosis and the changed flags. */
void tui_drop_result(tui *t);
/* Stop the job and compare again with t->tol (:tol); records no pass. */
int tui_recompare(tui *t);

/* --- reloads and passes (reload.c) --- */
/* Open both trees again and compare them in the background; the last good
 * view stays until the comparison succeeds, then the cursor, fold, filter
 * and open screens carry over.  Without a good view yet, replace at once. */
int tui_reload(tui *t);
/* Poll the background reload and --watch; true when the screen changed. */
bool tui_reload_poll(tui *t);
/* Whether a reload runs in the background. */
bool tui_reloading(const tui *t);
/* Stop a background reload and forget its trees. */
void tui_reload_cancel(tui *t);
/* Record the shown result as a pass: history (unless --no-history, then in
 * memory only) and the banner, which also counts t->n_changed. */
void tui_record_pass(tui *t);
/* True, with a message, when the files of cell c changed on disk since the
 * shown view read them (re-reading them could see a half-written file). */
bool tui_refuse_stale(tui *t, const tb_cell_result *c);
/* Write the screen's text to a file (:save-display). */
int tui_save_display(tui *t, const char *path);

/* Select the next cell (dir +1 / -1) after the cursor whose cell or tensor
 * name matches pattern (POSIX extended regex): 1, or 0 when none does, or
 * -1 with the regex error in why when the pattern is not a regex. */
int tui_search(tui *t, const char *pattern, int dir, char *why, size_t size);

/* The `:` commands (cmdline.c). */
typedef enum cmd_completion { CMP_NONE, CMP_CELL, CMP_METRIC, CMP_TOL, CMP_FILE } cmd_completion;
typedef struct ui_cmd {
	const char *name;
	const char *usage;
	const char *help;
	unsigned (*exec)(tui *t, char *args);
	cmd_completion complete;
} ui_cmd;
extern const ui_cmd ui_cmds[];
extern const size_t ui_n_cmds;
/* Run one command line; returns handler flags. */
unsigned cmdline_run(tui *t, const char *line);

/* The readline prompt (prompt.c). */
void prompt_init(void);
void prompt_open(tui *t, char kind); /* ':' command, '/' search */
/* Feed one curses key; returns handler flags. */
unsigned prompt_key(tui *t, int key);
void prompt_draw(tui *t);
void prompt_close(tui *t);

/* The causes of a cell (the first divergence when cell < 0), for the
 * detail screen and the causes pane (causes.c). */
void causes_lines(tui *t, doc *dc, long cell);
/* Diagnosis options from the command line and the loaded rules. */
tb_diag_opts tui_diag_opts(const tui *t);

/* Screens that are one scrolling document (help, causes): fill draws it. */
typedef void (*doc_fill)(tui *t, doc *dc);
void doc_screen_draw(tui *t, WINDOW *w, const char *title, doc_fill fill, int scroll);
/* Up/Down/PgUp/PgDn/g/G scroll it; Esc/q go back. */
unsigned doc_screen_action(tui *t, tb_action a, doc_fill fill, int *scroll);

/* Drawing helpers shared by the screens (heatmap.c). */
void ui_put(WINDOW *w, int y, int x, attr_t a, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void ui_fmt_num(double v, char *buf, size_t size);

#endif
