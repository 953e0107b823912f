#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include "cli/commands.h"
#include "mcp/rpc.h"

int tb_cmd_mcp(const tb_options *o)
{
	mcp_defaults d;

	if (o->skill) {
		fputs(tb_mcp_skill, stdout);
		return fflush(stdout) == 0 ? TB_EXIT_OK : TB_EXIT_BAD_INPUT;
	}
	/* The command line's options are every pair's defaults; open_pair's
	 * arguments override them. */
	tb_run_opts_from(o, &d.run);
	if (o->map_file && o->map_file[0] == '-' && !o->map_file[1]) {
		fputs("tbisect: mcp: --map - cannot be read: standard input carries the protocol\n", stderr);
		return TB_EXIT_BAD_INPUT;
	}
	/* Someone who typed it at a terminal learns what it waits for; stdout stays protocol only. */
	if (isatty(STDIN_FILENO))
		fputs("tbisect mcp: a Model Context Protocol server for coding agents, waiting for JSON-RPC lines on "
		      "standard input (Ctrl-D ends it); tbisect mcp --skill says how to add it to an agent\n",
		      stderr);
	return mcp_serve(&d);
}
