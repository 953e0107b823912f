#!/usr/bin/env python3
"""dump_jax: record per-sublayer activations of a JAX model for tbisect,
as a directory of .npy files (numpy's np.save; bfloat16 arrays are written
by ml_dtypes as raw 2-byte void, so a dtypes.json manifest says what they
hold).

Two ways to get the tensors out of a JAX forward pass:

1. jax.debug.callback, in plain JAX or inside jit: call taps(name, x) at
   each sublayer output; the callback receives the concrete array.

       taps = Taps()
       def layer(p, x, i):
           h = x + taps("layers.{}.attn".format(i), attention(p, rms_norm(x)))
           ...
       jax.jit(forward)(params, ids)
       taps.save("cand")

2. Flax linen's sow: inside a module, self.sow("intermediates", "attn", y);
   then apply with mutable=["intermediates"] and save the collection:

       logits, state = model.apply(params, ids, mutable=["intermediates"])
       save_sown(state["intermediates"], "cand")

   Flax names submodules "layers_3"; save_sown writes "layers.3.attn", a
   canonical name tbisect pairs with model.layers.3.self_attn of a
   Hugging Face dump.  Sow the canonical taps (embed, attn_norm, attn,
   mlp_norm, mlp, block, final_norm, logits) or map your own names with a
   tbisect --map file.

For tbisect to replay an op and confirm a cause (tbisect-rules(5)), tap or
sow its inputs too, under the replay taps' names: "layers.N.attn.q" and
"attn.k" (the projections, before RoPE), "attn.q_rope" and "attn.k_rope"
(after it), "attn.v", "attn.core" (the heads' output, o_proj's input),
"mlp.gate", "mlp.up" and "mlp.act" (down_proj's input).

Run as a script, this file dumps a tiny Llama-style decoder written in
plain JAX (its tap names are the canonical ones; --replay adds those):

    python3 dump_jax.py OUT [--tokens 1,2,3] [--bf16] [--replay]
"""

import functools
import json
import os
import re
import sys

import numpy as np

SCOPE_INDEX = re.compile(r"^(.*?)_(\d+)$")


def flatten(tree, prefix=""):
    """Nested dicts of a sown collection -> {dotted name: array}.

    Flax keeps each sown value in a tuple (one entry per call): the first
    call is kept.  A scope "layers_3" becomes "layers.3"."""
    out = {}
    for key, value in tree.items():
        m = SCOPE_INDEX.match(key)
        part = "{}.{}".format(m.group(1), m.group(2)) if m else key
        name = prefix + part
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        elif isinstance(value, (tuple, list)):
            out[name] = value[0]
        else:
            out[name] = value
    return out


def save(arrays, out):
    """Write {name: array} as OUT/NAME.npy; returns the paths."""
    os.makedirs(out, exist_ok=True)
    paths, raw16 = [], False
    for name, x in arrays.items():
        a = np.asarray(x)
        raw16 |= a.dtype.name == "bfloat16"
        paths.append(os.path.join(out, name + ".npy"))
        np.save(paths[-1], a)
    if raw16:
        with open(os.path.join(out, "dtypes.json"), "w") as f:
            json.dump({"*": "bfloat16"}, f)
            f.write("\n")
    return paths


def save_sown(intermediates, out):
    """Save a Flax "intermediates" collection with tbisect-friendly names."""
    return save(flatten(intermediates), out)


class Taps:
    """Collects arrays from inside a (jitted) JAX function via jax.debug.callback."""

    def __init__(self):
        self.arrays = {}

    def __call__(self, name, x):
        import jax

        jax.debug.callback(functools.partial(self._keep, name), x)
        return x

    def _keep(self, name, x):
        self.arrays.setdefault(name, np.asarray(x))

    def save(self, out):
        return save(self.arrays, out)


# --- the example model: a tiny Llama-style decoder in plain JAX ---

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB, LAYERS = 32, 4, 2, 8, 64, 97, 2


def init(seed=0, dtype="float32"):
    import jax
    import jax.numpy as jnp

    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 64))

    def w(*shape):
        return (jax.random.normal(next(keys), shape) / np.sqrt(shape[0])).astype(dtype)

    layers = [dict(attn_norm=jnp.ones(HIDDEN, dtype), q=w(HIDDEN, HEADS * HEAD_DIM),
                   k=w(HIDDEN, KV_HEADS * HEAD_DIM), v=w(HIDDEN, KV_HEADS * HEAD_DIM),
                   o=w(HEADS * HEAD_DIM, HIDDEN), mlp_norm=jnp.ones(HIDDEN, dtype),
                   gate=w(HIDDEN, INTER), up=w(HIDDEN, INTER), down=w(INTER, HIDDEN))
              for _ in range(LAYERS)]
    return dict(embed=w(VOCAB, HIDDEN) * np.sqrt(VOCAB), layers=layers,
                norm=jnp.ones(HIDDEN, dtype), lm_head=w(HIDDEN, VOCAB))


def forward(params, ids, taps, replay=False):
    import jax
    import jax.numpy as jnp

    def rms_norm(x, wt):
        return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * wt

    def rope(x):  # x [S, heads, D], rotate-half
        s, d = x.shape[0], x.shape[-1]
        inv = 1.0 / 10000 ** (jnp.arange(0, d, 2) / d)
        ang = jnp.arange(s)[:, None] * inv[None, :]
        cos = jnp.concatenate([jnp.cos(ang)] * 2, -1)[:, None, :]
        sin = jnp.concatenate([jnp.sin(ang)] * 2, -1)[:, None, :]
        rot = jnp.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1)
        return (x * cos + rot * sin).astype(x.dtype)

    def tap(i, name, x):
        return taps("layers.{}.{}".format(i, name), x) if replay else x

    def attention(p, x, i):
        s = x.shape[0]
        q = rope(tap(i, "attn.q", x @ p["q"]).reshape(s, HEADS, HEAD_DIM))
        k = rope(tap(i, "attn.k", x @ p["k"]).reshape(s, KV_HEADS, HEAD_DIM))
        v = tap(i, "attn.v", x @ p["v"]).reshape(s, KV_HEADS, HEAD_DIM)
        q = tap(i, "attn.q_rope", q)
        k = tap(i, "attn.k_rope", k)
        k = jnp.repeat(k, HEADS // KV_HEADS, axis=1)
        v = jnp.repeat(v, HEADS // KV_HEADS, axis=1)
        scores = jnp.einsum("qhd,khd->hqk", q, k) / np.sqrt(HEAD_DIM)
        scores = jnp.where(jnp.tril(jnp.ones((s, s), bool)), scores, -jnp.inf)
        out = jnp.einsum("hqk,khd->qhd", jax.nn.softmax(scores, -1), v)
        return tap(i, "attn.core", out.reshape(s, HEADS * HEAD_DIM)) @ p["o"]

    x = taps("embed", params["embed"][ids])
    for i, p in enumerate(params["layers"]):
        n = taps("layers.{}.attn_norm".format(i), rms_norm(x, p["attn_norm"]))
        h = x + taps("layers.{}.attn".format(i), attention(p, n, i))
        n = taps("layers.{}.mlp_norm".format(i), rms_norm(h, p["mlp_norm"]))
        act = jax.nn.silu(tap(i, "mlp.gate", n @ p["gate"])) * tap(i, "mlp.up", n @ p["up"])
        m = taps("layers.{}.mlp".format(i), tap(i, "mlp.act", act) @ p["down"])
        x = taps("layers.{}.block".format(i), h + m)
    x = taps("final_norm", rms_norm(x, params["norm"]))
    return taps("logits", x @ params["lm_head"])


def main(argv=None):
    import argparse

    import jax
    import jax.numpy as jnp

    p = argparse.ArgumentParser(description="Dump a tiny JAX decoder's activations for tbisect.")
    p.add_argument("out")
    p.add_argument("--tokens", default="1,5,9,13,17,21,25,29")
    p.add_argument("--bf16", action="store_true", help="run in bfloat16")
    p.add_argument("--replay", action="store_true", help="also tap the inputs tbisect replays ops from")
    args = p.parse_args(argv)
    taps = Taps()
    params = init(dtype="bfloat16" if args.bf16 else "float32")
    ids = jnp.array([int(t) for t in args.tokens.split(",")])
    jax.block_until_ready(jax.jit(functools.partial(forward, taps=taps, replay=args.replay))(params, ids))
    jax.effects_barrier()
    paths = taps.save(args.out)
    print("dump_jax: wrote {} file(s) under {}".format(len(paths), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
