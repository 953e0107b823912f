/*
 * tools: the MCP tool table (names fixed by tbisect(1) MCP SERVER): each
 * tool's schemas, annotations and handler.
 */
#ifndef TB_MCP_TOOLS_H
#define TB_MCP_TOOLS_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "mcp/pairs.h"

void mcp_tools_list(cJSON *tools);
/* Run the tool: 0 with *result (a CallToolResult), or -1 when there is
 * no such tool (a protocol error, msg says so). */
int mcp_tools_call(const char *name, const cJSON *args, mcp_call *call, cJSON **result, char *msg, size_t size);

#endif
