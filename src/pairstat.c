#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pairstat.h"

#define BLOCK (1u << 14)

float *tb_tensor_load_f32(tb_tensor *t, tb_err *err)
{
	float *x;

	if (t->numel > TB_LOAD_MAX_ELEMS) {
		tb_err_set(err, t->path, "tensor '%s' is too large to analyse whole", t->name);
		return NULL;
	}
	x = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *x);
	if (!x) {
		tb_err_set(err, t->path, "out of memory loading tensor '%s'", t->name);
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

int tb_tensor_pair_metrics(tb_tensor *ref, tb_tensor *cand, uint64_t n, const tb_tolerance *tol, tb_metrics *m,
			   tb_err *err)
{
	float r[BLOCK], c[BLOCK];
	tb_acc acc;

	if (ref->numel != cand->numel)
		return tb_err_set(err, cand->path, "tensors '%s' and '%s' differ in size", ref->name, cand->name);
	if (tb_tensor_acquire(ref, err) < 0)
		return -1;
	if (tb_tensor_acquire(cand, err) < 0) {
		tb_tensor_release(ref);
		return -1;
	}
	if (n == 0 || n > ref->numel)
		n = ref->numel;
	tb_acc_init(&acc);
	for (uint64_t off = 0; off < n; off += BLOCK) {
		size_t k = n - off < BLOCK ? (size_t)(n - off) : BLOCK;
		tb_tensor_read_f32(ref, off, k, r);
		tb_tensor_read_f32(cand, off, k, c);
		tb_acc_run(&acc, r, c, k, off, tol->atol, tol->rtol, NULL);
	}
	tb_tensor_release(ref);
	tb_tensor_release(cand);
	return tb_metrics_finish(m, &acc, NULL, 0, 0, tol->diverge) < 0 ? tb_err_set(err, NULL, "out of memory") : 0;
}

int tb_tensors_equal(tb_tensor *a, tb_tensor *b, tb_err *err)
{
	float x[BLOCK], y[BLOCK];
	int same = 1;

	if (a->numel != b->numel)
		return 0;
	if (tb_tensor_acquire(a, err) < 0)
		return -1;
	if (tb_tensor_acquire(b, err) < 0) {
		tb_tensor_release(a);
		return -1;
	}
	for (uint64_t off = 0; same && off < a->numel; off += BLOCK) {
		size_t n = a->numel - off < BLOCK ? (size_t)(a->numel - off) : BLOCK;
		tb_tensor_read_f32(a, off, n, x);
		tb_tensor_read_f32(b, off, n, y);
		same = !memcmp(x, y, n * sizeof *x);
	}
	tb_tensor_release(a);
	tb_tensor_release(b);
	return same;
}
