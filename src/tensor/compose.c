#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/compose.h"

/* A composite of n parts with the first part's dtype, path and shape. */
static tb_tensor *composite(tb_tensor *const *parts, int n, tb_parts_kind kind, const char *name, tb_err *err)
{
	tb_tensor *t = calloc(1, sizeof *t);
	tb_tensor_parts *p = calloc(1, sizeof *p);

	if (t && p) {
		t->name = strdup(name);
		p->part = malloc((size_t)n * sizeof *p->part);
	}
	if (!t || !p || !t->name || !p->part) {
		if (p)
			free(p->part);
		free(p);
		if (t)
			free(t->name);
		free(t);
		tb_err_setc(err, TB_ERR_NOMEM, parts[0]->path, "out of memory");
		return NULL;
	}
	memcpy(p->part, parts, (size_t)n * sizeof *p->part);
	p->n = n;
	p->kind = kind;
	t->parts = p;
	t->path = parts[0]->path;
	t->dtype = parts[0]->dtype;
	t->ndim = parts[0]->ndim;
	memcpy(t->shape, parts[0]->shape, sizeof t->shape);
	return t;
}

/* numel and C strides from the shape (a composite is read in C order). */
static int finish(tb_tensor *t, tb_tensor **out, tb_err *err)
{
	uint64_t numel = 1;
	int64_t s = 1;

	for (int d = t->ndim - 1; d >= 0; d--) {
		if (__builtin_mul_overflow(numel, (uint64_t)t->shape[d], &numel)) {
			tb_err_setc(err, TB_ERR_FORMAT, t->path, "tensor '%s': element count overflows", t->name);
			tb_compose_free(t);
			return -1;
		}
		t->stride[d] = s;
		s *= t->shape[d] ? t->shape[d] : 1;
	}
	t->numel = numel;
	*out = t;
	return 0;
}

/* Do the parts agree on dtype and rank, and on every dim but skip (-1: none)? */
static int check_parts(tb_tensor *const *parts, int n, int skip, const char *name, tb_err *err)
{
	char a[128], b[128];

	if (n < 1)
		return tb_err_setc(err, TB_ERR_FORMAT, NULL, "tensor '%s': nothing to assemble", name);
	for (int k = 1; k < n; k++) {
		const tb_tensor *x = parts[0], *y = parts[k];
		if (x->dtype != y->dtype)
			return tb_err_setc(err, TB_ERR_FORMAT, y->path, "tensor '%s': its parts mix %s and %s", name,
					  tb_dtype_name(x->dtype), tb_dtype_name(y->dtype));
		bool same = x->ndim == y->ndim;
		for (int d = 0; same && d < x->ndim; d++)
			same = d == skip || x->shape[d] == y->shape[d];
		if (!same) {
			tb_shape_format(x->ndim, x->shape, a, sizeof a);
			tb_shape_format(y->ndim, y->shape, b, sizeof b);
			if (skip >= 0)
				return tb_err_setc(err, TB_ERR_FORMAT, y->path, "tensor '%s': parts of shape %s and %s do not join on axis %d",
						  name, a, b, skip);
			return tb_err_setc(err, TB_ERR_FORMAT, y->path, "tensor '%s': parts of shape %s and %s do not add up", name, a,
					  b);
		}
	}
	return 0;
}

int tb_compose_concat(tb_tensor *const *parts, int n, int axis, const char *name, tb_tensor **out, tb_err *err)
{
	tb_tensor *t;

	*out = NULL;
	if (n >= 1 && (axis < 0 || axis >= parts[0]->ndim))
		return tb_err_setc(err, TB_ERR_FORMAT, parts[0]->path, "tensor '%s': no axis %d to join on (rank %d)", name, axis,
				  parts[0]->ndim);
	if (check_parts(parts, n, axis, name, err) < 0)
		return -1;
	t = composite(parts, n, TB_PARTS_CONCAT, name, err);
	if (!t)
		return -1;
	t->parts->axis = axis;
	t->parts->at = malloc((size_t)(n + 1) * sizeof *t->parts->at);
	if (!t->parts->at) {
		tb_compose_free(t);
		return tb_err_setc(err, TB_ERR_NOMEM, parts[0]->path, "out of memory");
	}
	t->parts->at[0] = 0;
	for (int k = 0; k < n; k++)
		t->parts->at[k + 1] = t->parts->at[k] + parts[k]->shape[axis];
	t->shape[axis] = t->parts->at[n];
	return finish(t, out, err);
}

int tb_compose_sum(tb_tensor *const *parts, int n, const char *name, tb_tensor **out, tb_err *err)
{
	tb_tensor *t;

	*out = NULL;
	if (check_parts(parts, n, -1, name, err) < 0)
		return -1;
	t = composite(parts, n, TB_PARTS_SUM, name, err);
	return t ? finish(t, out, err) : -1;
}

int tb_compose_columns(tb_tensor *src, int64_t start, int64_t width, const char *name, tb_tensor **out,
		       tb_err *err)
{
	int last = src->ndim - 1;
	tb_tensor *t;

	*out = NULL;
	if (src->ndim < 1 || start < 0 || width <= 0 || start + width > src->shape[last])
		return tb_err_setc(err, TB_ERR_FORMAT, src->path, "tensor '%s': no columns %lld..%lld", src->name, (long long)start,
				  (long long)(start + width));
	t = composite(&src, 1, TB_PARTS_COLUMNS, name, err);
	if (!t)
		return -1;
	t->parts->start = start;
	t->shape[last] = width;
	return finish(t, out, err);
}

int tb_compose_gather(tb_tensor *src, const uint64_t *index, uint64_t n, const char *name, tb_tensor **out,
		      tb_err *err)
{
	int64_t len = (int64_t)n;

	return tb_compose_gather_as(src, index, 1, &len, name, out, err);
}

/* A partial's record and its indices, in one block the composite holds. */
typedef struct held_partial {
	tb_partial pa;
	uint64_t index[];
} held_partial;

int tb_compose_partial(tb_tensor *t, const uint64_t *order, const uint64_t *index, uint64_t n, int ndim,
		       const int64_t *shape, const char *name, tb_tensor **out, tb_err *err)
{
	held_partial *hp;

	*out = NULL;
	if (ndim < 1 || ndim > TB_MAX_DIMS || n > (SIZE_MAX - sizeof *hp) / sizeof *index)
		return tb_err_setc(err, TB_ERR_FORMAT, t->path, "tensor '%s': a partial of %d dims and %llu values", t->name, ndim,
				  (unsigned long long)n);
	hp = malloc(sizeof *hp + (n ? n : 1) * sizeof *index);
	if (!hp)
		return tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory");
	memset(&hp->pa, 0, sizeof hp->pa);
	hp->pa.ndim = ndim;
	memcpy(hp->pa.shape, shape, (size_t)ndim * sizeof *shape);
	hp->pa.n = n;
	hp->pa.index = hp->index;
	if (n)
		memcpy(hp->index, index, (size_t)n * sizeof *index);
	if (tb_compose_gather(t, order, n, name, out, err) < 0) {
		free(hp);
		return -1;
	}
	(*out)->partial = &hp->pa;
	(*out)->parts->held = hp;
	return 0;
}

int tb_compose_gather_as(tb_tensor *src, const uint64_t *index, int ndim, const int64_t *shape, const char *name,
			 tb_tensor **out, tb_err *err)
{
	tb_tensor *t;
	uint64_t n = 1;

	*out = NULL;
	if (ndim < 1 || ndim > TB_MAX_DIMS)
		return tb_err_setc(err, TB_ERR_FORMAT, src->path, "tensor '%s': a gather of %d dims", src->name, ndim);
	for (int d = 0; d < ndim; d++)
		if (shape[d] < 0 || __builtin_mul_overflow(n, (uint64_t)shape[d], &n))
			return tb_err_setc(err, TB_ERR_FORMAT, src->path, "tensor '%s': a gather's element count overflows", src->name);
	for (uint64_t i = 0; i < n; i++)
		if (index[i] >= src->numel)
			return tb_err_setc(err, TB_ERR_FORMAT, src->path, "tensor '%s': no element %llu (it has %llu)", src->name,
					  (unsigned long long)index[i], (unsigned long long)src->numel);
	if (n > SIZE_MAX / sizeof *index)
		return tb_err_setc(err, TB_ERR_NOMEM, src->path, "out of memory");
	t = composite(&src, 1, TB_PARTS_GATHER, name, err);
	if (!t)
		return -1;
	t->parts->index = malloc(n ? (size_t)n * sizeof *index : 1);
	if (!t->parts->index) {
		tb_compose_free(t);
		return tb_err_setc(err, TB_ERR_NOMEM, src->path, "out of memory");
	}
	if (n)
		memcpy(t->parts->index, index, (size_t)n * sizeof *index);
	t->ndim = ndim;
	memset(t->shape, 0, sizeof t->shape);
	memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
	return finish(t, out, err);
}

void tb_compose_free(tb_tensor *t)
{
	if (!t)
		return;
	if (t->parts) {
		free(t->parts->part);
		free(t->parts->at);
		free(t->parts->index);
		free(t->parts->held);
		free(t->parts);
	}
	free(t->name);
	free(t);
}
