/*
 * answers: what the MCP tools answer, cut out of check --json's report
 * tree of a pair (and the inspection of a cell, its replay, the suggested
 * map, the passes).
 */
#ifndef TB_MCP_ANSWERS_H
#define TB_MCP_ANSWERS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "base/error.h"
#include "mcp/pairs.h"

/* The answers, each a cJSON object the caller owns; NULL and
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

#endif
