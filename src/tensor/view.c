#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/compose.h"
#include "tensor/view.h"

/* Room for a parent name (at most TB_MAX_NAME) and a suffix. */
#define TB_VIEW_NAME 4200

/* A copy of t's entry named t->name + suffix; the shape is the caller's. */
static tb_tensor *entry(const tb_tensor *t, const char *suffix, tb_err *err)
{
	size_t n = strlen(t->name), s = strlen(suffix);
	tb_tensor *v = malloc(sizeof *v);

	if (v)
		*v = *t;
	if (v && (v->name = malloc(n + s + 1))) {
		memcpy(v->name, t->name, n);
		memcpy(v->name + n, suffix, s + 1);
		return v;
	}
	free(v);
	tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory");
	return NULL;
}

static int finish(tb_tensor *v, tb_tensor **out, tb_err *err)
{
	v->numel = 1;
	for (int d = 0; d < v->ndim; d++)
		v->numel *= (uint64_t)v->shape[d];
	if (tb_tensor_check_bounds(v, v->path, err) < 0) {
		tb_view_free(v);
		return -1;
	}
	*out = v;
	return 0;
}

int tb_view_index0(const tb_tensor *t, int64_t i, const char *suffix, tb_tensor **out, tb_err *err)
{
	tb_tensor *v;

	*out = NULL;
	if (t->parts)
		return tb_err_setc(err, TB_ERR_FORMAT, t->path, "tensor '%s': a tensor assembled from shards or steps cannot be cut by layer",
				  t->name);
	if (t->ndim < 2 || i < 0 || i >= t->shape[0])
		return tb_err_setc(err, TB_ERR_FORMAT, t->path, "tensor '%s': no index %lld on its first axis", t->name, (long long)i);
	v = entry(t, suffix, err);
	if (!v)
		return -1;
	v->offset = t->offset + (uint64_t)i * (uint64_t)t->stride[0] * tb_dtype_size(t->dtype);
	v->ndim = t->ndim - 1;
	memmove(v->shape, t->shape + 1, (size_t)v->ndim * sizeof *v->shape);
	memmove(v->stride, t->stride + 1, (size_t)v->ndim * sizeof *v->stride);
	return finish(v, out, err);
}

int tb_view_columns(const tb_tensor *t, int64_t start, int64_t width, const char *suffix, tb_tensor **out,
		    tb_err *err)
{
	int last = t->ndim - 1;
	tb_tensor *v;

	*out = NULL;
	if (t->parts) {
		char name[TB_VIEW_NAME];
		snprintf(name, sizeof name, "%s%s", t->name, suffix);
		return tb_compose_columns((tb_tensor *)t, start, width, name, out, err);
	}
	if (t->ndim < 1 || start < 0 || width <= 0 || start + width > t->shape[last])
		return tb_err_setc(err, TB_ERR_FORMAT, t->path, "tensor '%s': no columns %lld..%lld", t->name, (long long)start,
				  (long long)(start + width));
	v = entry(t, suffix, err);
	if (!v)
		return -1;
	v->offset = t->offset + (uint64_t)start * (uint64_t)t->stride[last] * tb_dtype_size(t->dtype);
	v->shape[last] = width;
	return finish(v, out, err);
}

void tb_view_free(tb_tensor *v)
{
	if (v && v->parts) {
		tb_compose_free(v);
		return;
	}
	if (!v)
		return;
	free(v->name);
	free(v);
}
