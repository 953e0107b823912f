/*
 * rpc: `tbisect mcp`, a Model Context Protocol server over stdio
 * (tbisect(1) MCP SERVER).  One JSON-RPC 2.0 message per line on standard
 * input and output, nothing else on stdout; logs go to stderr.
 *
 * The parts, one job each, each lower one knowing nothing of those above:
 *   rpc        the line loop: reads requests, answers the protocol's own
 *              methods, hands tool calls and resource reads on;
 *   tools      the tool table (name, schemas, annotations, handler);
 *   answers    the answers, cut out of check --json's report tree;
 *   pairs      the pairs open_pair opened, kept by id and compared again
 *              when their files change (through src/run, as check does).
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
#ifndef TB_MCP_RPC_H
#define TB_MCP_RPC_H

#include "mcp/pairs.h"

/* A request longer than this is answered with an error and skipped. */
#define MCP_MAX_LINE (1u << 20)

/* The porting skill (data/mcp-skill.md, compiled in by Makefile.am). */
extern const char tb_mcp_skill[];

/* The server: read requests until standard input ends; the exit code. */
int mcp_serve(const mcp_defaults *d);

#endif
