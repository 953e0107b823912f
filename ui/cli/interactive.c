#include "config.h"

#include <stdlib.h>

#include "cli/commands.h"
#include "run/run.h"
#include "tui/loop.h"

int tb_cmd_tui(const tb_options *o)
{
	const char *script = getenv("TBISECT_SCRIPT");
	tui_opts to = {0};
	tb_run_opts ro;
	tb_run_config cfg;
	tb_run run = {0};
	tb_err err;
	int rc;

	tb_run_opts_from(o, &ro);
	/* the view records its passes in memory under --no-history, and when
	 * the state directory cannot be used */
	ro.record = o->no_history ? TB_RECORD_MEMORY : TB_RECORD_DISK_OR_MEMORY;
	/* Under --allow-partial the view opens even on a pairing of nothing, to
	 * pair it (M, y): it shows no verdict, records no pass and exits 2
	 * until something pairs. */
	ro.allow_empty = ro.allow_partial;
	if (tb_run_config_load(&cfg, &ro, &err) < 0)
		return tb_die(&err);
	if (tb_run_open(&run, &cfg, &err) < 0) {
		tb_run_config_done(&cfg);
		return tb_die(&err);
	}
	to.cfg = &cfg;
	to.watch = o->watch;
	to.no_history = o->no_history;
	to.no_mouse = o->no_mouse;
	to.script = script && *script ? script : NULL;
	rc = tui_main(&to, &run);
	tb_run_config_done(&cfg);
	return rc;
}
