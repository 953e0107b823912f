/*
 * history: the passes of the iteration loop for one (ref, cand) pair: each
 * check or reload whose inputs changed records when it ran, digests of
 * the candidate's values and of all its inputs, the first divergence, the
 * top cause, the status counts and the tolerance, and how the first
 * divergence moved since the previous pass (later, earlier, stuck although
 * the candidate changed).
 *
 * Stored as JSON under $XDG_STATE_HOME/tbisect/ (default
 * ~/.local/state/tbisect/), one file per pair, written atomically (temp
 * file, fsync, rename), bounded to TB_HISTORY_MAX passes, never inside a
 * dump tree.  A corrupt file is set aside (renamed) with a warning, never
 * fatal.  A tb_history owns its passes; tb_history_done releases them.
 */
#ifndef TB_HISTORY_H
#define TB_HISTORY_H

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "compare/compare.h"
#include "diagnose/diagnose.h"
#include "base/error.h"
#include "model/session.h"

#define TB_HISTORY_MAX 200
/* A warning quotes the history file, where it was set aside and why. */
#define TB_HISTORY_WARNING_MAX (2 * PATH_MAX + TB_ERR_MSG_MAX + 64)

typedef enum tb_move {
	TB_MOVE_FIRST,     /* no earlier pass */
	TB_MOVE_LATER,     /* first divergence moved later (progress) */
	TB_MOVE_EARLIER,   /* moved earlier (regression) */
	TB_MOVE_STUCK,     /* candidate changed, first divergence did not move */
	TB_MOVE_UNCHANGED, /* candidate unchanged since the last pass (the reference or the settings changed) */
	TB_MOVE_MATCHED,   /* nothing diverges any more */
	TB_MOVE_BROKE,     /* matched before, diverges now */
} tb_move;

typedef struct tb_pass {
	int number;                 /* 1-based */
	time_t when;
	char cand_digest[17];       /* hex, of the candidate's tensors (names, dtypes, shapes, values) */
	char input_digest[17];      /* hex, of both trees' tensors, the pairing and every cell's tolerance */
	char ref_digest[17];        /* hex, of the reference's tensors */
	char ref_stat[17], cand_stat[17]; /* hex, of each tree's files' paths, inodes, sizes and times: unchanged
					   * since the last pass, its digests stand without reading the files */
	char first_div[TB_CELL_NAME_MAX]; /* "L0.attn", "" when nothing diverged */
	long first_div_index;       /* its place in forward order, -1 when none */
	char top_cause[64];         /* "" when none */
	char verdict[16];
	size_t count[TB_ST_COUNT];
	tb_tolerance tol;
	tb_move move;
	long delta;                 /* cells moved (later positive) */
	char note[320];             /* "pass 3: first divergence L0.attn -> L2.mlp (later by 7 cells)", with advice */
} tb_pass;

typedef struct tb_history {
	char path[PATH_MAX];        /* the pair's history file */
	tb_pass *passes;            /* oldest first */
	size_t n;
	char warning[TB_HISTORY_WARNING_MAX]; /* non-fatal trouble (corrupt file set aside), "" if none */
	bool in_memory;             /* passes are recorded but never saved */
} tb_history;

/* Load the history of this pair (empty when none).  Never fails: when the
 * state directory cannot be used, or lies inside a dump tree, or the file
 * is corrupt, h->warning says so and (for the first two) recording is off. */
void tb_history_open(const tb_session *s, tb_history *h);
/* An empty history that records passes in memory only, never on disk (the
 * interactive view under --no-history, or when the state directory cannot
 * be used: reloads still say how the first divergence moved). */
void tb_history_init_memory(tb_history *h);
/* Which trees' value digests the next pass recorded on disk must read
 * (stale[0] the reference's, stale[1] the candidate's): those whose files
 * changed since the last pass.  When no history file can be kept: all
 * when the pass goes to memory instead (in_memory), else none.  The
 * comparison adds them up as it reads the rows (tb_compare_opts.digest),
 * so recording the pass reads nothing again. */
void tb_history_stale(const tb_session *s, bool in_memory, bool stale[2]);
/* Append this run as a pass (computing its movement) and save: 1.  The
 * trees' digests take the value digests r added up (tb_cell_result.digest)
 * and read the tensors it did not.  When
 * its inputs (input_digest) are those of the last pass, nothing is
 * recorded: 0.  -1 when the tensors cannot be read for the digest or the
 * file cannot be written. */
int tb_history_record(tb_history *h, const tb_session *s, const tb_result *r, const tb_diagnosis *d, tb_err *err);
/* Forget the pair's passes: *h is emptied and, unless it is in memory only,
 * the pair's file (found from s, as tb_history_open does) is removed, so
 * the next pass is pass 1.  -1 when the file cannot be removed. */
int tb_history_reset(tb_history *h, const tb_session *s, tb_err *err);
void tb_history_done(tb_history *h);

/* "later", "earlier", ... */
const char *tb_move_name(tb_move m);
/* A move that needs the user's attention: earlier, stuck, broke. */
bool tb_move_is_bad(tb_move m);
/* One pass as the JSON report's "history" entries. */
cJSON *tb_pass_json(const tb_pass *p);

/* The digest of a tree's tensors: names, dtypes, shapes and values (not
 * file names or times).  -1 when a tensor cannot be read. */
int tb_tree_digest(const tb_tree *tree, char out[17], tb_err *err);

#endif
