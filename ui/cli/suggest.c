#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "run/run.h"
#include "run/suggest.h"

int tb_cmd_suggest(const tb_options *o)
{
	tb_run_opts ro;
	tb_run_config cfg;
	tb_run run = {0};
	tb_suggestion sg;
	tb_err err;
	char *text;
	int rc = TB_EXIT_OK;

	tb_run_opts_from(o, &ro);
	/* The pairing to fix is usually the partial one, or none at all. */
	ro.allow_partial = true;
	ro.allow_empty = true;
	if (tb_run_config_load(&cfg, &ro, &err) < 0)
		return tb_die(&err);
	if (tb_run_open(&run, &cfg, &err) < 0 || tb_suggest_map(&run.sess, &sg, &err) < 0) {
		rc = tb_die(&err);
		goto out;
	}
	text = tb_suggestion_json(&sg);
	if (!text) {
		tb_err_setc(&err, TB_ERR_NOMEM, NULL, "out of memory writing the map");
		rc = tb_die(&err);
	} else {
		puts(text);
		free(text);
		if (!sg.unpaired[0] && !sg.unpaired[1])
			fprintf(stderr, "tbisect: every tensor of %s and %s has a name tbisect knows: nothing to suggest\n",
				o->paths[0], o->paths[1]);
		else if (sg.n == 0)
			for (int side = 0; side < 2; side++)
				if (sg.unpaired[side])
					fprintf(stderr, "tbisect: no rule found for the %zu unmapped names of %s: %s\n",
						sg.unpaired[side], o->paths[side],
						sg.holes[side] ? "none of them lines up with a cell the other tree has and this one "
								 "lacks (the same element count, or a partial dump's printed values "
								 "at their places, and values alike)"
							       : "the other tree has no cell this one lacks, and the trees' own "
								 "structure names none of them");
	}
	tb_suggestion_done(&sg);
	if (fflush(stdout) != 0) {
		tb_err_setc(&err, TB_ERR_IO, NULL, "cannot write the map to standard output");
		rc = tb_die(&err);
	}
out:
	tb_run_done(&run);
	tb_run_config_done(&cfg);
	return rc;
}
