#include "config.h"

#include <stdio.h>

#include "commands.h"

int tb_cmd_tui(const tb_options *o)
{
	(void)o;
	fprintf(stderr, "tbisect: the interactive view is not part of this build yet; use 'tbisect check REF CAND'\n");
	return TB_EXIT_BAD_INPUT;
}
