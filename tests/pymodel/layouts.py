"""Dump layouts of the tools users dump with, written from model.py's taps
(canonical name -> float32 [1, S, X], "tokens" -> int64 [1, S]).

Each is a reconstruction: the tools themselves (transformers, MAX, JAX)
do not run here.  The lines that define each layout are cited by writer.
"""
import json
import os
import struct

import numpy as np


def _save(out, rel, a):
    path = os.path.join(out, rel)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    np.save(path, a)


def _layers(taps):
    return sorted({int(k.split(".")[1]) for k in taps if k.startswith("layers.")})


def modular(out, taps, cfg=None, max_side=False):
    """modular/skills debug-model/references/comparator-build.md (a85422d7):
      L47  np.save(f"{OUT_DIR}/{name}.npy", h[0].detach().float().cpu().numpy())
      L52  save("post_embed")            hook on backbone.embed_tokens
      L54  save(f"layer_{i:02d}")        hook on each backbone.layers[i]
      L55  save("post_final_norm")       hook on backbone.norm
      L66  np.save(f"{OUT_DIR}/last_logits.npy", out.logits[0, -1]...)
      L67  np.save(f"{OUT_DIR}/prompt_tokens.npy", inputs.input_ids[0]...)
    One flat folder; h[0] drops the batch axis: [S, H]; last_logits is
    [vocab], the last position only.  The MAX side (L163-176) writes the
    same names but no prompt_tokens.npy (max_side)."""
    _save(out, "post_embed.npy", taps["embed"][0])
    for l in _layers(taps):
        _save(out, "layer_%02d.npy" % l, taps["layers.%d.block" % l][0])
    _save(out, "post_final_norm.npy", taps["final_norm"][0])
    _save(out, "last_logits.npy", taps["logits"][0, -1])
    if not max_side:
        _save(out, "prompt_tokens.npy", taps["tokens"][0])


V5_TEXT = {"attn_norm": "input_layernorm", "attn": "self_attn",
           "mlp_norm": "post_attention_layernorm", "mlp": "mlp"}


def v5(out, taps, tower_layers=2, patches=9, width=48, seed=7, tower_bug=False):
    """transformers v5 VLM module paths, one npy per module as dump_hf.py
    hooks write them (folders for dots): the text model under
    model.language_model (modeling_qwen2_5_vl.py: Qwen2_5_VLModel holds
    .visual and .language_model; the causal-LM class holds .model and
    .lm_head, so lm_head has no such prefix), a Qwen-VL vision tower
    model.visual.blocks.N.{norm1,attn,norm2,mlp} and its merger.  The
    tower's activations are random: they are another model's; with
    tower_bug, block 1's attention and all after it are off by 5%."""
    for k, a in taps.items():
        if k == "tokens":
            rel = "input_ids"
        elif k == "embed":
            rel = "model/language_model/embed_tokens"
        elif k == "final_norm":
            rel = "model/language_model/norm"
        elif k == "logits":
            rel = "lm_head"
        else:
            parts = k.split(".")
            if len(parts) != 3:
                continue
            _, l, tap = parts
            rel = "model/language_model/layers/%s" % l
            if tap != "block":
                rel += "/" + V5_TEXT[tap]
        _save(out, rel + ".npy", a)
    rng = np.random.default_rng(seed)
    bad = [False]

    def tower(rel, shape):
        a = rng.standard_normal(shape).astype(np.float32)
        bad[0] = bad[0] or (tower_bug and rel == "model/visual/blocks/1/attn")
        _save(out, rel + ".npy", a * np.float32(1.05) if bad[0] else a)

    tower("model/visual/patch_embed", (patches, width))
    for l in range(tower_layers):
        for m in ("norm1", "attn", "norm2", "mlp"):
            tower("model/visual/blocks/%d/%s" % (l, m), (patches, width))
        tower("model/visual/blocks/%d" % l, (patches, width))
    tower("model/visual/merger", (patches // 3, taps["embed"].shape[-1]))


FLAX_ATTN = {"q": "query", "k": "key", "v": "value", "q_rope": "query_rotary",
             "k_rope": "key_rotary", "core": "attention_op", "o": "out"}
FLAX_MLP = {"gate": "wi_0", "up": "wi_1", "down": "wo"}
FLAX_MAIN = {"attn_norm": "pre_self_attention_layer_norm", "attn": "self_attention",
             "mlp_norm": "post_self_attention_layer_norm", "mlp": "mlp"}


def _flax_entries(taps, cfg):
    """(module path, array as MaxText's module returns it) of every tap.
    MaxText (pure Linen, AI-Hypercomputer/maxtext 3b642d1f): models.py
    L688-699 token_embedder and decoder; layers/decoders.py L473 Dropout_0,
    L594 layers_{lyr}, L609 decoder_norm, L614 Dropout_1, L632
    logits_dense; layers/llama2.py L71, 92, 126, 141 the four sublayers,
    L149 Dropout_0; attentions.py L1300 query, L1502-1503 key/value,
    L1529-1530 query_rotary/key_rotary, L1239 attention_op, L1372 out
    ([B, S, heads, head_dim] but out's); linears.py L242 wi_0/wi_1, L260
    Dropout_0, L270 wo."""
    S = taps["embed"].shape[1]
    heads = lambda a, n: a.reshape(1, S, n, -1)
    yield "token_embedder", taps["embed"]
    yield "decoder/Dropout_0", taps["embed"]
    for l in _layers(taps):
        p = "decoder/layers_%d" % l
        for tap, mod in FLAX_MAIN.items():
            yield "%s/%s" % (p, mod), taps["layers.%d.%s" % (l, tap)]
        yield p + "/Dropout_0", taps["layers.%d.mlp" % l]
        yield p, taps["layers.%d.block" % l]
        for st, mod in FLAX_ATTN.items():
            a = taps.get("layers.%d.attn.%s" % (l, st))
            if a is None:
                continue
            if st in ("q_rope", "k_rope"):   # model.py's [1, heads, S, d]
                a = a.transpose(0, 2, 1, 3)
            elif st != "o":
                a = heads(a, cfg.heads if st in ("q", "core") else cfg.kv_heads)
            yield "%s/self_attention/%s" % (p, mod), a
        for st, mod in FLAX_MLP.items():
            a = taps.get("layers.%d.mlp.%s" % (l, st))
            if a is not None:
                yield "%s/mlp/%s" % (p, mod), a
        if "layers.%d.mlp.act" % l in taps:
            yield p + "/mlp/Dropout_0", taps["layers.%d.mlp.act" % l]
    yield "decoder/decoder_norm", taps["final_norm"]
    yield "decoder/Dropout_1", taps["final_norm"]
    yield "decoder/logits_dense", taps["logits"]
    yield "decoder", taps["logits"]
    yield "", taps["logits"]


def flax(out, taps, cfg):
    """A capture_intermediates collection as users save it: the state's
    "intermediates" flattened with flax.traverse_util.flatten_dict(...,
    sep="/") into np.savez.  Flax's Module.sow (flax/linen/module.py L854,
    L1224-1226) stores each module's __call__ outputs as a tuple under
    "__call__", so every value is a 1-tuple, which np.savez saves with a
    leading axis of 1: "intermediates/decoder/layers_0/mlp/__call__"
    [1, 1, S, H]; the root's own output is "intermediates/__call__"."""
    flat = {}
    for path, a in _flax_entries(taps, cfg):
        key = "intermediates/" + (path + "/" if path else "") + "__call__"
        flat[key] = np.asarray((a,))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    np.savez(out, **flat)


def flax_tree(out, taps, cfg):
    """The same flattened with jax.tree_util.tree_flatten_with_path, which
    also enters the tuple: one .npy per call, "__call__/0.npy"."""
    for path, a in _flax_entries(taps, cfg):
        _save(out, "intermediates/" + (path + "/" if path else "") + "__call__/0.npy", a)


def flax_scan(out, taps, cfg):
    """MaxText with scan_layers (decoders.py L394-416: nn.scan named
    "layers", variable_axes {"intermediates": 0}): every layer tap stacked
    with the layer axis first, "decoder/layers/mlp/__call__/0" [L, 1, S,
    H]; the layer returns (output, None) under scan (llama2.py L165-168),
    so the block is item 0 of call 0: "decoder/layers/__call__/0/0"."""
    flat, stacks = {}, {}
    for path, a in _flax_entries(taps, cfg):
        parts = path.split("/")
        if len(parts) >= 2 and parts[1].startswith("layers_"):
            sub = "/".join(["decoder", "layers"] + parts[2:])
            stacks.setdefault(sub, []).append(a)
        else:
            flat["intermediates/" + (path + "/" if path else "") + "__call__/0"] = a
    for sub, arrs in stacks.items():
        key = "intermediates/" + sub + ("/__call__/0/0" if sub == "decoder/layers" else "/__call__/0")
        flat[key] = np.stack(arrs)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    np.savez(out, **flat)


HF_LEAVES = {"attn_norm": "input_layernorm", "attn.q": "self_attn.q_proj", "attn.k": "self_attn.k_proj",
             "attn.v": "self_attn.v_proj", "attn.o": "self_attn.o_proj", "mlp_norm": "post_attention_layernorm",
             "mlp.gate": "mlp.gate_proj", "mlp.up": "mlp.up_proj", "mlp.down": "mlp.down_proj"}


def hfdebug(out, taps, cfg=None):
    """transformers' model debugger with use_repr=False
    (src/transformers/model_debugging_utils.py, 079c5888):
      _serialize_tensor_like_io  save_file({"data": value...}, filepath);
                                 value_out = f"./{path_to_value}"
      wrap_forward               path_to_value=f"{full_path}_inputs" /
                                 f"{full_path}_outputs", full_path
                                 f"{class_name}.{name}"; _serialize_io
                                 appends _args, _0 for the args tuple
      wrap_forward               a module with children gets
                                 node["outputs"] = None: no file
      log_model_debug_trace      <class>_debug_tree_FULL_TENSORS.json, its
                                 first key "module_path"
    Leaf modules only, so no self_attn, mlp or decoder-layer output: a
    layer's input is the block before it, the final norm's input the last
    block.  Needs --subtaps (the projections)."""
    os.makedirs(out, exist_ok=True)
    cls = "LlamaForCausalLM"
    nodes = []

    def save(path, a):
        a = np.ascontiguousarray(a, dtype=np.float32)
        hj = json.dumps({"data": {"dtype": "F32", "shape": list(a.shape), "data_offsets": [0, a.nbytes]}}).encode()
        with open(os.path.join(out, path + ".safetensors"), "wb") as f:
            f.write(struct.pack("<Q", len(hj)) + hj + a.tobytes())
        return {"shape": repr(a.shape), "dtype": "torch.float32", "value": "./%s.safetensors" % path}

    def leaf(name, x, y):
        full = "%s.%s" % (cls, name)
        nodes.append({"module_path": full, "inputs": {"args": [save(full + "_inputs_args_0", x)]},
                      "outputs": save(full + "_outputs", y)})

    nodes.append({"module_path": cls + ".model.embed_tokens", "outputs": save(cls + ".model.embed_tokens_outputs",
                                                                             taps["embed"])})
    prev = taps["embed"]
    for l in _layers(taps):
        p = "layers.%d." % l
        full = "%s.model.layers.%d" % (cls, l)
        nodes.append({"module_path": full, "inputs": {"args": [save(full + "_inputs_args_0", prev)]}})
        for tap, mod in HF_LEAVES.items():
            src = taps[p + "attn_norm"] if tap.startswith("attn.") else taps[p + "mlp_norm"]
            leaf("model.layers.%d.%s" % (l, mod), src, taps[p + tap])
        prev = taps[p + "block"]
    leaf("model.norm", prev, taps["final_norm"])
    leaf("lm_head", taps["final_norm"], taps["logits"])
    with open(os.path.join(out, cls + "_debug_tree_FULL_TENSORS.json"), "w") as f:
        json.dump({"module_path": cls, "children": nodes}, f, indent=2)


WRITERS = {"hfdebug": hfdebug, "modular": modular, "modular-max": lambda o, t, c: modular(o, t, max_side=True),
           "v5": lambda o, t, c: v5(o, t), "v5-tower-bug": lambda o, t, c: v5(o, t, tower_bug=True), "flax": flax, "flax-tree": flax_tree, "flax-scan": flax_scan}


# Mixture-of-experts models (model.py --moe): the names and shapes each
# tool's hooks give an MoE layer's tensors.  A layout is a function of
# (canonical MoE taps of layer N, N, family) -> {raw name: (its tap, array)}; the
# dense taps keep Hugging Face's module paths in every layout.
save_npy = _save

MOE_HF_DENSE = {"attn_norm": "input_layernorm", "attn": "self_attn", "mlp_norm": "post_attention_layernorm",
                "mlp": "mlp", "mlp.gate": "mlp.gate_proj", "mlp.up": "mlp.up_proj", "mlp.down": "mlp.down_proj",
                "attn.q": "self_attn.q_proj", "attn.k": "self_attn.k_proj", "attn.v": "self_attn.v_proj",
                "attn.o": "self_attn.o_proj"}


def _moe_canonical(t, n, fam):
    """The model's own canonical names, every MoE sub-tap of the
    list (tbisect-dumps(5), Mixture of experts), as mkdemo writes them."""
    out = {"layers.%d.mlp.%s" % (n, k): ("mlp." + k, t[k]) for k in
           ("router", "router_probs", "topk_ids", "topk_weights", "experts", "shared") if k in t}
    out["model.layers.%d.mlp" % n] = ("mlp", t["mlp"])
    return out


def _flat(a):
    """[1, S, X] -> [S, X]: the 4.x blocks call their router and experts on
    hidden_states.view(-1, hidden_dim)."""
    return a[0]


def _moe_hf4(t, n, fam):
    """Module-output hooks on transformers 4.x (a hook keeps a tuple
    output's first tensor):
      modeling_mixtral.py MixtralSparseMoeBlock.forward: hidden_states.view(
        -1, hidden_dim); router_logits = self.gate(hidden_states) [S, E];
        returns (final_hidden_states [B, S, H], router_logits).
      modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock.forward: the same, and
        shared_expert_output = self.shared_expert(hidden_states) [S, H]
        BEFORE F.sigmoid(self.shared_expert_gate(hidden_states)) [S, 1]
        scales it: neither is the shared expert's contribution.
      modeling_deepseek_v3.py (4.5x) DeepseekV3MoE.forward: topk_indices,
        topk_weights = self.gate(hidden_states), DeepseekV3TopkRouter
        viewing hidden_states as [S, H]: the gate's hook sees (ids,
        weights), not logits, and keeps the ids; shared_experts(residuals)
        [B, S, H]."""
    b = "model.layers.%d.%s" % (n, "block_sparse_moe" if fam == "mixtral" else "mlp")
    out = {b: ("mlp", t["mlp"])}
    if fam == "deepseek":
        out[b + ".gate"] = ("mlp.router", _flat(t["topk_ids"]))
        if "shared" in t:
            out[b + ".shared_experts"] = ("mlp.shared", t["shared"])
    else:
        out[b + ".gate"] = ("mlp.router", _flat(t["router"]))
    if fam == "qwen2" and "shared_pre" in t:
        out[b + ".shared_expert"] = (None, _flat(t["shared_pre"]))
        out[b + ".shared_expert_gate"] = (None, _flat(t["shared_gate"]))
    return out


def _moe_v5(t, n, fam):
    """Module-output hooks on transformers 5 (first tensor of a tuple):
    the routers are modules of their own returning (router_logits after the
    softmax, i.e. probabilities [S, E], top-k weights, top-k ids)
    (MixtralTopKRouter, Qwen2MoeTopKRouter), and self.experts(hidden_states,
    top_k_index, top_k_weights) is one module returning the weighted sum
    [S, H]; DeepseekV3TopkRouter returns the raw logits (F.linear in
    float32) and DeepseekV3MoE.route_tokens_to_experts picks outside any
    module.  Qwen2-MoE's `expert_output += shared_expert_output` runs after
    the experts' hook: a hook that keeps the tensor without a copy stores
    the block; these hooks copy."""
    b = "model.layers.%d.%s" % (n, "block_sparse_moe" if fam == "mixtral" else "mlp")
    out = {b: ("mlp", t["mlp"]), b + ".experts": ("mlp.experts", _flat(t["experts"]))}
    out[b + ".gate"] = ("mlp.router", _flat(t["router"])) if fam == "deepseek" else (
        "mlp.router_probs", _flat(t["router_probs"]))
    if fam == "qwen2" and "shared_pre" in t:
        out[b + ".shared_expert"] = (None, _flat(t["shared_pre"]))
        out[b + ".shared_expert_gate"] = (None, _flat(t["shared_gate"]))
    if fam == "deepseek" and "shared" in t:
        out[b + ".shared_experts"] = ("mlp.shared", t["shared"])
    return out


def _moe_dumphf(t, n, fam):
    """samples/dumpers/dump_hf.py with sub=True on transformers 5
    (_hook_moe): BLOCK.gate the router's first tensor (probabilities),
    BLOCK.selected_experts and BLOCK.routing_weights from the router's
    (.., weights, ids) at the block's [B, S, k], BLOCK.experts the experts
    module's output.  Not for DeepSeek-V3: its router returns the logits
    alone and the block's first torch.topk is over the group scores, so
    dump_hf.py records those (see its _topk_recorder)."""
    b = "model.layers.%d.%s" % (n, "block_sparse_moe" if fam == "mixtral" else "mlp")
    return {b: ("mlp", t["mlp"]), b + ".gate": ("mlp.router_probs", _flat(t["router_probs"])),
            b + ".selected_experts": ("mlp.topk_ids", t["topk_ids"]),
            b + ".routing_weights": ("mlp.topk_weights", t["topk_weights"]),
            b + ".experts": ("mlp.experts", _flat(t["experts"]))}


MOE_LAYOUTS = {"canonical": _moe_canonical, "hf4": _moe_hf4, "v5": _moe_v5, "dumphf": _moe_dumphf}


def moe_names(taps, layout, fam, cells=None):
    """{raw name: array} of an MoE model's taps (canonical [1, S, X]); cells,
    when given, gets {raw name: the canonical name of its cell} (None: a
    tensor no cell stands for)."""
    out = {}
    for k, a in taps.items():
        if k == "tokens":
            out["tokens"] = a
        elif k == "embed":
            out["model.embed_tokens"] = a
        elif k == "final_norm":
            out["model.norm"] = a
        elif k == "logits":
            out["lm_head"] = a
        elif k.startswith("layers."):
            _, n, tap = k.split(".", 2)
            if tap == "block":
                out["model.layers.%s" % n] = a
            elif tap in MOE_HF_DENSE and not (
                    "layers.%s.mlp.router" % n in taps and (tap == "mlp" or tap.startswith("mlp."))):
                out["model.layers.%s.%s" % (n, MOE_HF_DENSE[tap])] = a
    for n in _layers(taps):
        p = "layers.%d.mlp" % n
        if p + ".router" not in taps:
            continue
        t = {k[len(p) + 1:]: a for k, a in taps.items() if k.startswith(p + ".")}
        t["mlp"] = taps[p]
        for raw, (tap, a) in MOE_LAYOUTS[layout](t, n, fam).items():
            out[raw] = a
            if cells is not None:
                cells[raw] = tap and "layers.%d.%s" % (n, tap)
    return out
