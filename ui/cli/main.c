/*
 * tbisect: find where a ported model first diverges from its reference.
 * The front end: parse the command line, run one mode, own the exit code.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"

int main(int argc, char **argv)
{
	tb_options o;
	char msg[512];

	if (tb_options_parse(argc, argv, &o, msg, sizeof msg) < 0) {
		fprintf(stderr, "tbisect: %s\n(try 'tbisect --help')\n", msg);
		return TB_EXIT_BAD_INPUT;
	}
	switch (o.mode) {
	case TB_MODE_HELP:
		tb_usage(stdout);
		return 0;
	case TB_MODE_VERSION:
		printf("tbisect %s\n", PACKAGE_VERSION);
		return 0;
	case TB_MODE_LS:
		return tb_cmd_ls(&o);
	case TB_MODE_CHECK:
		return tb_cmd_check(&o);
	case TB_MODE_SUGGEST:
		return tb_cmd_suggest(&o);
	case TB_MODE_CALIBRATE:
		return tb_cmd_calibrate(&o);
	case TB_MODE_SKETCH:
		return tb_cmd_sketch(&o);
	case TB_MODE_MCP:
		return tb_cmd_mcp(&o);
	case TB_MODE_KEYS:
		return tb_cmd_keys();
	case TB_MODE_COMPLETION:
		return tb_cmd_completion(o.action_arg);
	case TB_MODE_TUI:
		return tb_cmd_tui(&o);
	}
	return TB_EXIT_BAD_INPUT;
}
