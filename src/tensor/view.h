/*
 * view: a tensor made of a slice of another, sharing its blob (no data is
 * copied or read): one index of the first axis (a layer of a scan-stacked
 * tensor, [L, ...] -> [...]) or a range of the last axis (one projection
 * of a fused qkv_proj or gate_up_proj).  A view is named by its parent's
 * name and a suffix; the caller owns it (tb_view_free) and must free it
 * before the parent's tree.
 */
#ifndef TB_VIEW_H
#define TB_VIEW_H

#include <stdint.h>

#include "base/error.h"
#include "tensor/tensor.h"

/* t[i, ...]; t needs two axes or more. */
int tb_view_index0(const tb_tensor *t, int64_t i, const char *suffix, tb_tensor **out, tb_err *err);
/* t[..., start:start+width]. */
int tb_view_columns(const tb_tensor *t, int64_t start, int64_t width, const char *suffix, tb_tensor **out,
		    tb_err *err);
void tb_view_free(tb_tensor *v);

#endif
