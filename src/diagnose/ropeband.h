/*
 * ropeband: how a query or key after RoPE differs from the reference's,
 * channel pair by channel pair.  Rotate-half RoPE turns each pair (i,
 * i + head_dim/2) of a head by pos * inv_freq[i]; a port with another
 * base, scaling or none at all turns the same pairs by other angles and
 * keeps their norms, and an attention factor (YaRN's mscale) scales every
 * pair alike.  The fastest pair (i = 0) turns by exactly 1 radian per
 * position unless scaling divides it: a theta change leaves it alone,
 * linear / llama3 / YaRN scaling slows it, NoPE stops it.  A port that
 * rotates only the first r channels of each head (rotate-half within them)
 * and passes the others through keeps other norms, which the reference's
 * pair norms predict: the pass-through channels are the unrotated values,
 * so x_i^2 = |ref pair i|^2 - cand_{i+hd/2}^2, and each of the candidate's
 * pairs (i, i + r/2) keeps x_i^2 + x_{i+r/2}^2.
 */
#ifndef TB_DIAG_ROPEBAND_H
#define TB_DIAG_ROPEBAND_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor/tensor.h"

typedef struct tb_rope_diff {
	int head_dim;     /* the head dim whose pairs fit best, 0: none fits the shape */
	bool kept;        /* each pair keeps its norm up to one common factor (a rotation times a scale) */
	double scale;     /* that factor, |cand| / |ref| */
	double fast_turn; /* |angle| between the sides' fastest pairs at position 1, radians */
	bool heads_kept;  /* each head keeps its norm at each position up to that factor: whatever differs turns
			   * channels within heads */
	double partial;   /* the share of each head's channels the candidate rotates (rotate-half within them)
			   * while the others pass through, when the pairs' norms say so; 0: no share fits */
} tb_rope_diff;

/* The difference of a q or k tap after RoPE holding S positions, or -1
 * when its shape holds no heads of S positions or it cannot be read.
 * head_dim > 0: the known head dim, else the usual ones are tried. */
int tb_rope_diff_of(const tb_tensor *ref, const tb_tensor *cand, int64_t S, int head_dim, tb_rope_diff *out);

/* |q_rope| / |q| of one side (the attention factor its RoPE applies, read
 * on the first 2^18 values), or NaN when the two do not hold the same
 * number of values. */
double tb_rope_gain(const tb_tensor *before, const tb_tensor *after);

#endif
