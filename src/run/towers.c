#include "config.h"

#include <stdio.h>
#include <string.h>

#include "model/naming.h"
#include "model/pairing.h"
#include "run/run.h"
#include "run/towers.h"

static void compare_one(const tb_run_config *cfg, const char *tower, tb_tower_summary *s)
{
	/* the same configuration, the tower's grid, no pass recorded (a
	 * tower's grid is not the pair's history) */
	tb_run_config tc = *cfg;
	tb_run run = {0};
	tb_err err;

	memset(s, 0, sizeof *s);
	s->name = tower;
	tc.opts.tower = tower;
	tc.opts.record = TB_RECORD_NONE;
	if (tb_run_exec(&run, &tc, &err) < 0) {
		s->failed = true;
		tb_err_text(&err, s->error, sizeof s->error);
		return;
	}
	s->verdict = run.res->verdict;
	s->cells = run.res->n_cells;
	memcpy(s->count, run.res->count, sizeof s->count);
	if (run.res->first_div >= 0)
		tb_cell_name(&run.res->cells[run.res->first_div].cell, s->first, sizeof s->first);
	tb_run_done(&run);
}

size_t tb_towers_compare(const tb_run_config *cfg, const tb_run *text, tb_tower_summary *out, size_t max)
{
	const char *towers[TB_MAX_TOWERS];
	size_t nt = tb_tower_names(towers, TB_MAX_TOWERS), n = 0;

	for (size_t i = 0; i < nt && n < max; i++)
		if (tb_tree_holds_tower(text->sess.ref, towers[i]) && tb_tree_holds_tower(text->sess.cand, towers[i]))
			compare_one(cfg, towers[i], &out[n++]);
	return n;
}

void tb_tower_text(const tb_tower_summary *s, char *buf, size_t size)
{
	if (s->failed) {
		snprintf(buf, size, "%s: not compared: %s", s->name, s->error);
		return;
	}
	snprintf(buf, size, "%s: %zu cells (%zu match, %zu close, %zu diverged, %zu missing): %s%s%s", s->name, s->cells,
		 s->count[TB_ST_MATCH], s->count[TB_ST_CLOSE], s->count[TB_ST_DIVERGED], s->count[TB_ST_MISSING],
		 tb_status_name(s->verdict), s->first[0] ? " at " : "", s->first);
}
