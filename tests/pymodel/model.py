#!/usr/bin/python3
"""A second tiny Llama-style decoder, in numpy, written apart from
samples/mkdemo so that the diagnosis is tested on a model of other shapes,
other weights and another dump layout: a reference dump and a candidate
with one injected porting bug.

    python3 model.py --bug rope-style --format npy|safetensors|bf16 --seed N \
        [--hidden 128] [--heads 4] [--kv-heads 2] [--head-dim 32] [--mlp 256] \
        [--vocab 512] [--layers 3] [--seq 32] [--theta 10000] [--prefill P] [--kv-dtype e4m3|e5m2] \
        [--subtaps] [--replay] \
        [--rope-scaling linear|llama3|yarn|dynamic:F] [--rope-orig 16] [--layer-types] [--nope N] \
        [--layout L] [--cand-layout L] REF CAND

npy trees use nested Hugging Face module paths (model/layers/0/self_attn.npy),
safetensors files canonical names.  --replay adds the taps a replay needs,
as dump_hf.py --replay writes them: q and k after RoPE in Hugging Face's
[1, heads, seq, head_dim], o_proj's and down_proj's inputs, under canonical
names (layers/0/attn.q_rope.npy).  Compute is float64 (the nan-overflow
candidate computes one MLP in float16, dtype-precision rounds the residual
stream to bf16); dumps are float32 or bf16.

Choices that make a bug visible:
  * norm-epsilon: 1e-5 against the reference's 1e-6; about 10% of vocabulary
    rows are rare tokens with 10x smaller embeddings and every prompt holds
    two, so the first norm sees tiny variances there.
  * nan-overflow: for that case only, layer 1's gate and up weights are x300
    in both models; the reference stays finite in float64, the candidate's
    float16 MLP overflows.
  * decode-position: seq is at least 160 (a RoPE table of 100 positions).
  * weight-mapping: layer layers // 2 uses o_proj transposed.
  * kv-cache: positions from --prefill on (default seq // 2) are decode
    steps: they attend to K (after RoPE) and V rounded to fp8 e4m3 (3
    mantissa bits, exponent bias 7, subnormals below 2^-6, saturating at
    448, round half to even), as a vLLM fp8 cache at scale 1 stores them;
    --kv-dtype e5m2: fp8 e5m2 (2 mantissa bits, subnormals below 2^-14).
  * dump-aliasing: the mlp (and down_proj) taps hold the block, the
    residual sum added into them in place after the hook kept a reference.
  * --sinks (gpt-oss): a sink logit per layer and head, N(0.5, 1), joins
    each softmax row as a last column, dropped after it (sinks-dropped);
    sinks-wrong reads each layer's sinks from the next layer's weights.
  * --softcap C (Gemma 2): logits = C tanh(logits / C); the logits' std is
    about 1, so softcap-missing takes C = 3 unless given; softcap-wrong
    caps at 2C.
  * --mlp-act oai (gpt-oss's SwiGLU): gate clamped to at most 7, up to +-7,
    (up + 1) gate sigmoid(1.702 gate); gate and up weights x4 (down / 16) so
    that the clamps bite (oai-plus-one, oai-clamp).
  The bugs sinks-*, softcap-* and oai-* turn on the option they
  need in both models.  The new parameters come from their own generator,
  so the other weights stay those of the same seed.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

import layouts
import moe as moe_block

BUGS = [
    "none", "tokenizer", "embedding-weights", "embedding-scale",
    "norm-formulation", "norm-epsilon", "rope-style", "rope-theta",
    "rotate-half-sign", "partial-rope", "qk-norm", "attention-layout",
    "gqa-repeat", "softmax-scale", "attention-mask", "sliding-window",
    "scale-multiplier", "mlp-activation", "mlp-gating", "mlp-bias",
    "residual-wiring", "weight-mapping", "final-norm", "lm-head",
    "tied-embeddings", "nan-overflow", "dtype-precision", "decode-position",
    "dump-offset", "dump-duplicate",
    "sinks-dropped", "softcap-missing", "oai-plus-one", "oai-clamp", "sinks-wrong", "softcap-wrong",
    "kv-cache", "dump-aliasing",
]
# RoPE scaling and NoPE bugs, each implying the model flag it needs (tests/e2e/rope_scaling.sh)
ROPE_BUGS = ("rope-scaling-missing", "rope-scaling-all", "rope-llama3", "rope-dynamic", "yarn-mscale",
             "yarn-mscale-twice", "yarn-ramp", "nope-inverted")
BUGS += list(ROPE_BUGS)
# Mixture-of-experts bugs (--moe)
BUGS += list(moe_block.BUGS)
# The cause id tbisect must name for each bug not named after its own.
# The one table of them: check.py, moecheck.py and bench/causesweep.sh and
# replaysweep.sh read it (mkdemo --list has mkdemo's).
CAUSE = {"sinks-dropped": "attention-sink", "sinks-wrong": "attention-sink", "softcap-missing": "final-softcap",
         "softcap-wrong": "final-softcap", "oai-plus-one": "mlp-activation", "oai-clamp": "mlp-activation",
         "rope-scaling-missing": "rope-scaling", "rope-scaling-all": "rope-scaling", "rope-llama3": "rope-scaling",
         "rope-dynamic": "rope-scaling",
         "yarn-mscale": "yarn-scaling", "yarn-mscale-twice": "yarn-scaling", "yarn-ramp": "yarn-scaling",
         "nope-inverted": "nope-layers", "moe-softmax": "moe-routing", "moe-renorm": "moe-routing",
         "moe-scaling": "moe-routing", "moe-bias-weights": "moe-routing", "moe-group": "moe-routing",
         "moe-expert-order": "expert-mapping", "moe-shared": "shared-expert", "moe-shared-gate": "shared-expert"}


def cause(bug):
    """The cause id tbisect must name for bug."""
    return CAUSE.get(bug, bug)


REF_EPS = 1e-6
CAND_EPS = 1e-5          # norm-epsilon candidate
WINDOW = 8               # the sliding layers' window (--layer-types), every layer's with sliding-window
ROPE_CACHE = 100         # decode-position candidate


def to_bf16_bits(a):
    """float -> bf16 bits (uint16), round to nearest even, NaN kept quiet."""
    f = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    u = f.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    r[nan] = 0x7FC0
    return r


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def bf16_round(a):
    return from_bf16_bits(to_bf16_bits(a)).astype(np.float64)


def rmsnorm(x, w, eps, plus_one=False):
    var = np.mean(x * x, axis=-1, keepdims=True)
    y = x / np.sqrt(var + eps)
    return y * ((1.0 + w) if plus_one else w)


def silu(x):
    with np.errstate(over="ignore"):
        return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


OAI_ALPHA = 1.702
OAI_LIMIT = 7.0
OAI_SCALE = 4.0          # gate and up weights of the --mlp-act oai model
SOFTCAP = 3.0            # softcap-missing's C unless --softcap


def swiglu_oai(g, u, plus_one=True, clamp=True):
    if clamp:
        g = np.minimum(g, OAI_LIMIT)
        u = np.clip(u, -OAI_LIMIT, OAI_LIMIT)
    glu = g / (1.0 + np.exp(-OAI_ALPHA * g))
    return ((u + 1.0) if plus_one else u) * glu


def make_weights(cfg, rng):
    H, nh, nkv, hd, F, V, L = (cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim,
                               cfg.mlp, cfg.vocab, cfg.layers)
    W = {}
    E = rng.standard_normal((V, H)) * 0.02
    rare = rng.random(V) < 0.10
    rare[:2] = True          # guarantee a few rare ids exist
    E[rare] *= 0.1
    W["embed"] = E
    W["rare"] = np.nonzero(rare)[0]
    for l in range(L):
        p = "l%d." % l
        W[p + "attn_norm"] = 1.0 + 0.2 * rng.standard_normal(H)
        W[p + "q"] = rng.standard_normal((nh * hd, H)) / np.sqrt(H)
        W[p + "k"] = rng.standard_normal((nkv * hd, H)) / np.sqrt(H)
        W[p + "v"] = rng.standard_normal((nkv * hd, H)) / np.sqrt(H)
        W[p + "o"] = rng.standard_normal((H, nh * hd)) / np.sqrt(nh * hd)
        W[p + "mlp_norm"] = 1.0 + 0.2 * rng.standard_normal(H)
        W[p + "gate"] = rng.standard_normal((F, H)) / np.sqrt(H)
        W[p + "up"] = rng.standard_normal((F, H)) / np.sqrt(H)
        W[p + "down"] = rng.standard_normal((H, F)) / np.sqrt(F)
        W[p + "bias"] = rng.standard_normal(H)       # only used by mlp-bias
    W["final_norm"] = 1.0 + 0.2 * rng.standard_normal(H)
    W["lm_head"] = rng.standard_normal((V, H)) / np.sqrt(H)
    if cfg.moe:
        W.update(moe_block.make_weights(cfg))
    extra = np.random.default_rng(cfg.seed + 7919)
    for l in range(L):
        W["l%d.sinks" % l] = 0.5 + extra.standard_normal(nh)
        if cfg.mlp_act == "oai":
            W["l%d.gate" % l] = W["l%d.gate" % l] * OAI_SCALE
            W["l%d.up" % l] = W["l%d.up" % l] * OAI_SCALE
            W["l%d.down" % l] = W["l%d.down" % l] / OAI_SCALE ** 2
    return W


def make_tokens(cfg, W, rng):
    S, V = cfg.seq, cfg.vocab
    t = rng.integers(0, V, S)
    rare = W["rare"]
    pos = rng.choice(np.arange(1, S), size=2, replace=False)
    t[pos] = rng.choice(rare, size=2)
    return t.astype(np.int64)


# Gemma 3: sliding layers keep rope_local_base_freq, unscaled; global ones
# use rope_theta with rope_scaling (linear x8 unless --rope-scaling says)
LOCAL_THETA = 10000.0
GLOBAL_THETA = 1000000.0
GLOBAL_SCALING = ("linear", 8.0)


def inv_frequencies(rd, theta, scaling, orig, length, bug):
    """inv_freq of transformers' modeling_rope_utils for rope_type default,
    linear, llama3 (low_freq_factor 1, high_freq_factor 4), yarn
    (beta_fast 32, beta_slow 1, truncated correction range) and dynamic
    (NTK: the base raised once length passes orig, as the prefill of
    length positions computes it); the YaRN attention factor is returned
    apart."""
    kind, factor = scaling or ("default", 1.0)
    if kind == "dynamic" and length > orig and bug != "rope-dynamic":
        theta = theta * (factor * length / orig - (factor - 1)) ** (rd / (rd - 2))
    inv = 1.0 / theta ** (np.arange(0, rd, 2, dtype=np.float64) / rd)
    if kind == "linear":
        return inv / factor, 1.0
    if kind == "llama3":
        lo, hi = (4.0, 1.0) if bug == "rope-llama3" else (1.0, 4.0)
        wavelen = 2 * np.pi / inv
        scaled = np.where(wavelen > orig / lo, inv / factor, inv)
        smooth = (orig / wavelen - lo) / (hi - lo)
        medium = (wavelen >= orig / hi) & (wavelen <= orig / lo)
        return np.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled), 1.0
    if kind == "yarn":
        def corr(rot):
            return rd * np.log(orig / (rot * 2 * np.pi)) / (2 * np.log(theta))
        low, high = max(np.floor(corr(32)), 0), min(np.ceil(corr(1)), rd - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(rd // 2) - low) / (high - low), 0, 1)
        keep = np.zeros(rd // 2) if bug == "yarn-ramp" else 1 - ramp
        inv = inv / factor * (1 - keep) + inv * keep
        m = 0.1 * np.log(factor) + 1
        return inv, {"yarn-mscale": 1.0, "yarn-mscale-twice": m * m}.get(bug, m)
    return inv, 1.0


def layer_rope(cfg, l, bug):
    """(theta, scaling, rotated) of layer l."""
    glob = not cfg.layer_types or l % 2 == 1
    theta, scaling = cfg.theta, None
    if glob or bug == "rope-scaling-all":
        scaling = cfg.rope_scaling
        if cfg.layer_types:
            theta, scaling = GLOBAL_THETA, scaling or GLOBAL_SCALING
    elif cfg.layer_types:
        theta = LOCAL_THETA
    if bug == "rope-scaling-missing":
        scaling = None
    nope = cfg.nope > 0 and (l + 1) % cfg.nope == 0
    return theta, scaling, nope if bug == "nope-inverted" else not nope


def rope_half(x, cos, sin):
    # x [S, h, rd]; HF rotate_half
    half = x.shape[-1] // 2
    c = np.concatenate([cos, cos], -1)[:, None, :]
    s = np.concatenate([sin, sin], -1)[:, None, :]
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * c + rot * s


def rope_interleaved(x, cos, sin):
    c = cos[:, None, :]
    s = sin[:, None, :]
    xe, xo = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = xe * c - xo * s
    out[..., 1::2] = xe * s + xo * c
    return out


# float8 formats of a KV cache: mantissa bits, the least normal exponent, the largest finite value
FP8 = {"e4m3": (3, -6, 448.0), "e5m2": (2, -14, 57344.0)}


def fp8(a, kind="e4m3"):
    """a rounded to float8 e4m3fn (or e5m2): spacing 2^(e-3) (2^(e-2)) in the
    binade [2^e, 2^(e+1)), the subnormals' below 2^-6 (2^-14), round half to
    even, |a| saturated at the largest finite value."""
    mant, emin, top = FP8[kind]
    m = np.abs(a)
    e = np.maximum(np.floor(np.log2(np.where(m > 0, m, 1.0))), emin)
    step = 2.0 ** (e - mant)
    return np.sign(a) * np.minimum(np.round(m / step) * step, top)


def attend(q, k, v, cfg, bug, sinks=None, sliding=False):
    """Causal attention; the last WINDOW keys on a sliding layer (Gemma 3's
    even layers with --layer-types) and on every layer with sliding-window."""
    S, nh, hd = q.shape
    nkv = k.shape[1]
    rep = nh // nkv
    if bug == "gqa-repeat":
        k = np.tile(k, (1, rep, 1))
        v = np.tile(v, (1, rep, 1))
    else:
        k = np.repeat(k, rep, axis=1)
        v = np.repeat(v, rep, axis=1)
    sc = np.einsum("qhd,khd->hqk", q, k)
    if bug != "softmax-scale":
        sc = sc / np.sqrt(hd)
    qi = np.arange(S)[:, None]
    ki = np.arange(S)[None, :]
    allowed = np.ones((S, S), bool) if bug == "attention-mask" else (ki <= qi)
    if bug == "sliding-window" or sliding:
        allowed &= (qi - ki) < WINDOW
    sc = np.where(allowed[None], sc, -np.inf)
    if sinks is not None:
        # gpt-oss eager_attention_forward: the sinks as a last column
        sc = np.concatenate([sc, np.broadcast_to(sinks[:, None, None], (nh, S, 1))], -1)
    sc = sc - sc.max(-1, keepdims=True)
    pr = np.exp(sc)
    pr /= pr.sum(-1, keepdims=True)
    return np.einsum("hqk,khd->qhd", pr[..., :S], v).reshape(S, nh * hd)


def attention(x, W, l, cfg, bug, sub=None):
    S = x.shape[0]
    nh, nkv, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
    p = "l%d." % l
    q = x @ W[p + "q"].T
    k = x @ W[p + "k"].T
    v = x @ W[p + "v"].T
    if sub is not None:
        sub["layers.%d.attn.q" % l] = q
        sub["layers.%d.attn.k" % l] = k
        sub["layers.%d.attn.v" % l] = v
    if bug == "attention-layout":
        # view as [S, head_dim, heads] then swap: head/channel axes scrambled
        q = q.reshape(S, hd, nh).transpose(0, 2, 1)
        k = k.reshape(S, hd, nkv).transpose(0, 2, 1)
        v = v.reshape(S, hd, nkv).transpose(0, 2, 1)
    else:
        q = q.reshape(S, nh, hd)
        k = k.reshape(S, nkv, hd)
        v = v.reshape(S, nkv, hd)
    if bug == "qk-norm":
        q = rmsnorm(q, 1.0, REF_EPS)
        k = rmsnorm(k, 1.0, REF_EPS)
    positions = np.arange(S)
    if bug == "decode-position":
        positions = positions % ROPE_CACHE
    theta, scaling, rotated = layer_rope(cfg, l, bug)
    theta = 500000.0 if bug == "rope-theta" else theta
    rd = hd // 2 if bug == "partial-rope" else hd
    inv, mscale = inv_frequencies(rd, theta, scaling, cfg.rope_orig, S, bug)
    f = np.outer(positions.astype(np.float64), inv) if rotated else np.zeros((S, rd // 2))
    cos, sin = np.cos(f) * mscale, np.sin(f) * mscale
    if bug == "rotate-half-sign":
        sin = -sin
    if bug == "rope-style":
        q = rope_interleaved(q, cos, sin)
        k = rope_interleaved(k, cos, sin)
    elif bug == "partial-rope":
        q = np.concatenate([rope_half(q[..., :rd], cos, sin), q[..., rd:]], -1)
        k = np.concatenate([rope_half(k[..., :rd], cos, sin), k[..., rd:]], -1)
    else:
        q = rope_half(q, cos, sin)
        k = rope_half(k, cos, sin)
    if sub is not None and cfg.replay:
        sub["layers.%d.attn.q_rope" % l] = q.transpose(1, 0, 2)
        sub["layers.%d.attn.k_rope" % l] = k.transpose(1, 0, 2)
    sinks = W[p + "sinks"] if cfg.sinks and bug != "sinks-dropped" else None
    if bug == "sinks-wrong":  # a checkpoint key one layer off
        sinks = W["l%d.sinks" % ((l + 1) % cfg.layers)]
    sliding = cfg.layer_types and l % 2 == 0
    out = attend(q, k, v, cfg, bug, sinks, sliding)
    if bug == "kv-cache":
        P = cfg.prefill if cfg.prefill else S // 2
        out[P:] = attend(q, fp8(k, cfg.kv_dtype), fp8(v, cfg.kv_dtype), cfg, bug, sinks, sliding)[P:]
    Wo = W[p + "o"]
    if bug == "weight-mapping" and l == cfg.layers // 2:
        if Wo.shape[0] == Wo.shape[1]:
            Wo = Wo.T
        else:
            perm = np.arange(nh * hd).reshape(nh, hd)[::-1].reshape(-1)
            Wo = Wo[:, perm]
    if sub is not None and cfg.replay:
        sub["layers.%d.attn.core" % l] = out
    o = out @ Wo.T
    if bug == "scale-multiplier":
        o = o * 0.5
    if sub is not None:
        sub["layers.%d.attn.o" % l] = o
    return o


def mlp(x, W, l, cfg, bug, sub=None):
    p = "l%d." % l
    if sub is None:
        sub = {}
    if moe_block.has_experts(cfg, l):
        return moe_block.forward(x, W, l, cfg, bug, sub, bf16_round)
    if bug == "nan-overflow" and l == 1:
        f16 = np.float16
        with np.errstate(over="ignore", invalid="ignore"):
            x16 = x.astype(f16)
            g = (x16 @ W[p + "gate"].T.astype(f16)).astype(f16)
            u = (x16 @ W[p + "up"].T.astype(f16)).astype(f16)
            h = (silu(g) * u).astype(f16)
            o = (h @ W[p + "down"].T.astype(f16)).astype(f16)
        sub["layers.%d.mlp.gate" % l] = g.astype(np.float64)
        sub["layers.%d.mlp.up" % l] = u.astype(np.float64)
        sub["layers.%d.mlp.act" % l] = h.astype(np.float64)
        sub["layers.%d.mlp.down" % l] = o.astype(np.float64)
        return o.astype(np.float64)
    g = x @ W[p + "gate"].T
    u = x @ W[p + "up"].T
    if cfg.mlp_act == "oai" and bug != "mlp-activation":
        a, b = (u, g) if bug == "mlp-gating" else (g, u)
        h = swiglu_oai(a, b, plus_one=bug != "oai-plus-one", clamp=bug != "oai-clamp")
    elif cfg.mlp_act == "oai":
        h = silu(g) * u      # a port that keeps the plain SwiGLU
    else:
        act = gelu_tanh if bug == "mlp-activation" else silu
        h = act(u) * g if bug == "mlp-gating" else act(g) * u
    o = h @ W[p + "down"].T
    if bug == "mlp-bias":
        rms = np.sqrt(np.mean(o * o))
        o = o + 0.3 * rms * W[p + "bias"][None, :]
    sub["layers.%d.mlp.gate" % l] = g
    sub["layers.%d.mlp.up" % l] = u
    sub["layers.%d.mlp.act" % l] = h
    sub["layers.%d.mlp.down" % l] = o
    return o


def forward(cfg, W, tokens, bug, subtaps=False):
    """Return ordered dict canonical-name -> array (2-D [S, X])."""
    L = cfg.layers
    eps = CAND_EPS if bug == "norm-epsilon" else REF_EPS
    plus1 = bug == "norm-formulation"
    rnd = bf16_round if bug == "dtype-precision" else (lambda a: a)
    taps = {}
    sub = {} if subtaps or cfg.replay or cfg.moe else None
    E = W["embed"]
    if bug == "embedding-weights":
        h = E[(tokens + 1) % cfg.vocab]
    else:
        h = E[tokens]
    if bug == "embedding-scale":
        h = h * np.sqrt(cfg.hidden)
    h = rnd(h)
    taps["embed"] = h
    for l in range(L):
        p = "l%d." % l
        xn = rmsnorm(h, W[p + "attn_norm"], eps, plus1)
        taps["layers.%d.attn_norm" % l] = xn
        a = attention(xn, W, l, cfg, bug, sub)
        taps["layers.%d.attn" % l] = a
        h = h + a
        mn = rmsnorm(h, W[p + "mlp_norm"], eps, plus1)
        taps["layers.%d.mlp_norm" % l] = mn
        m = mlp(mn, W, l, cfg, bug, sub)
        taps["layers.%d.mlp" % l] = m
        h = (mn + m) if bug == "residual-wiring" else (h + m)
        h = rnd(h)
        taps["layers.%d.block" % l] = h
        if bug == "dump-aliasing":
            taps["layers.%d.mlp" % l] = h
            if sub is not None:
                sub["layers.%d.mlp.down" % l] = h
    fw = np.ones(cfg.hidden) if bug == "final-norm" else W["final_norm"]
    fn = rmsnorm(h, fw, eps, plus1)
    taps["final_norm"] = fn
    if bug == "tied-embeddings":
        lm = E
    elif bug == "lm-head":
        lm = np.roll(W["lm_head"], -1, axis=0)
    else:
        lm = W["lm_head"]
    logits = fn @ lm.T
    if cfg.softcap and bug != "softcap-missing":
        cap = 2 * cfg.softcap if bug == "softcap-wrong" else cfg.softcap
        logits = cap * np.tanh(logits / cap)
    taps["logits"] = logits
    if bug == "dump-offset":
        prev = taps["embed"]
        for l in range(L):
            cur = taps["layers.%d.block" % l]
            taps["layers.%d.block" % l] = prev
            prev = cur
    if bug == "dump-duplicate":
        for l in range(1, L):
            taps["layers.%d.mlp" % l] = taps["layers.0.mlp"]
    if sub:
        taps.update({k: v for k, v in sub.items() if k.rsplit(".", 1)[1] in moe_block.TAPS or (
            (subtaps or cfg.replay) and (cfg.replay or k.rsplit(".", 1)[1] not in REPLAY_TAPS))})
    return taps


# the taps --replay adds; no Hugging Face module returns them
REPLAY_TAPS = ("q_rope", "k_rope", "core", "act")

HF_NAMES = {"attn_norm": "input_layernorm", "attn": "self_attn",
            "mlp_norm": "post_attention_layernorm", "mlp": "mlp"}


def hf_path(name):
    """canonical -> relative npy path (Hugging Face module paths)."""
    if name == "embed":
        return "model/embed_tokens.npy"
    if name == "final_norm":
        return "model/norm.npy"
    if name == "logits":
        return "lm_head.npy"
    if name == "tokens":
        return "tokens.npy"
    if name.count(".") == 3:
        _, l, tap, st = name.split(".")
        if st in REPLAY_TAPS:
            return "layers/%s/%s.%s.npy" % (l, tap, st)
        if tap == "attn":
            return "model/layers/%s/self_attn/%s_proj.npy" % (l, st)
        return "model/layers/%s/mlp/%s_proj.npy" % (l, st)
    _, l, tap = name.split(".")
    if tap == "block":
        return "model/layers/%s.npy" % l
    return "model/layers/%s/%s.npy" % (l, HF_NAMES[tap])


def write_npy_tree(out, tensors):
    os.makedirs(out, exist_ok=True)
    for name, a in tensors.items():
        path = os.path.join(out, hf_path(name))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        np.save(path, a)


def write_safetensors(out, tensors, bf16):
    header = {}
    blobs = []
    off = 0
    for name in sorted(tensors):
        a = tensors[name]
        if a.dtype == np.int64:
            dt, raw = "I64", a.astype("<i8").tobytes()
        elif bf16:
            dt, raw = "BF16", to_bf16_bits(a).astype("<u2").tobytes()
        else:
            dt, raw = "F32", a.astype("<f4").tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    d = os.path.dirname(os.path.abspath(out))
    os.makedirs(d, exist_ok=True)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def package(taps, tokens):
    t = {}
    for k, v in taps.items():
        t[k] = np.asarray(v, dtype=np.int64 if v.dtype == np.int64 else np.float32)[None]
    t["tokens"] = tokens[None].astype(np.int64)
    return t


def write(out, fmt, tensors, layout=None, cfg=None):
    if cfg is not None and cfg.moe:
        named = layouts.moe_names(tensors, cfg.moe_layout, cfg.moe)
        if fmt == "npy":
            for name, a in named.items():
                layouts.save_npy(out, name.replace(".", "/") + ".npy", a)
        else:
            write_safetensors(out, named, fmt == "bf16")
    elif layout:
        layouts.WRITERS[layout](out, tensors, cfg)
    elif fmt == "npy":
        write_npy_tree(out, tensors)
    else:
        write_safetensors(out, tensors, fmt == "bf16")


def build(cfg):
    if cfg.bug == "decode-position":
        cfg.seq = max(cfg.seq, 160)
    if cfg.bug in ("sinks-dropped", "sinks-wrong"):
        cfg.sinks = True
    if cfg.bug in ("softcap-missing", "softcap-wrong") and not cfg.softcap:
        cfg.softcap = SOFTCAP
    if cfg.bug in ("oai-plus-one", "oai-clamp"):
        cfg.mlp_act = "oai"
    rng = np.random.default_rng(cfg.seed)
    W = make_weights(cfg, rng)
    tokens = make_tokens(cfg, W, rng)
    if cfg.bug == "nan-overflow":
        W["l1.gate"] = W["l1.gate"] * 300.0
        W["l1.up"] = W["l1.up"] * 300.0
    ref = forward(cfg, W, tokens, "none", cfg.subtaps)
    ctok = tokens.copy()
    if cfg.bug == "tokenizer":
        pos = cfg.seq // 2
        ctok[pos] = (ctok[pos] + 1) % cfg.vocab
    cand = forward(cfg, W, ctok, cfg.bug, cfg.subtaps)
    return package(ref, tokens), package(cand, ctok)


def parse(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--bug", default="none", choices=BUGS)
    ap.add_argument("--format", default="npy", choices=["npy", "safetensors", "bf16"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--mlp", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--theta", type=float, default=10000.0)
    ap.add_argument("--sinks", action="store_true",
                    help="gpt-oss-like learned attention sinks, one logit per layer and head")
    ap.add_argument("--softcap", type=float, default=0.0,
                    help="Gemma-2-like final logit soft-capping C tanh(z / C) (0: none)")
    ap.add_argument("--mlp-act", default="silu", choices=["silu", "oai"],
                    help="the MLP's activation: silu or gpt-oss's SwiGLU (oai)")
    ap.add_argument("--prefill", type=int, default=0,
                    help="kv-cache: the positions of the prefill (default seq // 2)")
    ap.add_argument("--kv-dtype", default="e4m3", choices=sorted(FP8),
                    help="kv-cache: the cache's float8 format")
    ap.add_argument("--rope-scaling", type=rope_scaling_arg, default=None, metavar="TYPE:F",
                    help="linear, llama3, yarn or dynamic (NTK) scaling of every layer "
                    "(the global ones with --layer-types)")
    ap.add_argument("--rope-orig", type=int, default=16,
                    help="rope_scaling.original_max_position_embeddings")
    ap.add_argument("--layer-types", action="store_true",
                    help="Gemma-3-like: even layers sliding (theta 1e4, a window of 8), odd ones global (theta 1e6, "
                         "scaled)")
    ap.add_argument("--nope", type=int, default=0,
                    help="layers l with (l + 1) %% N == 0 have no RoPE (no_rope_layer_interval)")
    ap.add_argument("--subtaps", action="store_true",
                    help="also dump HF Linear outputs q/k/v/o_proj (q/k/v pre-RoPE) and gate/up/down_proj")
    ap.add_argument("--replay", action="store_true",
                    help="--subtaps and the replay taps: attn.q_rope, attn.k_rope, attn.core, mlp.act")
    ap.add_argument("--moe", choices=sorted(moe_block.NORM_TOPK),
                    help="every MLP a mixture of experts (deepseek: all but layer 0), of this router family")
    ap.add_argument("--moe-layout", default="canonical", choices=sorted(layouts.MOE_LAYOUTS),
                    help="the names and shapes an MoE model's taps are dumped under (tests/pymodel/layouts.py)")
    ap.add_argument("--layout", choices=sorted(layouts.WRITERS),
                    help="write both sides as this tool does (tests/pymodel/layouts.py)")
    ap.add_argument("--cand-layout", choices=sorted(layouts.WRITERS),
                    help="the candidate's layout, when not --layout's")
    ap.add_argument("out_ref")
    ap.add_argument("out_cand")
    cfg = ap.parse_args(argv)
    if cfg.heads % cfg.kv_heads:
        ap.error("heads must be a multiple of kv-heads")
    if cfg.layers < 2:
        ap.error("need at least 2 layers")
    imply(cfg, ap)
    fams = moe_block.FAMILY_BUGS.get(cfg.bug, tuple(moe_block.NORM_TOPK))
    if cfg.bug in moe_block.BUGS and cfg.moe not in fams:
        ap.error("%s needs --moe %s" % (cfg.bug, " or ".join(fams)))
    if cfg.moe and (cfg.layout or cfg.cand_layout):
        ap.error("--moe writes its own layouts: --moe-layout")
    return cfg


def rope_scaling_arg(text):
    kind, _, factor = text.partition(":")
    try:
        f = float(factor)
    except ValueError:
        f = 0.0
    if kind not in ("linear", "llama3", "yarn", "dynamic") or not f > 1:
        raise argparse.ArgumentTypeError("expected linear:F, llama3:F, yarn:F or dynamic:F with F > 1")
    return (kind, f)


def imply(cfg, ap):
    """The model flag a RoPE bug needs, as mkdemo sets it."""
    need = {"rope-llama3": "llama3", "rope-dynamic": "dynamic", "yarn-mscale": "yarn", "yarn-mscale-twice": "yarn",
            "yarn-ramp": "yarn"}
    if cfg.bug in ("rope-scaling-missing", "rope-scaling-all"):
        cfg.layer_types = True
    if cfg.bug == "nope-inverted" and not cfg.nope:
        cfg.nope = 4
    if cfg.bug in need:
        if cfg.layer_types:
            ap.error("%s scales every layer: not with --layer-types" % cfg.bug)
        if cfg.rope_scaling is None:
            cfg.rope_scaling = (need[cfg.bug], 8.0 if need[cfg.bug] == "llama3" else 4.0)
        if cfg.rope_scaling[0] != need[cfg.bug]:
            ap.error("%s needs --rope-scaling %s:F" % (cfg.bug, need[cfg.bug]))


def main():
    cfg = parse()
    ref, cand = build(cfg)
    write(cfg.out_ref, cfg.format, ref, cfg.layout, cfg)
    write(cfg.out_cand, cfg.format, cand, cfg.cand_layout or cfg.layout, cfg)


if __name__ == "__main__":
    main()
