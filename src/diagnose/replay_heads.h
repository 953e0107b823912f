/*
 * replay_heads: what the attention replays share (replay_attn.c,
 * replay_oproj.c): an activation viewed as positions of heads, the head
 * dims to try, and the searches that fit one parameter.  Internal to the
 * replay module.
 */
#ifndef TB_REPLAY_HEADS_H
#define TB_REPLAY_HEADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "diagnose/heads.h"
#include "tensor/tensor.h"

/* The widest head a replay reads. */
#define TB_HEADS_MAX_HD 1024
/* How many head dims tb_heads_dim_choices may return. */
#define TB_HEADS_N_DIMS TB_N_USUAL_HEAD_DIMS

/* An activation of S positions and nh heads of hd channels, held as
 * [S, nh*hd] (a projection's output, [S, nh, hd] alike) or [nh, S, hd]
 * (Hugging Face's states after the transpose). */
typedef struct tb_heads_view {
	const float *v;
	int64_t S;
	int nh, hd;
	bool hsd;
} tb_heads_view;

static inline const float *tb_heads_row(const tb_heads_view *h, int64_t pos, int head)
{
	return h->hsd ? h->v + ((size_t)head * h->S + pos) * h->hd : h->v + ((size_t)pos * h->nh + head) * h->hd;
}

/* Distance between a head's rows: the leading dimension of [S, hd]. */
static inline int tb_heads_stride(const tb_heads_view *h)
{
	return h->hsd ? h->hd : h->nh * h->hd;
}

/* How t holds S positions of heads of hd channels (out->v left unset);
 * false when it does not. */
bool tb_heads_fit(const tb_tensor *t, int64_t S, int hd, tb_heads_view *out);

/* The positions of an op's n inputs: the rows of a 2-D one, else the
 * middle axis of [nh, S, hd]; 0 when none says. */
int64_t tb_heads_positions(const tb_tensor *const *t, int n);

/* The head dims to try, into out[TB_HEADS_N_DIMS]: what a 3-D input says,
 * what heads (--heads; 0: not given) says, else every usual one that
 * divides the width.  Returns how many. */
int tb_heads_dim_choices(const tb_tensor *const *t, int n, int heads, int64_t S, int *out);

/* A replay's residual as a function of one parameter it fits. */
typedef int (*tb_residual_fn)(void *ctx, double x, double *rel, tb_err *err);

/* The point of the grid lo, lo + step, ... (n of them) with the least
 * residual, in *x (left as it is when none has a finite one). */
int tb_fit_grid_min(tb_residual_fn f, void *ctx, double lo, double step, int n, double *x, tb_err *err);

/* Golden-section search of [a, b] for the least residual, iters steps
 * after its first two points: the best x in *x, its residual in *rel. */
int tb_fit_golden_min(tb_residual_fn f, void *ctx, double a, double b, int iters, double *x, double *rel, tb_err *err);

#endif
