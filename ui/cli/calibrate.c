#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "run/calibrate.h"

/* Differences this large between two runs of one model are no noise. */
#define NOT_NOISE 0.1

static int fill_text(FILE *f, const void *ctx)
{
	return fputs(ctx, f) < 0 || fputc('\n', f) == EOF ? -1 : 0;
}

int tb_cmd_calibrate(const tb_options *o)
{
	tb_run_opts ro;
	tb_run_config cfg;
	tb_run run = {0};
	tb_err err;
	char *text = NULL;
	int rc = TB_EXIT_OK;

	tb_run_opts_from(o, &ro);
	if (tb_run_config_load(&cfg, &ro, &err) < 0)
		return tb_die(&err);
	if (tb_run_exec(&run, &cfg, &err) < 0) {
		tb_run_config_done(&cfg);
		return tb_die(&err);
	}
	for (size_t i = 0; i < run.res->n_cells; i++) {
		const tb_cell_result *c = &run.res->cells[i];
		if (c->m.estimated) {
			tb_err_setc(&err, TB_ERR_USAGE, c->ref->sketch ? c->ref->path : c->cand->path,
				    "a sketch: calibrate measures the noise between two runs' values (give it both trees)");
			rc = tb_die(&err);
			goto out;
		}
	}
	for (size_t i = 0; i < run.res->n_cells; i++) {
		const tb_cell_result *c = &run.res->cells[i];
		char name[TB_CELL_NAME_MAX];
		if (!c->ref || !c->cand || !(c->m.rel_l2 > NOT_NOISE))
			continue;
		tb_cell_name(&c->cell, name, sizeof name);
		fprintf(stderr, "tbisect: warning: %s differs by rel_l2 %.3g between the two runs: more than noise (the same model?)\n",
			name, c->m.rel_l2);
	}
	text = tb_calibrate_json(run.res, o->paths[0], o->paths[1], o->factor, &err);
	if (!text || tb_write_file(o->output, "the tolerance file", 0, fill_text, text, &err) < 0)
		rc = tb_die(&err);
	else
		fprintf(stderr, "tbisect: wrote %s: %zu cells, %g times the noise between %s and %s\n", o->output,
			run.res->n_cells, o->factor, o->paths[0], o->paths[1]);
out:
	free(text);
	tb_run_done(&run);
	tb_run_config_done(&cfg);
	return rc;
}
