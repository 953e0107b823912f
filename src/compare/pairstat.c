#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "compare/estimate.h"
#include "compare/pairstat.h"

float *tb_tensor_load_f32(const tb_tensor *t, tb_err *err)
{
	float *x;

	if (t->numel > TB_LOAD_MAX_ELEMS) {
		tb_err_setc(err, TB_ERR_LIMIT, t->path, "tensor '%s' is too large to analyse whole", t->name);
		return NULL;
	}
	x = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *x);
	if (!x) {
		tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory loading tensor '%s'", t->name);
		return NULL;
	}
	if (tb_tensor_acquire(t, err) < 0) {
		free(x);
		return NULL;
	}
	tb_tensor_read_f32(t, 0, t->numel, x);
	tb_tensor_release(t);
	return x;
}

typedef struct metrics_ctx {
	tb_acc acc;
	const tb_tolerance *tol;
} metrics_ctx;

static int metrics_block(void *ctx, const float *r, const float *c, size_t n, uint64_t off)
{
	metrics_ctx *mc = ctx;

	tb_acc_run(&mc->acc, r, c, n, off, mc->tol->atol, mc->tol->rtol, NULL);
	return 0;
}

int tb_tensor_pair_metrics(const tb_tensor *ref, const tb_tensor *cand, uint64_t n, const tb_tolerance *tol, tb_metrics *m,
			   tb_err *err)
{
	metrics_ctx mc = {.tol = tol};

	if (ref->numel != cand->numel)
		return tb_err_setc(err, TB_ERR_USAGE, cand->path, "tensors '%s' and '%s' differ in size", ref->name,
				   cand->name);
	tb_acc_init(&mc.acc);
	if (tb_tensor_pair_blocks(ref, cand, n, metrics_block, &mc, err) < 0)
		return -1;
	if (tb_metrics_finish(m, &mc.acc, NULL, 0, 0, tol->diverge) < 0)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	return 0;
}

/* 1 at the first block that differs. */
static int differ_block(void *ctx, const float *x, const float *y, size_t n, uint64_t off)
{
	(void)ctx;
	(void)off;
	return memcmp(x, y, n * sizeof *x) != 0;
}

int tb_tensors_equal(tb_tensor *a, tb_tensor *b, tb_err *err)
{
	int rc;

	if (a->numel != b->numel)
		return 0;
	if (a->sketch || b->sketch) { /* equal block hashes prove it */
		double rel;
		bool exact;
		if (tb_sketch_rel_l2(a, b, &rel, &exact, err) < 0)
			return -1;
		return exact;
	}
	rc = tb_tensor_pair_blocks(a, b, 0, differ_block, NULL, err);
	return rc < 0 ? -1 : !rc;
}
