/*
 * features: the named measurements the diagnosis rules test, computed for
 * one target cell (the first divergence, or any cell on request) from the
 * comparison result, the origin analysis, the dump sanity checks and, where
 * a rule needs more than the cell metrics, a re-read of a few tensors
 * (per-head similarity and embedding-row similarity use OpenBLAS sgemm).
 *
 * The feature list is one X-macro table: id, name, unit, meaning; the rule
 * parser, the man page and `tbisect check --features` all read it.  Values
 * are doubles; booleans are 0/1; NaN means "not measurable here" and makes
 * every condition on it false.
 */
#ifndef TB_DIAG_FEATURES_H
#define TB_DIAG_FEATURES_H

#include <stddef.h>

#include "compare/compare.h"
#include "diagnose/origin.h"
#include "diagnose/sanity.h"
#include "model/session.h"

/* X(id, name, unit, meaning) */
#define TB_FEATURES(X)                                                                                         \
	X(HAS_TARGET, "has_target", "bool", "a cell diverged (or one was selected); the other features describe it") \
	X(LAYER, "layer", "index", "layer of the target cell, -1 for model-level taps")                        \
	X(N_LAYERS, "n_layers", "count", "layers in the dump")                                                 \
	X(AT_EMBED, "at_embed", "bool", "target is the embedding output")                                     \
	X(AT_ATTN_NORM, "at_attn_norm", "bool", "target is a layer's attention input norm")                    \
	X(AT_ATTN, "at_attn", "bool", "target is a layer's attention output (or its output projection attn.o, the same tensor), or a q/k/v sub-tap of a layer whose attention output diverged too (the profile features then describe that output)") \
	X(AT_ATTN_SUB, "at_attn_sub", "bool", "target is an attention sub-tap (attn.q, attn.k, ...)")          \
	X(AT_QK_SUB, "at_qk_sub", "bool", "target is the query or key sub-tap (attn.q, attn.k)")               \
	X(AT_MLP_NORM, "at_mlp_norm", "bool", "target is a layer's MLP input norm")                            \
	X(AT_MLP, "at_mlp", "bool", "target is a layer's MLP output (or its down projection mlp.down, the same tensor)")                                         \
	X(AT_MLP_SUB, "at_mlp_sub", "bool", "target is an MLP sub-tap (mlp.gate, mlp.up, ...)")                \
	X(AT_BLOCK, "at_block", "bool", "target is a decoder layer's output")                                 \
	X(AT_FINAL_NORM, "at_final_norm", "bool", "target is the final norm")                                 \
	X(AT_LOGITS, "at_logits", "bool", "target is the logits")                                             \
	X(AT_NORM, "at_norm", "bool", "target is any norm tap (attn_norm, mlp_norm, final_norm)")              \
	X(FIRST_LAYER, "first_layer", "bool", "target is in layer 0")                                         \
	X(DEEP, "deep", "bool", "target is in a layer after layer 0")                                         \
	X(UPSTREAM_EXACT, "upstream_exact", "bool", "every compared cell before the target matches")           \
	X(UPSTREAM_OK, "upstream_ok", "bool", "every compared cell before the target matches or is close")     \
	X(N_DIVERGED, "n_diverged", "count", "diverged cells")                                                \
	X(N_CLOSE, "n_close", "count", "close cells")                                                         \
	X(N_COMPARED, "n_compared", "count", "cells with a tensor on both sides (what every other fact is about)") \
	X(CLOSE_FRAC, "close_frac", "fraction", "close cells among compared cells")                           \
	X(DIVERGED_FRAC, "diverged_frac", "fraction", "diverged cells among compared cells")                  \
	X(NONE_DIVERGED, "none_diverged", "bool", "no cell diverged")                                         \
	X(ONLY_LOGITS, "only_logits", "bool", "logits is the only diverged cell")                             \
	X(ONLY_FINAL_AND_LOGITS, "only_final_and_logits", "bool", "final_norm and logits are the only diverged cells") \
	X(FINAL_NORM_OK, "final_norm_ok", "bool", "final_norm matches or is close")                           \
	X(FINAL_NORM_REL_L2, "final_norm_rel_l2", "ratio", "rel_l2 of final_norm, whatever its status")         \
	X(EMBED_REL, "embed_rel", "ratio", "rel_l2 of embed, whatever its status (a lookup: what the weights' rounding alone gives)") \
	X(EMBED_COS, "embed_cos", "cosine", "cosine of embed, whatever its status")                           \
	X(ATTN_OK, "attn_ok", "bool", "the target layer's attn output matches or is close")                   \
	X(MLP_OK, "mlp_ok", "bool", "the target layer's mlp output matches or is close")                      \
	X(ATTN_NORM_OK, "attn_norm_ok", "bool", "the target layer's attn_norm matches or is close")            \
	X(MLP_NORM_OK, "mlp_norm_ok", "bool", "the target layer's mlp_norm matches or is close")               \
	X(SIBLINGS_OK, "siblings_ok", "bool", "attn and mlp of the target layer both match or are close")       \
	X(ATTN_SUB_BAD, "attn_sub_bad", "bool", "a q/k sub-tap of the target layer diverged")                 \
	X(SUB_POS0_OK, "sub_pos0_ok", "bool", "target is an attention sub-tap whose position 0 is within --diverge") \
	X(SUB_NORM_KEPT, "sub_norm_kept", "bool", "target is an attention sub-tap whose every position keeps its norm, to the dtypes' rounding (a rotation or permutation)") \
	X(AT_MOE_ROUTER, "at_moe_router", "bool", "target is an MoE layer's router scores (mlp.router or mlp.router_probs)") \
	X(AT_MOE_IDS, "at_moe_ids", "bool", "target is an MoE layer's selected experts (mlp.topk_ids)")              \
	X(AT_MOE_WEIGHTS, "at_moe_weights", "bool", "target is an MoE layer's combine weights (mlp.topk_weights)")   \
	X(AT_MOE_EXPERTS, "at_moe_experts", "bool", "target is an MoE layer's routed experts' sum (mlp.experts)")    \
	X(AT_MOE_SHARED, "at_moe_shared", "bool", "target is an MoE layer's shared experts' output (mlp.shared)")    \
	X(MOE_ROUTER_OK, "moe_router_ok", "bool", "the target layer's router scores (mlp.router, else mlp.router_probs) match or are close") \
	X(MOE_IDS_OK, "moe_ids_ok", "bool", "the target layer's expert sets agree wherever the scores do not tie (mlp.topk_ids matches or is close)") \
	X(MOE_WEIGHTS_OK, "moe_weights_ok", "bool", "the target layer's combine weights match or are close")         \
	X(MOE_EXPERTS_OK, "moe_experts_ok", "bool", "the target layer's routed experts' sum matches or is close")     \
	X(MOE_AGREE, "moe_agree", "fraction", "positions of the target layer whose expert sets agree (of those compared)") \
	X(FLIP_POS, "flip_pos", "index", "the first position whose experts flipped at a near tie in an MoE layer before the target") \
	X(FLIP_LEAK, "flip_leak", "bool", "the target, an attention cell or a block, first goes bad within 8 positions after a flipped one: a later position attending to the flipped one") \
	X(REL_L2, "rel_l2", "ratio", "|c-r|/|r| of the target")                                               \
	X(COSINE, "cosine", "cosine", "cosine similarity of the target")                                      \
	X(NORM_RATIO, "norm_ratio", "ratio", "|c|/|r| of the target")                                         \
	X(LOG_NORM_RATIO, "log_norm_ratio", "nats", "|ln(norm_ratio)|: 0 when magnitudes agree")              \
	X(ALLCLOSE_FRAC, "allclose_frac", "fraction", "target elements passing allclose")                     \
	X(MISMATCH, "nan_mismatch", "count", "target elements NaN/Inf on one side only")                      \
	X(NAN_ANY, "nan_any", "bool", "some cell has NaN/Inf on one side only")                               \
	X(NAN_FIRST, "nan_first", "count", "elements NaN/Inf on one side only at the first cell that has any") \
	X(POS_COS_MIN, "pos_cos_min", "cosine", "lowest per-position cosine of the target")                   \
	X(SCALE_SPREAD, "scale_spread", "ratio", "std/mean of the per-position norm ratio (0: one constant factor)") \
	X(SCALE_MEAN, "scale_mean", "ratio", "mean per-position norm ratio")                                  \
	X(SCALE_VS_SQRT_H, "scale_vs_sqrt_hidden", "ratio", "norm_ratio divided by sqrt(hidden size), or its inverse when below 1") \
	X(N_POS, "n_pos", "count", "positions of the target ([.., S, H] second-to-last axis)")                \
	X(POS0_OK, "pos0_ok", "bool", "position 0 is within --diverge")                                        \
	X(POS0_REL, "pos0_rel", "ratio", "rel_l2 at position 0")                                              \
	X(POS1_REL, "pos1_rel", "ratio", "rel_l2 at position 1")                                              \
	X(POS_MAX_REL, "pos_max_rel", "ratio", "largest per-position rel_l2")                                 \
	X(POS1_SHARE, "pos1_share", "ratio", "rel_l2 at position 1 over the largest (large: the error is full-size from the second token on)") \
	X(FIRST_BAD_POS, "first_bad_pos", "position", "first position above --diverge, -1 if none")           \
	X(BAD_POS_FRAC, "bad_pos_frac", "fraction", "positions above --diverge")                              \
	X(LAST_POS_OK, "last_pos_ok", "bool", "the last position is within --diverge")                        \
	X(MASK_PATTERN, "mask_pattern", "bool", "every position but the last is off while the last matches to the dtypes' rounding (non-causal attention)") \
	X(WINDOW, "window", "position", "W when positions < W are exact (rel_l2 at most 1e-4, or twice the inputs' error), the error jumps tenfold at W and nearly all later positions are off (W >= 2), else -1") \
	X(LATE_ONLY, "late_only", "bool", "the first bad position is 100 or later")                           \
	X(POS_GROWTH, "pos_growth", "slope", "slope of log rel_l2 against log position (1: error proportional to position)") \
	X(EARLY_SMALL, "early_small", "bool", "error at position 1 is under a tenth of the largest")          \
	X(EARLY_GROWTH, "early_growth", "slope", "slope of log rel_l2 against log position over positions 1 to 8 (RoPE-base errors grow about linearly)") \
	X(EARLY_RATIO, "early_ratio", "ratio", "largest rel_l2 over positions 1-4 over the median after position 0 (small: error builds up with position)") \
	X(EARLY_COS, "early_cos", "cosine", "mean per-position cosine over positions 1 to 15 (a causal attention computes the same there at any length)") \
	X(EARLY_LOG_NORM_RATIO, "early_log_norm_ratio", "ratio", "|log| of the mean per-position norm ratio over positions 1 to 15") \
	X(EARLY_TURN_RATIO, "early_turn_ratio", "ratio", "(1 - early_cos) / early_log_norm_ratio^2: a softmax temperature changed alike everywhere turns the output little for the norm it moves (0.3 to 1), one changed per token (qk-norm) 4 or more") \
	X(EARLY_POS1_SHARE, "early_pos1_share", "ratio", "rel_l2 at position 1 over the largest of positions 1 to 15") \
	X(HEADS, "heads", "count", "heads the target's last axis was split into (0: unknown); attention sub-taps only (o_proj mixes the heads of the attention output)")               \
	X(HEAD_OK_FRAC, "head_ok_frac", "fraction", "heads of the target within --diverge")                  \
	X(HEAD_PERM, "head_perm", "count", "candidate heads that match a different reference head (cosine > 0.98)") \
	X(EMBED_SHIFT, "embed_shift", "fraction", "positions whose candidate embedding row matches reference row p+1 or p-1") \
	X(TOKENS_DIFFER, "tokens_differ", "count", "positions whose token ids differ (when both dumps carry ids)") \
	X(TOKEN_SHIFT, "token_shift", "bool", "the candidate's token ids are the reference's shifted by one")  \
	X(BIAS_FRAC, "bias_frac", "fraction", "share of the error a constant per-channel offset explains")     \
	X(TIE_REF, "tie_ref", "correlation", "how well reference logits equal final_norm x embedding rows (1: tied)") \
	X(TIE_CAND, "tie_cand", "correlation", "the same for the candidate")                                 \
	X(KL_MEAN, "kl_mean", "nats", "mean per-position KL(ref||cand) of the logits")                       \
	X(TOP1_AGREE, "top1_agree", "fraction", "positions whose logits agree on the top token")              \
	X(ORIGIN_HERE, "origin_here", "bool", "the target is where the error is born (amplification above the factor)") \
	X(AMPLIFICATION, "amplification", "ratio", "target rel_l2 over its inputs' rel_l2")                  \
	X(HAS_ORIGIN, "has_origin", "bool", "some diverged cell amplifies its input error beyond the factor")  \
	X(MAX_AMPLIFICATION, "max_amplification", "ratio", "the largest amplification of any compared cell, diverged or not") \
	X(DRIFT, "drift", "ratio", "growth of the block error per layer (geometric)")                        \
	X(DRIFT_LIKE, "drift_like", "bool", "the block error starts within rounding (below the default --diverge and the cell's own) in the first layer and grows: precision drift") \
	X(DUMP_OFFSET, "dump_offset", "bool", "candidate blocks match the reference shifted by one layer")    \
	X(DUMP_DUPLICATE, "dump_duplicate", "count", "layers of one side holding identical block tensors")    \
	X(STALE_STEPS, "stale_steps", "count", "decode steps of one side that repeat the step before's tensors (stale buffers)") \
	X(SOFTCAP_REL, "softcap_rel", "ratio", "logits, when final_norm matches or is close: rel_l2 of the better fit of one side's logits as C tanh(z / C) of the other's, C fitted (0: one side is the other soft-capped)") \
	X(SOFTCAP_GAIN, "softcap_gain", "ratio", "the logits' rel_l2 over softcap_rel: how much of the difference a soft-cap explains") \
	X(SOFTCAP_CAP, "softcap_cap", "value", "the C of that fit (final_logit_softcapping)") \
	X(SOFTCAP_CAND, "softcap_cand", "bool", "the candidate is the capped side of that fit (it adds a cap; 0: it drops the reference's)") \
	X(LOGIT_MAX_REF, "logit_max_ref", "value", "the largest |logit| of the reference's rows the soft-cap fit read") \
	X(LOGIT_MAX_CAND, "logit_max_cand", "value", "the same for the candidate") \
	X(POS0_SHARE, "pos0_share", "ratio", "rel_l2 at position 0 over the largest (1: position 0 is hit hardest, as when an attention sink drains the most mass where there is one key)") \
	X(DECODE_START, "decode_start", "position", "the first decode position: the first step's length (the prefill's) when every step was stitched (--steps all), NaN without steps") \
	X(DECODE_STEP, "decode_step", "index", "the step compared when it is a later step than a stepped dump's first (--step K past the prefill), NaN otherwise") \
	X(FROM_DECODE, "from_decode", "bool", "every step was stitched, every position of the first step (the prefill) is within --diverge and the target goes bad at the first decode position") \
	X(ALIAS_HERE, "alias_here", "bool", "the target diverges by rel_l2 above 0.1 while the residual sum it feeds (for an attention or MLP output or its sub-tap its layer's block, for a block the next layer's, for the embedding layer 0's) matches or is close, at every position by under a hundredth of the target's rel_l2: the dumped tensor changed after capture") \
	X(DUMP_ALIASING, "dump_aliasing", "count", "diverged cells anywhere whose residual sum matches so (alias_here)") \
	X(ROPE_PAIRS_KEPT, "rope_pairs_kept", "bool", "target is a query or key after RoPE (attn.q_rope, attn.k_rope, or attn.q, attn.k when dumped after RoPE) whose every rotate-half channel pair keeps its norm up to one common factor: the sides differ by rotation angles and a scale only") \
	X(ROPE_QK_SCALE, "rope_qk_scale", "ratio", "that common factor, |cand| / |ref| of the query or key after RoPE") \
	X(ROPE_SCALE_OFF, "rope_scale_off", "nats", "|ln(rope_qk_scale)|: 0 when the attention factors agree") \
	X(ROW_SCALE_SHARE, "row_scale_share", "fraction", "target is an MoE layer's MLP output or routed experts' sum: the share of its error one scale per position explains (the shared experts' output taken off the MLP's where it is dumped and matches; 1: the combine weights scaled, 0: other rows, as from other experts)") \
	X(ROUTED_REL_MEDIAN, "routed_rel_median", "ratio", "the median over positions of the rel_l2 of those rows (about 1.4, sqrt 2: every position's output is another's, as when every expert is another; under 1: each position keeps part of its output, as when the weights or some choices change)") \
	X(MOE_SHARED_ONE_SIDE, "moe_shared_one_side", "bool", "the target layer's shared experts' output (mlp.shared, or Qwen2-MoE's shared expert before its gate, mlp.shared_pre) is dumped by one side only: the other has no shared expert") \
	X(SHARED_SCALE_SHARE, "shared_scale_share", "fraction", "target is an MoE layer's MLP output whose shared expert is dumped (mlp.shared, or mlp.shared_pre before its gate): the share of its error one factor per position times the reference's shared expert explains (1: its gate not applied, or it scaled or left out)") \
	X(ROPE_FAST_TURN, "rope_fast_turn", "radians", "|angle| between the sides' fastest channel pair at position 1 (0: the pair turns alike; a theta change leaves it alone, scaling slows it, 1: one side does not rotate)") \
	X(ROPE_HEADS_KEPT, "rope_heads_kept", "bool", "each head of the query or key after RoPE keeps its norm at each position up to rope_qk_scale: the sides differ by turns of channels within heads") \
	X(ROPE_PARTIAL, "rope_partial", "fraction", "the share of each head's channels the candidate rotates (rotate-half within them) while the others pass through unrotated, when the reference's pair norms predict the candidate's so (0: no share of 1/2 or 1/4 does)") \
	X(ROPE_REF_FACTOR, "rope_ref_factor", "ratio", "|attn.q_rope| / |attn.q| of the reference: the attention factor its own RoPE applies (1: none; YaRN's 0.1 ln(factor) + 1)") \
	X(ROPE_REF_FACTOR_OFF, "rope_ref_factor_off", "nats", "|ln(rope_ref_factor)|")

typedef enum tb_feature {
#define TB_FEATURE_ENUM(id, name, unit, meaning) TB_F_##id,
	TB_FEATURES(TB_FEATURE_ENUM)
#undef TB_FEATURE_ENUM
	TB_F_COUNT
} tb_feature;

typedef struct tb_feature_info {
	const char *name, *unit, *meaning;
} tb_feature_info;

extern const tb_feature_info tb_feature_table[TB_F_COUNT];
/* Feature by name, or -1. */
int tb_feature_lookup(const char *name);

typedef struct tb_diag_input {
	const tb_session *session;
	const tb_result *result;
	const tb_origin *origin;  /* may be NULL */
	const tb_sanity *sanity;  /* may be NULL */
	int heads, kv_heads;      /* 0: unknown */
} tb_diag_input;

/* Features of cell index `target` (-1: no target).  vals has TB_F_COUNT slots. */
void tb_features_compute(const tb_diag_input *in, long target, double *vals);
/* The cell whose scale, direction and positions the features of target
 * are measured at: target, or for a sub-tap of an attention or MLP that
 * diverges as a whole, that attention or MLP (whose patterns the rules
 * describe); -1 for none. */
long tb_features_measured(const tb_result *r, long target);
/* Where the features vals of target may lie, lo[i] <= vals[i] <= hi[i]:
 * equal for measured ones, the bounds of the estimates for a cell a sketch
 * took part in (rel_l2, cosine).  lo and hi have TB_F_COUNT slots. */
void tb_features_span(const tb_diag_input *in, long target, const double *vals, double *lo, double *hi);

/* Do logits lg equal final_norm fn . the embedding rows emb of the
 * prompt's tokens tok (tied embeddings)?  The Pearson correlation over the
 * S x S block of the prompt's own tokens (tie_ref, tie_cand), or NaN when
 * the shapes or the ids do not allow it. */
double tb_features_tie(const tb_tensor *fn, const tb_tensor *emb, const tb_tensor *lg, const int64_t *tok, size_t n_tok);

#endif
