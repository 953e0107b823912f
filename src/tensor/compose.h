/*
 * compose: tensors assembled from others without copying data: the shards
 * of a tensor-parallel run joined along their split axis or summed (the
 * partial outputs of row-parallel ranks), decode steps joined along the
 * sequence axis, a column range of such a tensor, and the elements of a
 * tensor that the other side's dump printed (a gather).  Reading a composite
 * reads through to its parts block by block (tensor.h), so no whole tensor
 * is ever gathered in memory.
 *
 * The caller owns a composite (tb_compose_free) and must free it before
 * the trees its parts belong to; the parts are borrowed.
 */
#ifndef TB_COMPOSE_H
#define TB_COMPOSE_H

#include "base/error.h"
#include "tensor/tensor.h"

/* Parts of one dtype and rank whose shapes differ only along axis. */
int tb_compose_concat(tb_tensor *const *parts, int n, int axis, const char *name, tb_tensor **out, tb_err *err);
/* Parts of one dtype and shape, added element by element. */
int tb_compose_sum(tb_tensor *const *parts, int n, const char *name, tb_tensor **out, tb_err *err);
/* t[..., start:start+width] (t may itself be a composite). */
int tb_compose_columns(tb_tensor *t, int64_t start, int64_t width, const char *name, tb_tensor **out,
		       tb_err *err);
/* t.flat[index[i]] for i < n, 1-D (a copy of index is kept). */
int tb_compose_gather(tb_tensor *t, const uint64_t *index, uint64_t n, const char *name, tb_tensor **out,
		      tb_err *err);
/* The same, laid out in shape (ndim dims, as many elements as index holds). */
int tb_compose_gather_as(tb_tensor *t, const uint64_t *index, int ndim, const int64_t *shape, const char *name,
			 tb_tensor **out, tb_err *err);
/* t.flat[order[i]] for i < n, 1-D, carrying a tb_partial: the elements
 * index[i] of a whole tensor of shape (ndim dims).  Copies of order and
 * index are kept. */
int tb_compose_partial(tb_tensor *t, const uint64_t *order, const uint64_t *index, uint64_t n, int ndim,
		       const int64_t *shape, const char *name, tb_tensor **out, tb_err *err);
void tb_compose_free(tb_tensor *t);

#endif
