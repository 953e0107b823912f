#!/usr/bin/env python3
"""dump_hf: record the per-sublayer activations of a Hugging Face style
PyTorch model with forward hooks, for tbisect.

Hooks go on the modules of a Llama-style decoder (Llama, Mistral, Qwen,
Gemma, Phi-3 and anything else with the same module names):

    embed_tokens                      -> model.embed_tokens        (embed)
    layers.N.input_layernorm          -> model.layers.N.input_layernorm
    layers.N.self_attn  (tuple: [0])  -> model.layers.N.self_attn
    layers.N.post_attention_layernorm -> model.layers.N.post_attention_layernorm
    layers.N.mlp                      -> model.layers.N.mlp
    layers.N        (tuple: [0])      -> model.layers.N            (block)
    norm                              -> model.norm                (final_norm)
    lm_head                           -> lm_head                   (logits)

and, with sub=True, self_attn.{q,k,v,o}_proj and mlp.{gate,up,down}_proj
(q_proj and k_proj are before RoPE, as the projections compute them).
With replay=True (sub implied) also the taps tbisect replays ops from,
under canonical names (no module returns them):

    apply_rotary_pos_emb's (q, k) -> layers.N.attn.q_rope, layers.N.attn.k_rope
                                     ([1, heads, seq, head_dim], after RoPE)
    self_attn.o_proj's input      -> layers.N.attn.core
    mlp.down_proj's input         -> layers.N.mlp.act

A mixture-of-experts layer (Mixtral's block_sparse_moe, or an mlp with
a gate router, experts and top_k) is recorded as its MLP, and with sub=True
also its routing:

    BLOCK.gate's output               -> model.layers.N.BLOCK.gate   (mlp.router)
    the experts chosen, [B, S, k]     -> model.layers.N.BLOCK.selected_experts
    their combine weights, [B, S, k]  -> model.layers.N.BLOCK.routing_weights
    the experts' weighted sum         -> model.layers.N.BLOCK.experts

The chosen experts and weights are what the block's own torch.topk call
returned while it ran (transformers 4.x renormalises those weights in
place, so they are read when the block returns), or the router's own
(logits, weights, ids) when it returns them (transformers 5).  The experts'
sum is the experts module's output when it is called, else the block's
output when the block has no shared expert.

apply_rotary_pos_emb is recorded by wrapping the function of that name in
the attention class's own module (modeling_llama, modeling_qwen2, ...),
which its forward looks up at each call; the wrapper is removed on close.  The
names written are the canonical names above whatever the model's own module
paths are (a bare LlamaModel, a PEFT wrapper, a multimodal model's language
model via root=...), or the canonical names with naming="canonical".

Works on any torch.nn.Module with that structure; `transformers` is only
needed to load a checkpoint from the command line.  Writes a directory of
.npy files (bfloat16 as raw '<V2' plus a dtypes.json manifest) or one
.safetensors file, with no numpy and no safetensors package.

Library use:

    import dump_hf
    dump_hf.dump(model, input_ids, "ref")            # runs model(input_ids)

    with dump_hf.Recorder(model) as rec:              # your own forward call
        model.generate(input_ids, max_new_tokens=1)
    dump_hf.save(rec.tensors, "ref.safetensors")

Command line:

    python3 dump_hf.py --model PATH_OR_ID --prompt "Hello" OUT
    python3 dump_hf.py --factory mymodule:build --tokens 1,2,3 OUT
"""

import argparse
import ctypes
import importlib
import json
import os
import re
import struct
import sys

import torch

# Role of each hooked module: (attribute path under a decoder layer, tap).
LAYER_TAPS = [
    ("input_layernorm", "attn_norm"),
    ("self_attn", "attn"),
    ("mlp_norm", "mlp_norm"),  # resolved by mlp_norm_module()
    ("mlp", "mlp"),
    ("", "block"),
]
SUB_TAPS = [
    ("self_attn.q_proj", "attn.q"),
    ("self_attn.k_proj", "attn.k"),
    ("self_attn.v_proj", "attn.v"),
    ("self_attn.o_proj", "attn.o"),
    ("mlp.gate_proj", "mlp.gate"),
    ("mlp.up_proj", "mlp.up"),
    ("mlp.down_proj", "mlp.down"),
]
# Replay taps (tbisect-rules(5) CONFIRMED CAUSES) read from a module's input: (attribute path, tap).
REPLAY_INPUT_TAPS = [
    ("self_attn.o_proj", "attn.core"),
    ("mlp.down_proj", "mlp.act"),
]
# The function a Hugging Face attention applies RoPE with, returning (q, k).
ROPE_FUNCTION = "apply_rotary_pos_emb"
# A decoder layer's MLP, by the attribute names models give it.
MLP_ATTRS = ("mlp", "block_sparse_moe")
# A mixture-of-experts MLP's taps: (tap, name after the block's path).
MOE_TAPS = [
    ("mlp.router", "gate"),
    ("mlp.topk_ids", "selected_experts"),
    ("mlp.topk_weights", "routing_weights"),
    ("mlp.experts", "experts"),
]

# tbisect-dumps(5) NAMING: names of the canonical taps in the Hugging Face convention.
HF_NAMES = {
    "embed": "model.embed_tokens",
    "attn_norm": "model.layers.{}.input_layernorm",
    "attn": "model.layers.{}.self_attn",
    "attn.q": "model.layers.{}.self_attn.q_proj",
    "attn.k": "model.layers.{}.self_attn.k_proj",
    "attn.v": "model.layers.{}.self_attn.v_proj",
    "attn.o": "model.layers.{}.self_attn.o_proj",
    "mlp_norm": "model.layers.{}.post_attention_layernorm",
    "mlp.gate": "model.layers.{}.mlp.gate_proj",
    "mlp.up": "model.layers.{}.mlp.up_proj",
    "mlp.down": "model.layers.{}.mlp.down_proj",
    "mlp": "model.layers.{}.mlp",
    "block": "model.layers.{}",
    "final_norm": "model.norm",
    "logits": "lm_head",
}

NPY_DESCR = {
    torch.float64: "<f8",
    torch.float32: "<f4",
    torch.float16: "<f2",
    torch.bfloat16: "<V2",
    torch.int64: "<i8",
    torch.int32: "<i4",
    torch.int16: "<i2",
    torch.int8: "|i1",
    torch.uint8: "|u1",
    torch.bool: "|b1",
}
ST_DTYPE = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


class DumpError(Exception):
    """A model or an output dump_hf cannot handle; the message says why."""


def tensor_name(tap, layer, naming, mlp="mlp"):
    """The name a tap is written under: HF module path or canonical.  mlp:
    the attribute the layer's MLP is under."""
    if naming == "canonical":
        return tap if layer is None else "layers.{}.{}".format(layer, tap)
    if tap == "mlp" or tap.startswith("mlp.") and tap in dict(MOE_TAPS):
        return "model.layers.{}.{}".format(layer, mlp) + (
            "" if tap == "mlp" else "." + dict(MOE_TAPS)[tap])
    if tap in HF_NAMES:
        return HF_NAMES[tap].format(layer)
    # Taps with no HF module of their own (Gemma 2's attention output norm).
    return "layers.{}.{}".format(layer, tap)


def find_decoder(model, root=None):
    """(path, module) of the decoder: the module holding embed_tokens and layers."""
    if root is not None:
        try:
            return root, model.get_submodule(root)
        except AttributeError as e:
            raise DumpError("--root {}: {}".format(root, e)) from None
    found = [(name, m) for name, m in model.named_modules()
             if isinstance(getattr(m, "layers", None), torch.nn.ModuleList)
             and isinstance(getattr(m, "embed_tokens", None), torch.nn.Module)]
    if not found:
        raise DumpError("no module has both embed_tokens and a layers ModuleList "
                        "(not a Llama-style decoder?)")
    if len(found) > 1:
        raise DumpError("several decoders ({}): choose one with root=/--root".format(
            ", ".join(name or "<model>" for name, _ in found)))
    return found[0]


def find_lm_head(model, decoder_path):
    """The lm_head beside the decoder (or on the model), or None."""
    parent = decoder_path.rsplit(".", 1)[0] if "." in decoder_path else ""
    for path in (parent + ".lm_head" if parent else "lm_head", "lm_head"):
        try:
            m = model.get_submodule(path)
        except AttributeError:
            continue
        if isinstance(m, torch.nn.Module):
            return m
    return None


def mlp_norm_module(layer):
    """The norm whose output feeds the MLP, and the extra norms to record.

    Gemma 2/3 norm the attention output with post_attention_layernorm and
    feed the MLP from pre_feedforward_layernorm."""
    pre = getattr(layer, "pre_feedforward_layernorm", None)
    if pre is not None:
        extra = [(getattr(layer, "post_attention_layernorm", None), "attn.post_norm"),
                 (getattr(layer, "post_feedforward_layernorm", None), "mlp.post_norm")]
        return pre, [(m, tap) for m, tap in extra if m is not None]
    return getattr(layer, "post_attention_layernorm", None), []


def mlp_module(layer):
    """(attribute, module) of a layer's MLP, or (None, None)."""
    for attr in MLP_ATTRS:
        m = getattr(layer, attr, None)
        if isinstance(m, torch.nn.Module):
            return attr, m
    return None, None


def is_moe(mlp):
    """Is this MLP a mixture of experts: a router, experts and a top-k?"""
    return all(getattr(mlp, a, None) is not None for a in ("gate", "experts", "top_k"))


def first_tensor(out):
    """A module's output tensor: the tensor, or the first tensor of a tuple."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for x in out:
            if isinstance(x, torch.Tensor):
                return x
    for key in ("last_hidden_state", "hidden_states", "logits"):
        x = getattr(out, key, None)
        if isinstance(x, torch.Tensor):
            return x
    return None


class Recorder:
    """Forward hooks that keep the first output of every hooked module.

    rec.tensors maps tensor names to detached CPU tensors; rec.calls counts
    how often each module ran (more than once: a generate() loop or a
    module reused; the first call is kept)."""

    def __init__(self, model, sub=False, naming="hf", root=None, replay=False):
        self.tensors = {}
        self.calls = {}
        self._handles = []
        self._patched = []
        self._topk = None
        self._layer = None
        self._moe = None
        self._naming = naming
        sub = sub or replay
        path, decoder = find_decoder(model, root)
        targets = [(decoder.embed_tokens, "embed", None, tensor_name("embed", None, naming))]
        for i, layer in enumerate(decoder.layers):
            norm, extra = mlp_norm_module(layer)
            mlp_attr, mlp = mlp_module(layer)
            for attr, tap in LAYER_TAPS:
                if tap == "mlp_norm":
                    m = norm
                elif tap == "mlp":
                    m, attr = mlp, "mlp"
                elif attr:
                    m = getattr(layer, attr, None)
                else:
                    m = layer
                if m is None:
                    raise DumpError("layer {} has no {}".format(i, attr or tap))
                targets.append((m, tap, i, tensor_name(tap, i, naming, mlp_attr)))
            targets.extend((m, tap, i, tensor_name(tap, i, naming)) for m, tap in extra)
            if sub:
                for attr, tap in SUB_TAPS:
                    try:
                        targets.append((layer.get_submodule(attr), tap, i, tensor_name(tap, i, naming)))
                    except AttributeError:
                        pass
                if is_moe(mlp):
                    self._hook_moe(mlp, i, mlp_attr, targets)
            if replay:
                self._hook_replay(layer, i, moe=is_moe(mlp))
        norm = getattr(decoder, "norm", None)
        if norm is not None:
            targets.append((norm, "final_norm", None, tensor_name("final_norm", None, naming)))
        head = find_lm_head(model, path)
        if head is not None:
            targets.append((head, "logits", None, tensor_name("logits", None, naming)))
        seen = {}
        for m, tap, layer, name in targets:
            if id(m) in seen:
                raise DumpError("{} and {} are the same module".format(seen[id(m)], name))
            seen[id(m)] = name
            self._handles.append(m.register_forward_hook(self._hook(name)))

    def _keep(self, name, t):
        self.calls[name] = self.calls.get(name, 0) + 1
        if name in self.tensors:
            return
        if t is None:
            raise DumpError("{}: holds no tensor".format(name))
        self.tensors[name] = t.detach().to("cpu").contiguous()

    def _hook(self, name):
        def hook(module, inputs, output):
            self._keep(name, first_tensor(output))
        return hook

    def _input_hook(self, name):
        def hook(module, inputs):
            self._keep(name, first_tensor(inputs))
        return hook

    def _hook_moe(self, block, i, attr, targets):
        """Layer i's routing: the router's output, the block's torch.topk
        while it runs, the experts' sum."""
        name = {tap: tensor_name(tap, i, self._naming, attr) for tap, _ in MOE_TAPS}
        experts_called = type(block.experts).forward is not torch.nn.ModuleList.forward
        shared = any(getattr(block, a, None) is not None for a in ("shared_expert", "shared_experts"))

        def enter(module, inputs):
            x = first_tensor(inputs)
            self._moe = {"lead": tuple(x.shape[:-1]), "topk": None}
            if self._topk is None:
                self._topk = torch.topk
                torch.topk = self._topk_recorder

        def route(module, inputs, output):
            # the router's logits, before any score function, at the block's
            # [B, S] when the block flattens the tokens
            logits = first_tensor(output)
            lead = self._moe["lead"] if self._moe is not None else tuple(logits.shape[:-1])
            self._keep(name["mlp.router"], logits.reshape(lead + tuple(logits.shape[-1:])))
            if isinstance(output, (tuple, list)) and len(output) == 3 and self._moe is not None:
                self._moe["topk"] = (output[1], output[2])  # a router returning (logits, weights, ids)

        def leave(module, inputs, output):
            moe, self._moe = self._moe, None
            if self._topk is not None:
                torch.topk = self._topk
                self._topk = None
            if moe is None or moe["topk"] is None:
                raise DumpError("layer {}: its experts block ran no torch.topk to record the "
                                "selected experts from".format(i))
            weights, ids = moe["topk"]
            k = ids.shape[-1]
            self._keep(name["mlp.topk_weights"], weights.reshape(moe["lead"] + (k,)))
            self._keep(name["mlp.topk_ids"], ids.reshape(moe["lead"] + (k,)))
            if not experts_called and not shared:
                self._keep(name["mlp.experts"], first_tensor(output))
        self._handles.append(block.register_forward_pre_hook(enter))
        self._handles.append(block.gate.register_forward_hook(route))
        self._handles.append(block.register_forward_hook(leave))
        if experts_called:
            targets.append((block.experts, "mlp.experts", i, name["mlp.experts"]))

    def _topk_recorder(self, *args, **kwargs):
        out = self._topk(*args, **kwargs)
        if self._moe is not None and self._moe["topk"] is None:
            # the values as they are: the block renormalises them in place
            self._moe["topk"] = (out[0], out[1].clone())
        return out

    def _hook_replay(self, layer, i, moe=False):
        """o_proj's and down_proj's inputs (not an experts block's: its
        experts have one each), and RoPE's output while layer i's attention
        runs."""
        for attr, tap in REPLAY_INPUT_TAPS:
            if moe and attr.startswith("mlp."):
                continue
            try:
                m = layer.get_submodule(attr)
            except AttributeError:
                raise DumpError("layer {} has no {} (replay taps)".format(i, attr)) from None
            self._handles.append(m.register_forward_pre_hook(
                self._input_hook(tensor_name(tap, i, self._naming))))
        attn = getattr(layer, "self_attn", None)
        mod = sys.modules.get(type(attn).__module__)
        if attn is None or not callable(getattr(mod, ROPE_FUNCTION, None)):
            raise DumpError("layer {}: the attention's module {} has no {} to record q and k "
                            "after RoPE with".format(i, type(attn).__module__, ROPE_FUNCTION))
        if not any(m is mod for m, _ in self._patched):
            self._patched.append((mod, getattr(mod, ROPE_FUNCTION)))
            setattr(mod, ROPE_FUNCTION, self._rope_recorder(getattr(mod, ROPE_FUNCTION)))

        def enter(module, inputs):
            self._layer = i

        def leave(module, inputs, output):
            self._layer = None
        self._handles.append(attn.register_forward_pre_hook(enter))
        self._handles.append(attn.register_forward_hook(leave))

    def _rope_recorder(self, fn):
        def apply_rotary_pos_emb(*args, **kwargs):
            out = fn(*args, **kwargs)
            if self._layer is not None:
                if not (isinstance(out, tuple) and len(out) >= 2):
                    raise DumpError("{} returned {}, not (q, k)".format(ROPE_FUNCTION, type(out).__name__))
                self._keep(tensor_name("attn.q_rope", self._layer, self._naming), out[0])
                self._keep(tensor_name("attn.k_rope", self._layer, self._naming), out[1])
            return out
        return apply_rotary_pos_emb

    def close(self):
        for h in self._handles:
            h.remove()
        self._handles = []
        for mod, fn in self._patched:
            setattr(mod, ROPE_FUNCTION, fn)
        self._patched = []
        if self._topk is not None:
            torch.topk = self._topk
            self._topk = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def raw_bytes(t):
    """The tensor's elements, little-endian, C order (no numpy needed)."""
    if sys.byteorder != "little":
        raise DumpError("big-endian hosts are not supported")
    t = t.contiguous()
    n = t.numel() * t.element_size()
    return ctypes.string_at(t.data_ptr(), n) if n else b""


def write_npy(path, t):
    if t.dtype not in NPY_DESCR:
        raise DumpError("{}: dtype {} has no npy form".format(path, t.dtype))
    shape = tuple(t.shape)
    dims = "({},)".format(shape[0]) if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"
    head = "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}".format(NPY_DESCR[t.dtype], dims)
    # Version 1.0; data starts on a 64-byte boundary.
    pad = 63 - (10 + len(head)) % 64
    head = (head + " " * pad + "\n").encode("latin1")
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + raw_bytes(t))


def write_safetensors(path, tensors):
    header = {"__metadata__": {"format": "pt", "producer": "tbisect dump_hf.py"}}
    blobs, off = [], 0
    for name, t in tensors.items():
        if t.dtype not in ST_DTYPE:
            raise DumpError("{}: dtype {} has no safetensors form".format(name, t.dtype))
        b = raw_bytes(t)
        header[name] = {"dtype": ST_DTYPE[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def save(tensors, out, fmt=None, dtype=None):
    """Write tensors (name -> tensor) to out: a directory of .npy files, or
    one .safetensors file (out ending in .safetensors, or fmt="safetensors":
    out/activations.safetensors).  dtype: cast floating tensors first."""
    if dtype is not None:
        tensors = {k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()}
    if fmt is None:
        fmt = "safetensors" if out.endswith(".safetensors") else "npy"
    if fmt == "safetensors":
        path = out if out.endswith(".safetensors") else os.path.join(out, "activations.safetensors")
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write_safetensors(path, tensors)
        return [path]
    if fmt != "npy":
        raise DumpError("unknown format {!r} (npy or safetensors)".format(fmt))
    os.makedirs(out, exist_ok=True)
    paths = []
    for name, t in tensors.items():
        paths.append(os.path.join(out, name + ".npy"))
        write_npy(paths[-1], t)
    if any(t.dtype == torch.bfloat16 for t in tensors.values()):
        # npy has no bfloat16: tell tbisect what the raw '<V2' files hold.
        with open(os.path.join(out, "dtypes.json"), "w") as f:
            json.dump({"*": "bfloat16"}, f)
            f.write("\n")
    return paths


def dump(model, input_ids, out, fmt=None, naming="hf", sub=False, dtype=None, root=None,
         save_tokens=False, replay=False):
    """Run model(input_ids) once under no_grad with the hooks on, and save."""
    with Recorder(model, sub=sub, naming=naming, root=root, replay=replay) as rec:
        with torch.no_grad():
            model(input_ids)
    again = sorted(n for n, c in rec.calls.items() if c > 1)
    if again:
        print("dump_hf: ran more than once, kept the first call: " + ", ".join(again),
              file=sys.stderr)
    tensors = dict(rec.tensors)
    if save_tokens:
        tensors["tokens"] = input_ids.detach().to("cpu", torch.int64)
    return save(tensors, out, fmt, dtype)


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def load_model(args):
    if args.factory:
        mod, _, fn = args.factory.partition(":")
        if not fn:
            raise DumpError("--factory {}: expected MODULE:FUNCTION".format(args.factory))
        kwargs = dict(kv.split("=", 1) for kv in args.factory_arg)
        return getattr(importlib.import_module(mod), fn)(**kwargs), None
    try:
        import transformers
    except ImportError:
        raise DumpError("--model needs the transformers package (or use --factory)") from None
    dtype = DTYPES[args.model_dtype] if args.model_dtype else "auto"
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype)
    tok = transformers.AutoTokenizer.from_pretrained(args.model) if args.prompt is not None else None
    return model, tok


def main(argv=None):
    p = argparse.ArgumentParser(description="Dump per-sublayer activations of an HF-style "
                                "PyTorch model for tbisect.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="checkpoint directory or hub id (needs transformers)")
    src.add_argument("--factory", help="MODULE:FUNCTION returning an nn.Module")
    p.add_argument("--factory-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument (a string) for the factory; repeatable")
    ids = p.add_mutually_exclusive_group(required=True)
    ids.add_argument("--prompt", help="text to tokenize (with --model)")
    ids.add_argument("--tokens", help="token ids, comma-separated")
    p.add_argument("--format", choices=["npy", "safetensors"], help="default: npy, or "
                   "safetensors when OUT ends in .safetensors")
    p.add_argument("--naming", choices=["hf", "canonical"], default="hf")
    p.add_argument("--dtype", choices=sorted(DTYPES), help="cast recorded activations")
    p.add_argument("--model-dtype", choices=sorted(DTYPES), help="run the model in this dtype")
    p.add_argument("--sub", action="store_true", help="also q/k/v/o and gate/up/down projections")
    p.add_argument("--replay", action="store_true", help="--sub, and q and k after RoPE, o_proj's "
                   "and down_proj's inputs (the taps tbisect replays ops from)")
    p.add_argument("--root", help="module path of the decoder, when there are several")
    p.add_argument("--save-tokens", action="store_true", help="also write the ids as 'tokens'")
    p.add_argument("out", help="output directory (or FILE.safetensors)")
    args = p.parse_args(argv)
    try:
        model, tok = load_model(args)
        if args.model_dtype and args.factory:
            model = model.to(DTYPES[args.model_dtype])
        model.eval()
        if args.tokens is not None:
            try:
                input_ids = torch.tensor([[int(x) for x in args.tokens.split(",")]])
            except ValueError:
                raise DumpError("--tokens {}: expected integers joined by commas".format(
                    args.tokens)) from None
        elif tok is not None:
            input_ids = tok(args.prompt, return_tensors="pt").input_ids
        else:
            raise DumpError("--prompt needs --model (a tokenizer); use --tokens")
        paths = dump(model, input_ids, args.out, args.format, args.naming, args.sub,
                     DTYPES[args.dtype] if args.dtype else None, args.root, args.save_tokens, args.replay)
    except DumpError as e:
        print("dump_hf: {}".format(e), file=sys.stderr)
        return 2
    print("dump_hf: wrote {} file(s) under {}".format(len(paths), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
