/*
 * qkorder: llama.cpp's queries and keys seen in the other side's order.
 *
 * convert_hf_to_gguf.py permutes the rows of each head of q_proj and
 * k_proj (LlamaModel.permute) so that llama.cpp's RoPE, which rotates
 * adjacent channel pairs, computes what Hugging Face's rotate-half does:
 * channel 2i of a head in the GGUF is channel i of Hugging Face's, 2i + 1
 * is i + d/2.  So Qcur-N and Kcur-N list each head's channels in that
 * order, and after RoPE as [S, heads, d] where apply_rotary_pos_emb gives
 * [1, heads, S, d].  A view puts a llama.cpp query or key
 * (tb_tensor.gguf_qk_head_dim) in the other tensor's order and shape, with
 * or without undoing the permutation; the pairing chooses which by the
 * values (a model converted without the permutation, as Qwen2's NeoX-style
 * RoPE wants, or a converter that forgot it, agrees as it is).
 *
 * Views are composites (tensor/compose.h): they borrow their source and
 * own their gather and partial, freed by tb_compose_free.
 */
#ifndef TB_QKORDER_H
#define TB_QKORDER_H

#include <stdbool.h>

#include "base/error.h"
#include "tensor/tensor.h"

/* Can g (llama.cpp's, gguf_qk_head_dim set) be seen in o's order: the
 * same positions, heads and channels, as [S, heads*d], [S, heads, d] or
 * [heads, S, d] (leading size-1 axes aside)? */
bool tb_qkorder_fits(const tb_tensor *g, const tb_tensor *o);

/* A view of g in o's order (tb_qkorder_fits must hold): each head's
 * channels put back in Hugging Face's order when undo, the axes o's.  A
 * partial g stays partial, at the elements it printed, in o's shape. */
int tb_qkorder_view(tb_tensor *g, const tb_tensor *o, bool undo, tb_tensor **out, tb_err *err);

/* A cell of heads (queries, keys, values, attention output) dumped in two
 * layouts of [S, heads*d], [S, heads, d] and [heads, S, d] (MaxText's
 * [B, S, heads, d] against Hugging Face's [B, heads, S, d] after RoPE, or
 * its [B, S, heads*d] projections): a view of one in the other's layout,
 * *which says of which (b when it can, so the reference stays as it is).
 * Nothing (*out NULL) when the shapes agree, neither shows its heads, or
 * no layout of one is the other's. */
int tb_heads_view(tb_tensor *a, tb_tensor *b, tb_tensor **which, tb_tensor **out, tb_err *err);

/* ||v - o|| / ||o|| over the elements v holds (v a view from
 * tb_qkorder_view of a tensor paired with o); NaN when it cannot be read
 * or o is zero. */
double tb_qkorder_rel_l2(tb_tensor *v, tb_tensor *o);

#endif
