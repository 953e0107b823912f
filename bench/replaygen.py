#!/usr/bin/python3
"""The replay bench's trees: one attention layer's replay taps (q and k
before and after RoPE, v, the attention output) for a reference and two
candidates, one with the softmax scale left out (first divergence
attn.core) and one with RoPE theta 5e5 for 1e4 (first divergence
attn.q_rope).  Canonical names, f32 .npy, [seq, width].  --oproj writes
what Hugging Face's module hooks give instead: q, k and v before RoPE and
o_proj's output (a random square o_proj), no q_rope and no attn.core, so
that the replay of attn.o fits o_proj.

    replaygen.py --seq S --heads N --kv-heads K --head-dim D [--oproj] OUT
"""
import argparse
import os

import numpy as np


def rope(x, theta):
    """x [S, n, D], Hugging Face's rotate-half."""
    s, d = x.shape[0], x.shape[-1]
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.arange(s)[:, None] * inv[None, :]
    cos = np.cos(np.concatenate([ang, ang], 1))[:, None, :]
    sin = np.sin(np.concatenate([ang, ang], 1))[:, None, :]
    rot = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1)
    return (x * cos + rot * sin).astype(np.float32)


def attend(q, k, v, scale):
    s, nh, d = q.shape
    group = nh // k.shape[1]
    out = np.empty_like(q)
    mask = np.triu(np.full((s, s), -np.inf, np.float32), 1)
    for h in range(nh):
        sc = (q[:, h] @ k[:, h // group].T) * np.float32(scale) + mask
        sc -= sc.max(1, keepdims=True)
        p = np.exp(sc)
        p /= p.sum(1, keepdims=True)
        out[:, h] = p @ v[:, h // group]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--oproj", action="store_true")
    ap.add_argument("out")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    q = rng.standard_normal((a.seq, a.heads, a.head_dim), np.float32)
    k = rng.standard_normal((a.seq, a.kv_heads, a.head_dim), np.float32)
    v = rng.standard_normal((a.seq, a.kv_heads, a.head_dim), np.float32)
    usual = a.head_dim ** -0.5
    width = a.heads * a.head_dim
    wo = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
    for side, scale, theta in (("ref", usual, 1e4), ("softmax-scale", 1.0, 1e4), ("rope-theta", usual, 5e5)):
        d = os.path.join(a.out, side)
        os.makedirs(d, exist_ok=True)
        qr, kr = rope(q, theta), rope(k, theta)
        core = attend(qr, kr, v, scale)
        if a.oproj:
            taps = {"attn.q": q, "attn.k": k, "attn.v": v, "attn.o": core.reshape(a.seq, -1) @ wo.T}
        else:
            taps = {"attn.q": q, "attn.k": k, "attn.v": v, "attn.q_rope": qr, "attn.k_rope": kr, "attn.core": core}
        for name, x in taps.items():
            np.save(os.path.join(d, "layers.0.%s.npy" % name), x.reshape(a.seq, -1))


if __name__ == "__main__":
    main()
