/*
 * replay_ops: the per-op replays that replay.c dispatches to by the
 * replayed cell's tap, one replay_*.c each (an interface several files
 * implement).  Internal to the replay module; users include replay.h.
 */
#ifndef TB_REPLAY_OPS_H
#define TB_REPLAY_OPS_H

#include "base/error.h"
#include "diagnose/replay_base.h"

/* replay_mlp.c: mlp.act from mlp.gate and mlp.up: the gated activation. */
int tb_replay_mlp_act(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* replay_router.c: an MoE layer's mlp.topk_weights from its router scores
 * and chosen experts: score function, top-k renormalisation, scaling. */
int tb_replay_router(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* replay_topk.c: an MoE layer's mlp.topk_ids from its router scores: the
 * reference's selection (compare/selection.h) and its variants: groups,
 * bias, score function, k. */
int tb_replay_topk_ids(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* replay_combine.c: mlp.shared and mlp.experts against the reference's
 * own: the shared expert or its gate lost or doubled, the routed sum
 * scaled at the combine. */
int tb_replay_combine(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* attn.q_rope / attn.k_rope from attn.q and attn.k: the RoPE family. */
int tb_replay_rope(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* attn.core from attn.q_rope, attn.k_rope and attn.v: scale, mask,
 * window, GQA mapping, soft-capping, head order. */
int tb_replay_attn_core(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* replay_oproj.c: attn.o from attn.q, attn.k, attn.v before RoPE when
 * attn.core is not dumped, through o_proj fitted to both sides: the RoPE
 * family and the softmax scale.  With attn.core, tb_replay_bias. */
int tb_replay_attn_o(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* replay_norm.c: attn_norm, mlp_norm and final_norm from their input. */
int tb_replay_norm(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* replay_resid.c: the embedding scale, an output multiplier on attn or
 * mlp, a bias or multiplier of o_proj or down_proj, and the block's
 * residual wiring. */
int tb_replay_embed_scale(const tb_replay_in *in, tb_replay *out, tb_err *err);
int tb_replay_multiplier(const tb_replay_in *in, tb_replay *out, tb_err *err);
int tb_replay_bias(const tb_replay_in *in, tb_replay *out, tb_err *err);
int tb_replay_wiring(const tb_replay_in *in, tb_replay *out, tb_err *err);
/* replay_logits.c: the final logit soft-cap, from logits when final_norm agrees. */
int tb_replay_logits(const tb_replay_in *in, tb_replay *out, tb_err *err);

#endif
