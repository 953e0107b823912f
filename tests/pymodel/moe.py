"""Mixture-of-experts MLPs for model.py --moe, in three router families,
written from transformers' model definitions (a reconstruction: transformers
does not run here; the lines followed are cited by function):

  mixtral   modeling_mixtral.py MixtralSparseMoeBlock.forward (4.x):
            router_logits = self.gate(hidden_states); softmax over the E
            experts in float; torch.topk(.., top_k); routing_weights /=
            sum (always renormalised); no shared expert.
  qwen2     modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock.forward: the same
            softmax and top-k, renormalised only if norm_topk_prob (false
            in Qwen1.5-MoE / Qwen2-57B-A14B's configs, so not here); plus
            shared_expert(x) * sigmoid(shared_expert_gate(x)), the gate a
            Linear(H, 1): [S, 1].
  deepseek  modeling_deepseek_v3.py DeepseekV3TopkRouter: scores =
            sigmoid(logits) (float32); the choice adds
            e_score_correction_bias; group_scores = the sum of each group's
            two best choice scores, topk_group groups kept, the rest
            masked to 0, then top-k; weights = the scores (without the
            bias) gathered at the chosen ids, renormalised (norm_topk_prob
            true in V3's config) and times routed_scaling_factor (2.5);
            DeepseekV3MoE adds shared_experts(x); first_k_dense_replace = 1
            (layer 0 is a dense MLP).

Every expert is a SwiGLU MLP (gate_proj, up_proj, down_proj).  The taps
recorded per MoE layer (canonical names, [S, X]): mlp.router (logits),
mlp.router_probs (after the score function), mlp.topk_ids (int64, the
order torch.topk gives: by score, largest first), mlp.topk_weights,
mlp.experts (the routed sum), mlp.shared (after its gate), mlp (the block),
and, for the layouts that hold them, mlp.shared_pre (Qwen2's shared expert
before its gate) and mlp.shared_gate (its gate's logit, [S, 1]).
"""
import numpy as np

E = 8                    # routed experts
K = 2                    # num_experts_per_tok
FFN = 64                 # moe_intermediate_size
SHARED_FFN = 128         # the shared expert's (n_shared_experts * moe_intermediate_size)
N_GROUP = 4              # DeepSeek-V3 n_group
TOPK_GROUP = 2           # and topk_group
SCALING = 2.5            # routed_scaling_factor
TIE = 0.02               # expert 1's router row: expert 0's and this much noise
TWIN = 0.02              # expert 1's weights: expert 0's, a fiftieth of the way to its own
NORM_TOPK = {"mixtral": True, "qwen2": False, "deepseek": True}
# the bugs each family can have (moe-renorm and moe-expert-order: all)
FAMILY_BUGS = {"moe-softmax": ("deepseek",), "moe-scaling": ("deepseek",), "moe-bias-weights": ("deepseek",),
               "moe-group": ("deepseek",), "moe-shared": ("qwen2", "deepseek"), "moe-shared-gate": ("qwen2",)}
# the bugs, the names mkdemo gives them (model.CAUSE: the cause of each)
BUGS = ("moe-softmax", "moe-renorm", "moe-scaling", "moe-bias-weights", "moe-group", "moe-expert-order",
        "moe-shared", "moe-shared-gate")
TAPS = ("router", "router_probs", "topk_ids", "topk_weights", "experts", "shared", "shared_pre", "shared_gate")


def has_experts(cfg, l):
    return bool(cfg.moe) and not (cfg.moe == "deepseek" and l == 0)


def make_weights(cfg):
    """The MoE parameters, from their own generator so that the dense
    weights of the same seed stay.  Expert 1's router row is expert 0's
    and a little noise (TIE): their scores nearly tie at every position,
    so a port whose router returns bf16 logits sometimes flips between
    them where they straddle the k-th place (the near-tie flips a clean
    bf16 port shows; DeepSeek's gets the same selection bias for both).
    Their weights are alike too (TWIN), as experts that tie on every token
    would be: a flip changes the output by a little, not by a whole other
    expert."""
    H = cfg.hidden
    g = np.random.default_rng(cfg.seed + 104729)
    W = {}
    for l in range(cfg.layers):
        if not has_experts(cfg, l):
            continue
        p = "l%d." % l
        r = g.standard_normal((E, H)) / np.sqrt(H)
        r[1] = r[0] + TIE * g.standard_normal(H) / np.sqrt(H)
        W[p + "router"] = r
        W[p + "egate"] = g.standard_normal((E, FFN, H)) / np.sqrt(H)
        W[p + "eup"] = g.standard_normal((E, FFN, H)) / np.sqrt(H)
        W[p + "edown"] = g.standard_normal((E, H, FFN)) / np.sqrt(FFN)
        for k in ("egate", "eup", "edown"):
            W[p + k][1] = W[p + k][0] + TWIN * (W[p + k][1] - W[p + k][0])
        W[p + "sgate"] = g.standard_normal((SHARED_FFN, H)) / np.sqrt(H)
        W[p + "sup"] = g.standard_normal((SHARED_FFN, H)) / np.sqrt(H)
        W[p + "sdown"] = g.standard_normal((H, SHARED_FFN)) / np.sqrt(SHARED_FFN)
        W[p + "sexp_gate"] = g.standard_normal((1, H)) / np.sqrt(H)
        W[p + "bias"] = 0.1 * g.standard_normal(E)    # e_score_correction_bias
        W[p + "bias"][1] = W[p + "bias"][0]
    return W


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _swiglu(x, gw, uw, dw):
    return (_silu(x @ gw.T) * (x @ uw.T)) @ dw.T


def _topk(scores, k):
    """torch.topk's ids, largest first; ties to the lower id (a stable sort)."""
    return np.argsort(-scores, axis=-1, kind="stable")[..., :k]


def _group_limited(choice, bug):
    """DeepseekV3TopkRouter.get_topk_indices: the topk_group groups with the
    best sums of their two best choice scores, the others masked to 0."""
    if bug == "moe-group":
        return _topk(choice, K)
    S = choice.shape[0]
    grouped = choice.reshape(S, N_GROUP, E // N_GROUP)
    gscore = np.sort(grouped, -1)[..., ::-1][..., :2].sum(-1)
    keep = np.zeros((S, N_GROUP), bool)
    np.put_along_axis(keep, _topk(gscore, TOPK_GROUP), True, -1)
    masked = np.where(np.repeat(keep, E // N_GROUP, -1), choice, 0.0)
    return _topk(masked, K)


def route(x, W, l, cfg, bug, bf16_round):
    """(logits, probabilities, ids, weights) of layer l's router."""
    p = "l%d." % l
    # a bf16 port (dtype-precision): its router sees bf16 hidden states;
    # Mixtral's and Qwen2-MoE's gate is an nn.Linear in the model's dtype
    # (bf16 logits), DeepseekV3TopkRouter scores in float32 (F.linear of
    # hidden_states.type(torch.float32))
    logits = (bf16_round(x) if bug == "dtype-precision" else x) @ W[p + "router"].T
    if bug == "dtype-precision" and cfg.moe != "deepseek":
        logits = bf16_round(logits)
    if cfg.moe == "deepseek" and bug != "moe-softmax":
        probs = 1.0 / (1.0 + np.exp(-logits))
    else:
        z = np.exp(logits - logits.max(-1, keepdims=True))
        probs = z / z.sum(-1, keepdims=True)
    if cfg.moe == "deepseek":
        choice = probs + W[p + "bias"][None, :]
        ids = _group_limited(choice, bug)
        w = np.take_along_axis(choice if bug == "moe-bias-weights" else probs, ids, -1)
    else:
        ids = _topk(probs, K)
        w = np.take_along_axis(probs, ids, -1)
    if NORM_TOPK[cfg.moe] != (bug == "moe-renorm"):
        w = w / (w.sum(-1, keepdims=True) + (1e-20 if cfg.moe == "deepseek" else 0.0))
    if cfg.moe == "deepseek":
        w = w * (SCALING * SCALING if bug == "moe-scaling" else SCALING)
    return logits, probs, ids, w


def forward(x, W, l, cfg, bug, sub, bf16_round):
    p = "l%d." % l
    logits, probs, ids, w = route(x, W, l, cfg, bug, bf16_round)
    # moe-expert-order: the checkpoint's experts.N converted in reverse order
    perm = np.arange(E)[::-1] if bug == "moe-expert-order" else np.arange(E)
    routed = np.zeros_like(x)
    for e in range(E):
        rows, slot = np.nonzero(ids == e)
        if rows.size:
            q = perm[e]
            y = _swiglu(x[rows], W[p + "egate"][q], W[p + "eup"][q], W[p + "edown"][q])
            routed[rows] += w[rows, slot][:, None] * y
    n = "layers.%d.mlp." % l
    sub[n + "router"] = logits
    sub[n + "router_probs"] = probs
    sub[n + "topk_ids"] = ids.astype(np.int64)
    sub[n + "topk_weights"] = w
    sub[n + "experts"] = routed
    out = routed
    # moe-shared: a port with no shared expert has no module to hook either
    if cfg.moe in ("qwen2", "deepseek") and bug != "moe-shared":
        shared = _swiglu(x, W[p + "sgate"], W[p + "sup"], W[p + "sdown"])
        if cfg.moe == "qwen2":
            glogit = x @ W[p + "sexp_gate"].T
            sub[n + "shared_pre"] = shared
            sub[n + "shared_gate"] = glogit
            if bug != "moe-shared-gate":
                shared = shared / (1.0 + np.exp(-glogit))
        sub[n + "shared"] = shared
        out = routed + shared
    return out
