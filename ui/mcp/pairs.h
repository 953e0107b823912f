/*
 * pairs: the pairs of trees open_pair opened (tbisect(1) MCP SERVER), kept
 * by id ("p1") and compared again when their files change, through
 * src/run as check does; and what a request under way carries.
 */
#ifndef TB_MCP_PAIRS_H
#define TB_MCP_PAIRS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "run/run.h"

/* The server's defaults for every pair: the command line's options. */
typedef struct mcp_defaults {
	tb_run_opts run;
} mcp_defaults;

/* One request under way: what a long comparison needs to report
 * progress and notice that the client cancelled it. */
typedef struct mcp_call {
	const cJSON *id;             /* the request's id */
	const cJSON *progress_token; /* params._meta.progressToken, or NULL */
	bool cancelled;              /* notifications/cancelled named this request */
	bool progressed;             /* a progress notification was sent */
	size_t progress;             /* the last one's progress (each must be higher) */
	double progress_at;          /* and when it was sent (monotonic seconds) */
	/* While a comparison runs: read what came in (queued for later, except
	 * a cancellation of this call) and send progress; false once the call
	 * is cancelled.  Set by the server (rpc.c), called by the pairs. */
	bool (*poll)(struct mcp_call *call, size_t done, size_t total, const char *what);
} mcp_call;

typedef struct mcp_pair mcp_pair;
/* What open_pair asks for; strings borrowed. */
typedef struct mcp_pair_spec {
	const char *ref, *cand, *map, *tol_file;
	tb_tolerance tol;
	int heads, kv_heads, step; /* 0, 0, -1: the defaults */
} mcp_pair_spec;

void mcp_pairs_init(const mcp_defaults *d);
/* The command line's tolerance, which open_pair's tol refines. */
const tb_tolerance *mcp_pairs_tolerance(void);
void mcp_pairs_free(void);
/* Open (or find, when the same spec was opened) a pair and compare it. */
mcp_pair *mcp_pair_open(const mcp_pair_spec *spec, mcp_call *call, tb_err *err);
/* The pair of id "p3", compared again first when its files changed since. */
mcp_pair *mcp_pair_get(const char *id, mcp_call *call, tb_err *err);
const char *mcp_pair_id(const mcp_pair *p);
size_t mcp_pair_count(void);
mcp_pair *mcp_pair_at(size_t i);
/* The pair's run (trees, result, diagnosis) and its report tree
 * (tb_report_json_tree of check --json's report); borrowed. */
tb_run *mcp_pair_run(mcp_pair *p);
const cJSON *mcp_pair_report(const mcp_pair *p);
/* How many times the pair was compared, and the stamps of its trees'
 * files (hex) the last comparison saw. */
int mcp_pair_loads(const mcp_pair *p);
const char *mcp_pair_stamp(const mcp_pair *p, int side);
/* Record the pair's last comparison as a pass (compare_passes record):
 * 1 recorded, 0 not (the inputs are the last pass's), -1 and err. */
int mcp_pair_record(mcp_pair *p, bool reset, tb_history *h, tb_err *err);
/* The pair's history, read from disk (empty when none is kept). */
void mcp_pair_history(mcp_pair *p, tb_history *h);
/* The index of the cell named name ("L3.attn", "embed") in the result, or -1. */
long mcp_pair_cell(mcp_pair *p, const char *name);

#endif
