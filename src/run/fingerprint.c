#include "config.h"

#include <string.h>
#include <unistd.h>

#include "formats/tbsk.h"
#include "model/naming.h"
#include "run/fingerprint.h"
#include "tensor/sketch.h"

static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

int tb_run_sketch(const tb_run_config *cfg, const char *path, const char *out, uint64_t seed,
		  tb_fingerprint_stats *stats, tb_err *err)
{
	tb_listing l;
	tb_tbsk_writer w;
	int rc = 0;

	memset(stats, 0, sizeof *stats);
	if (tb_run_list(cfg, path, &l, err) < 0)
		return -1;
	if (l.tree->n_tensors > UINT32_MAX) {
		tb_listing_free(&l);
		return tb_err_setc(err, TB_ERR_LIMIT, path, "too many tensors for a sketch");
	}
	if (tb_tbsk_begin(&w, out, seed, (uint32_t)l.tree->n_tensors, err) < 0) {
		tb_listing_free(&l);
		return -1;
	}
	for (size_t i = 0; i < l.tree->n_tensors && rc == 0; i++) {
		tb_tensor *t = l.tree->tensors[i];
		tb_sketch_params p;
		tb_sketch s;
		tb_cell cell;
		char name[TB_CELL_NAME_MAX] = "";

		if (t->sketch) {
			rc = tb_err_setc(err, TB_ERR_USAGE, t->path, "'%s' is already a sketch", t->name);
			break;
		}
		if (t->partial) {
			rc = tb_err_setc(err, TB_ERR_UNSUPPORTED, t->path,
					 "'%s' holds only some of its values (a partial dump): no sketch of it", t->name);
			break;
		}
		if (tb_namer_map(l.namer, t->name, l.names.shared, &cell, NULL, 0))
			tb_cell_name(&cell, name, sizeof name);
		tb_sketch_params_for(t, seed, &p);
		if (tb_sketch_alloc(&s, &p) < 0) {
			rc = tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory sketching '%s'", t->name);
			break;
		}
		rc = tb_sketch_tensor(t, &s, cfg->opts.threads > 0 ? cfg->opts.threads : online_cpus(), err);
		if (rc == 0)
			rc = tb_tbsk_add(&w, t, name, &s, err);
		tb_sketch_free(&s);
		stats->tree_bytes += t->numel * tb_dtype_size(t->dtype);
		stats->tensors++;
	}
	if (rc == 0)
		rc = tb_tbsk_end(&w, &stats->sketch_bytes, err);
	else
		tb_tbsk_abort(&w);
	tb_listing_free(&l);
	return rc;
}
