#include "config.h"

#include <stdio.h>

#include "cli/commands.h"
#include "run/fingerprint.h"

int tb_cmd_sketch(const tb_options *o)
{
	tb_run_opts ro;
	tb_run_config cfg;
	tb_fingerprint_stats st;
	tb_err err;
	int rc = TB_EXIT_OK;

	tb_run_opts_from(o, &ro);
	if (tb_run_config_load(&cfg, &ro, &err) < 0)
		return tb_die(&err);
	if (o->merge_paths) {
		if (tb_run_sketch_merge(&cfg, (const char *const *)o->merge_paths, o->n_merge, o->output, &st, &err) < 0)
			rc = tb_die(&err);
		else
			fprintf(stderr, "tbisect: wrote %s: %zu tensors merged from %d parts, %llu bytes\n", o->output,
				st.tensors, o->n_merge, (unsigned long long)st.sketch_bytes);
		tb_run_config_done(&cfg);
		return rc;
	}
	if (tb_run_sketch(&cfg, o->paths[0], o->rank, o->ranks ? o->ranks : 1, o->output, o->seed, &st, &err) < 0) {
		rc = tb_die(&err);
	} else {
		double share = st.tree_bytes ? 100.0 * (double)st.sketch_bytes / (double)st.tree_bytes : 0.0;
		fprintf(stderr, "tbisect: wrote %s: %zu tensors, %llu bytes (%.2f%% of the tree's %llu), seed %llu\n",
			o->output, st.tensors, (unsigned long long)st.sketch_bytes, share,
			(unsigned long long)st.tree_bytes, (unsigned long long)o->seed);
		/* a sketch's size is mostly per tensor, row and column: on short
		 * rows it is no fingerprint to carry instead of the tree */
		if (share >= 10)
			fprintf(stderr,
				"tbisect: note: the sketch is %.0f%% of the tree: each tensor, row and column carry a "
				"fixed part, under 1%% of a model's activations (rows of 1024 values or more, hundreds "
				"of positions); a tree this small is cheaper to copy, and compared itself exactly\n",
				share);
		if (st.partial)
			fprintf(stderr,
				"tbisect: note: left out %zu partial sum%s ('%s'%s): the ranks' shares add up, their norms do "
				"not; sketch them from a tree of their ranks joined and give that sketch to `sketch merge` "
				"with the ranks'\n",
				st.partial, st.partial > 1 ? "s" : "", st.first_partial, st.partial > 1 ? ", ..." : "");
	}
	tb_run_config_done(&cfg);
	return rc;
}
