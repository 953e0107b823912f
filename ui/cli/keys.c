#include "config.h"

#include <stdio.h>

#include "cli/commands.h"
#include "tui/cmdline.h"
#include "tui/keymap.h"

int tb_cmd_keys(void)
{
	char keys[128];

	for (int a = 1; a < TB_ACT_COUNT; a++) {
		tb_action_keys((tb_action)a, keys, sizeof keys);
		printf("key\t%s\t%s\t%s\n", keys, tb_action_infos[a].name, tb_action_infos[a].help);
	}
	for (size_t i = 0; i < ui_n_cmds; i++)
		printf("command\t%s\t%s\n", ui_cmds[i].usage, ui_cmds[i].help);
	return fflush(stdout) == 0 ? TB_EXIT_OK : TB_EXIT_BAD_INPUT;
}
