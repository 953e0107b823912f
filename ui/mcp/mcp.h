/*
 * mcp: `tbisect mcp`, a Model Context Protocol server over stdio
 * (tbisect(1) MCP SERVER).  One JSON-RPC 2.0 message per line on standard
 * input and output, nothing else on stdout; logs go to stderr.
 *
 * The parts, one job each:
 *   rpc.c      the line loop: reads requests, answers the protocol's own
 *              methods, hands tool calls and resource reads on;
 *   pairs.c    the pairs open_pair opened, kept by id and compared again
 *              when their files change (through src/run, as check does);
 *   tools.c    the tool table (name, schemas, annotations, handler);
 *   answers.c  the answers, cut out of check --json's report tree.
 *
 * Protocol sources (read 2026-12 through the project's search tool):
 * modelcontextprotocol.io/specification/2025-11-25/basic/lifecycle
 * (initialize, notifications/initialized, version negotiation),
 * .../2025-11-25/server/tools (tools/list, tools/call, outputSchema,
 * structuredContent with the same JSON as text, isError, annotations),
 * .../2025-11-25/server/resources (resources/list, templates, read),
 * .../2025-11-25/basic/utilities (ping, progress, cancellation), and
 * .../2026-07-28/server/discover with .../2026-07-28/changelog (no
 * handshake; "_meta" carries io.modelcontextprotocol/protocolVersion on
 * every request; results carry resultType "complete").
 */
#ifndef TB_MCP_H
#define TB_MCP_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "run/run.h"

/* A request longer than this is answered with an error and skipped. */
#define MCP_MAX_LINE (1u << 20)

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
} mcp_call;

/* rpc.c: while a comparison runs, read what came in (queued for later,
 * except a cancellation of call) and send progress; false once call is
 * cancelled. */
bool mcp_poll(mcp_call *call, size_t done, size_t total, const char *what);

/* pairs.c */
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

/* tools.c: the tool table. */
void mcp_tools_list(cJSON *tools);
/* Run the tool: 0 with *result (a CallToolResult), or -1 when there is
 * no such tool (a protocol error, msg says so). */
int mcp_tools_call(const char *name, const cJSON *args, mcp_call *call, cJSON **result, char *msg, size_t size);

/* answers.c: the answers, each a cJSON object the caller owns; NULL and
 * err on a bad argument. */
cJSON *mcp_answer_pair(mcp_pair *p);
cJSON *mcp_answer_first(mcp_pair *p);
cJSON *mcp_answer_cell(mcp_pair *p, long cell, bool detail, tb_err *err);
cJSON *mcp_answer_causes(mcp_pair *p, long cell, tb_err *err);
cJSON *mcp_answer_cells(mcp_pair *p, const char *status, const char *match, const char *cursor, int limit,
			tb_err *err);
cJSON *mcp_answer_replay(mcp_pair *p, long cell, const char *variant, tb_err *err);
cJSON *mcp_answer_suggest(mcp_pair *p, tb_err *err);
cJSON *mcp_answer_passes(mcp_pair *p, bool record, bool reset, int last, tb_err *err);

/* The porting skill (data/mcp-skill.md, compiled in). */
extern const char tb_mcp_skill[];

/* The server: read requests until standard input ends; the exit code. */
int mcp_serve(const mcp_defaults *d);

#endif
