/*
 * structure: which tap each of a tree's unnamed tensors is, from the
 * identities its own forward pass leaves in the dump, with no other tree
 * to compare with: a layer's output is the previous one plus the
 * attention and MLP outputs (the residual stream), the first layer's
 * previous one is the embedding, a norm output points where its input
 * points at every position (RMSNorm scales each position), the final norm
 * points where the last layer's output does, and the logits have the
 * vocabulary, not the hidden size, as their last axis.  Used by suggest
 * when neither tree's names are known.  Reads the first elements of each
 * tensor only.
 */
#ifndef TB_STRUCTURE_H
#define TB_STRUCTURE_H

#include <stddef.h>

#include "base/error.h"
#include "tensor/tensor.h"

/* One name pattern's tensors, by the layer number in the name, ascending. */
typedef struct tb_series {
	tb_tensor **t;
	const long *number;
	size_t n;
} tb_series;

/* What the identities say: a tap per series and per single tensor
 * (NULL: undecided), with how well the identity held (0..1). */
typedef struct tb_structure {
	const char **series_tap; /* n_series entries */
	double *series_conf;
	const char **single_tap; /* n_singles entries */
	double *single_conf;
	char evidence[512];
} tb_structure;

/* series and singles are borrowed; out's arrays are malloc'd (free with
 * tb_structure_done).  Fails only when out of memory or a tensor cannot be
 * read. */
int tb_structure_infer(const tb_series *series, size_t n_series, tb_tensor *const *singles, size_t n_singles,
		       tb_structure *out, tb_err *err);
void tb_structure_done(tb_structure *s);

#endif
