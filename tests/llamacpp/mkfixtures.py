#!/usr/bin/python3
"""Make the llama.cpp test fixtures from llama.cpp itself.

Not run by the test suite (llama.cpp is not built here): run by hand when
the fixtures change, with programs built from llama.cpp's own sources.

    tests/llamacpp/mkfixtures.py \\
        --gen 2024:EVAL_CALLBACK:GGUF_PY \\
        --gen 2026:EVAL_CALLBACK:GGUF_PY:LLAMA_DEBUG \\
        --moe 2026:EVAL_CALLBACK:GGUF_PY \\
        OUT_DIR

A generation is a llama.cpp tree: its llama-eval-callback (and, for the
2026 tree, llama-debug) and its gguf-py directory.  The fixtures the tests
read were made from koboldcpp's vendored llama.cpp of 2024-10 (the 2024
graph: ggml_debug, kqv_out after o_proj, inp_embd) and from a July 2026
llama.cpp (common_debug_cb_eval, kqv_out before o_proj and attn_out after
it, embd, a fused SWIGLU, flash attention on by default).

What it writes into OUT_DIR:

  ref.npz, ref-bias.npz   the reference: tests/llamacpp/hfmodel.py (Hugging
                          Face's module names and arithmetic) recorded by
                          samples/dumpers/dump_hf.py --replay on the token ids
                          llama.cpp reads the prompt as; the npy tree dump_hf
                          writes, packed into one .npz (the same arrays).
                          ref-bias: the same weights and a down_proj bias.
  GEN-CASE.log.gz         what the program printed (stdout and stderr, as a
                          user captures it with 2>&1), unedited, gzipped.

Each case converts the same weights to GGUF the way convert_hf_to_gguf.py
does (its LlamaModel.permute on q and k), with gguf-py's GGUFWriter, and
injects at most one conversion bug:

  clean       a correct conversion, f32 weights
  f16, q8     a correct conversion, 2-D weights in f16 / q8_0
  noperm      q and k rows not permuted (llama.cpp's RoPE pairs adjacent
              channels, HF's rotate-half pairs i and i + d/2)
  eps         rms_norm_eps written as 1e-3 (HF: 1e-5)
  theta       rope_freq_base written as 1e6 (HF: 1e4)
  gateup      ffn_gate and ffn_up swapped
  transposed  layer 1's attn_output stored transposed
  nobias      the reference has a down_proj bias, the GGUF drops it
  nooutput    no output.weight: llama.cpp ties the logits to token_embd
  nobos       tokenizer.ggml.add_bos_token written false: llama.cpp reads
              the prompt without the BOS the reference has
  failed      blk.1.ffn_down.weight left out: the model does not load
  warmup      (llama-debug) a clean conversion, printed with the warmup
              decode llama-debug runs first; and GEN-logits/, what
              llama-debug --save-logits writes for it

--moe makes the mixture-of-experts fixtures: a Mixtral-style model
(hfmodel.Config experts=4, experts_used=2: block_sparse_moe with a gate
router and experts.E.w1/w2/w3) on a prompt of 6 tokens, so that every
routing value is printed (llama.cpp elides axes longer than 6), converted
as convert_hf_to_gguf.py converts Mixtral (LlamaModel: the llama arch with
expert_count and expert_used_count, ffn_gate_inp from the router, each of
w1, w3, w2 stacked over the experts into ffn_gate_exps, ffn_up_exps,
ffn_down_exps; conversion/llama.py:145-172 of the 2026 tree).  They were
made with llama-eval-callback and gguf-py of siphon.cpp (a llama.cpp fork
of 2026-07 with the current MoE graph, commit d122864), built for the CPU:

  ref-moe.npz             the reference, as ref.npz
  GEN-moe.log.gz          a correct conversion, f32 weights
  GEN-moe-experts.log.gz  layer 0's experts stacked in the wrong order
                          (rolled by one: the router's expert e computes
                          with the weights of expert e+1)
  GEN-moe-router.log.gz   layer 0's router rows reversed: the scores
                          belong to other experts than their weights

The 2026 programs often lose the end of what they print (their log is
written by a thread of their own, which the exit does not wait for): runs
are repeated until one keeps it, and the first clean run that lost it is
kept too, as GEN-cut.log.gz.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = "hello world"
SEED = 20261206
CASES = {
    "2024": ["clean", "noperm", "eps", "gateup", "nooutput", "nobos", "failed"],
    "2026": ["clean", "f16", "q8", "noperm", "theta", "transposed", "nobias", "gateup", "nobos", "failed"],
}
DEBUG_CASES = ["warmup"]
MOE_PROMPT = "hello"
MOE_SEED = 20261207
MOE_CASES = ["moe", "moe-experts", "moe-router"]
# the least gap between the reference's k-th and (k+1)-th router
# probabilities: llama.cpp's f16 KV cache moves the router's input
# by about 1e-3 (probabilities by less), which must not flip an expert
MOE_MIN_GAP = 0.01


def config(**kw):
    sys.path.insert(0, HERE)
    import hfmodel
    return hfmodel.Config(**kw)


def hf_weights(c, rng):
    """The HF state dict, drawn in a fixed order from rng."""
    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) * 0.2).astype(np.float32)

    def normw(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(c.vocab, c.hidden)}
    for i in range(c.layers):
        p = "model.layers.%d." % i
        w[p + "input_layernorm.weight"] = normw(c.hidden)
        w[p + "self_attn.q_proj.weight"] = mat(c.heads * c.head_dim, c.hidden)
        w[p + "self_attn.k_proj.weight"] = mat(c.kv_heads * c.head_dim, c.hidden)
        w[p + "self_attn.v_proj.weight"] = mat(c.kv_heads * c.head_dim, c.hidden)
        w[p + "self_attn.o_proj.weight"] = mat(c.hidden, c.heads * c.head_dim)
        w[p + "post_attention_layernorm.weight"] = normw(c.hidden)
        if c.experts:
            w[p + "block_sparse_moe.gate.weight"] = mat(c.experts, c.hidden)
            for e in range(c.experts):
                x = p + "block_sparse_moe.experts.%d." % e
                w[x + "w1.weight"] = mat(c.inter, c.hidden)
                w[x + "w2.weight"] = mat(c.hidden, c.inter)
                w[x + "w3.weight"] = mat(c.inter, c.hidden)
            continue
        w[p + "mlp.gate_proj.weight"] = mat(c.inter, c.hidden)
        w[p + "mlp.up_proj.weight"] = mat(c.inter, c.hidden)
        w[p + "mlp.down_proj.weight"] = mat(c.hidden, c.inter)
    w["model.norm.weight"] = normw(c.hidden)
    w["lm_head.weight"] = mat(c.vocab, c.hidden)
    return w


def permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py's LlamaModel.permute (koboldcpp's copy of 2024:
    lines 1568-1574; the 2026 tree: conversion/llama.py:99-105), in numpy."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape))


def gguf_tensors(c, w, case):
    """(GGUF name, array) in llama.cpp's names, with the case's bug."""
    t = [("token_embd.weight", w["model.embed_tokens.weight"])]
    for i in range(c.layers):
        p = "model.layers.%d." % i
        q, k = w[p + "self_attn.q_proj.weight"], w[p + "self_attn.k_proj.weight"]
        if case != "noperm":
            q, k = permute(q, c.heads, c.heads), permute(k, c.heads, c.kv_heads)
        o = w[p + "self_attn.o_proj.weight"]
        if case == "transposed" and i == 1:
            o = np.ascontiguousarray(o.T)
        b = "blk.%d." % i
        t += [(b + "attn_norm.weight", w[p + "input_layernorm.weight"]),
              (b + "attn_q.weight", q), (b + "attn_k.weight", k),
              (b + "attn_v.weight", w[p + "self_attn.v_proj.weight"]),
              (b + "attn_output.weight", o),
              (b + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"])]
        if c.experts:
            t += moe_tensors(c, w, i, case)
            continue
        gate, up = w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"]
        if case == "gateup":
            gate, up = up, gate
        t += [(b + "ffn_gate.weight", gate), (b + "ffn_up.weight", up),
              (b + "ffn_down.weight", w[p + "mlp.down_proj.weight"])]
    t.append(("output_norm.weight", w["model.norm.weight"]))
    if case != "nooutput":
        t.append(("output.weight", w["lm_head.weight"]))
    if case == "failed":
        t = [x for x in t if x[0] != "blk.1.ffn_down.weight"]
    return t


def moe_tensors(c, w, i, case):
    """Layer i's router and experts as convert_hf_to_gguf.py's LlamaModel
    writes Mixtral's: each of w1 (gate), w3 (up), w2 (down) stacked over
    the experts in their order, [E, rows, cols]."""
    p, b = "model.layers.%d.block_sparse_moe." % i, "blk.%d." % i
    order = list(range(c.experts))
    if case == "moe-experts" and i == 0:
        order = order[1:] + order[:1]
    router = w[p + "gate.weight"]
    if case == "moe-router" and i == 0:
        router = router[::-1]
    stack = lambda wid: np.stack([w[p + "experts.%d.%s.weight" % (e, wid)] for e in order])
    return [(b + "ffn_gate_inp.weight", np.ascontiguousarray(router)),
            (b + "ffn_gate_exps.weight", stack("w1")), (b + "ffn_down_exps.weight", stack("w2")),
            (b + "ffn_up_exps.weight", stack("w3"))]


def metadata(c, case):
    return {"expert_count": c.experts, "expert_used_count": c.experts_used,
            "context_length": 128, "embedding_length": c.hidden, "block_count": c.layers,
            "feed_forward_length": c.inter, "head_count": c.heads, "head_count_kv": c.kv_heads,
            "rope_dimension_count": c.head_dim,
            "rms_eps": 1e-3 if case == "eps" else c.eps,
            "rope_freq_base": 1e6 if case == "theta" else c.theta,
            "add_bos": case != "nobos",
            "weights": {"f16": "f16", "q8": "q8_0"}.get(case, "f32")}


def write_gguf(gguf_py, tensors, meta, out):
    """Write the GGUF in a child python that imports the generation's own gguf-py."""
    with tempfile.TemporaryDirectory() as tmp:
        npz = os.path.join(tmp, "t.npz")
        np.savez(npz, **{"%03d:%s" % (i, n): a for i, (n, a) in enumerate(tensors)})
        subprocess.run([sys.executable, os.path.abspath(__file__), "--write-gguf", gguf_py, npz,
                        json.dumps(meta), out], check=True)


def child_write_gguf(gguf_py, npz, meta, out):
    sys.path.insert(0, gguf_py)
    import gguf
    meta = json.loads(meta)
    arrays = np.load(npz)
    w = gguf.GGUFWriter(out, "llama")
    w.add_name("tbisect-llamacpp-fixture")
    w.add_context_length(meta["context_length"])
    w.add_embedding_length(meta["embedding_length"])
    w.add_block_count(meta["block_count"])
    w.add_feed_forward_length(meta["feed_forward_length"])
    w.add_head_count(meta["head_count"])
    w.add_head_count_kv(meta["head_count_kv"])
    w.add_rope_dimension_count(meta["rope_dimension_count"])
    w.add_layer_norm_rms_eps(meta["rms_eps"])
    w.add_rope_freq_base(meta["rope_freq_base"])
    if meta["expert_count"]:
        w.add_expert_count(meta["expert_count"])
        w.add_expert_used_count(meta["expert_used_count"])
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[meta["weights"]]
    w.add_file_type(ftype)
    # an SPM vocabulary of <unk>, <s>, </s> and the 256 byte tokens: any
    # text is byte b -> id b + 3 (the space as U+2581)
    tokens = [b"<unk>", b"<s>", b"</s>"] + [("<0x%02X>" % b).encode() for b in range(256)]
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types([gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
                      + [gguf.TokenType.BYTE] * 256)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(meta["add_bos"])
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)
    for key in sorted(arrays.files):
        name = key.split(":", 1)[1]
        a = np.ascontiguousarray(arrays[key], dtype=np.float32)
        # as the converter: 1-D tensors stay f32
        if a.ndim == 2 and meta["weights"] == "f16":
            w.add_tensor(name, a.astype(np.float16))
        elif a.ndim == 2 and meta["weights"] == "q8_0":
            q = gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def token_ids(text):
    """How the byte vocabulary reads text: BOS, then each UTF-8 byte b as
    b + 3, a space as U+2581 (add_space_prefix off)."""
    return [1] + [b + 3 for b in text.replace(" ", "\u2581").encode("utf-8")]


def routing_gaps(ref):
    """The least gap, over layers and positions, between the k-th and the
    (k+1)-th largest router probabilities of the reference (an .npz)."""
    d = np.load(ref)
    least = 1.0
    for key in d.files:
        if key.endswith(".block_sparse_moe.gate"):
            x = d[key].astype(np.float64)
            p = np.exp(x - x.max(-1, keepdims=True))
            p = np.sort(p / p.sum(-1, keepdims=True), -1)[..., ::-1]
            k = d[key[:-len("gate")] + "selected_experts"].shape[-1]
            least = min(least, float((p[..., k - 1] - p[..., k]).min()))
    return least


def reference(c, w, ids, out):
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "..", "samples", "dumpers"))
    import torch
    import dump_hf
    import hfmodel
    model = hfmodel.build(c, w)
    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "ref")
        dump_hf.dump(model, torch.tensor([ids]), tree, sub=True, replay=True, save_tokens=True)
        arrays = {}
        for f in sorted(os.listdir(tree)):
            if f.endswith(".npy"):
                arrays[f[:-4]] = np.load(os.path.join(tree, f))
        np.savez_compressed(out, **arrays)


def save(out, data):
    with gzip.GzipFile(out, "wb", mtime=0) as f:
        f.write(data)


def whole(capture):
    """Did the capture keep its end?  llama.cpp of 2026 logs from a thread
    of its own, and a run often exits before it has written everything
    (here 6 runs in 10 lost their last layers): the last node printed must
    be result_output, with its sum."""
    at = capture.rfind(b" result_output = ")
    rest = capture[at:].splitlines()[1:] if at >= 0 else []
    return any(line.strip().startswith(b"sum = ") for line in rest) and \
        not any(b" = (" in line for line in rest)


def run(cmd, cwd, fails=False, want_cut=False):
    """What cmd prints, stdout and stderr together: a run that keeps its
    end and, with want_cut, one that lost it (None where a program never
    loses it: the 2024 tree logs from the calling thread); fails: a run
    that must fail, as it is."""
    good = cut = None
    for _ in range(50):
        r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if fails:
            if r.returncode == 0:
                sys.exit("%s did not fail" % " ".join(cmd))
            return r.stdout, None
        if r.returncode != 0:
            sys.exit("%s exited %d:\n%s" % (cmd[0], r.returncode, r.stdout[-2000:].decode("utf-8", "replace")))
        if whole(r.stdout):
            good = good or r.stdout
        else:
            cut = cut or r.stdout
        if good and (cut or not want_cut or b"common_debug_cb_eval" not in good):
            return good, cut
    if good:
        return good, cut
    sys.exit("%s: 50 runs lost the end of their output" % " ".join(cmd))


def save_logits(debug, model, cmdline, tmp, out):
    """llama-debug --save-logits: the files it writes (the last token's
    logits as float32, as text, the token ids as int32, the prompt), as
    they are."""
    data = os.path.join(tmp, "data")
    subprocess.run([os.path.abspath(debug), "-m", os.path.basename(model), "--save-logits",
                    "--logits-output-dir", data] + cmdline, cwd=tmp, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.makedirs(out, exist_ok=True)
    for f in sorted(os.listdir(data)):
        with open(os.path.join(data, f), "rb") as src, open(os.path.join(out, f), "wb") as dst:
            dst.write(src.read())


def printed_tokens(capture):
    """The ids the 2026 eval-callback lists after "number of input tokens"."""
    lines = capture.decode("utf-8", "replace").splitlines()
    for i, line in enumerate(lines):
        if "number of input tokens = " in line:
            n = int(line.rsplit("=", 1)[1])
            return [int(x.split()[-1]) for x in lines[i + 1:i + 1 + n]]
    return None


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--write-gguf":
        return child_write_gguf(*sys.argv[2:6])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gen", action="append", default=[],
                    help="YEAR:EVAL_CALLBACK:GGUF_PY[:LLAMA_DEBUG]")
    ap.add_argument("--moe", action="append", default=[], help="YEAR:EVAL_CALLBACK:GGUF_PY")
    ap.add_argument("out")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.moe:
        moe(args.moe, args.out)
    if not args.gen:
        return
    ids = token_ids(PROMPT)
    base = config()
    w = hf_weights(base, np.random.default_rng(SEED))
    biased = config(mlp_bias=True)
    wb = dict(w)
    for i in range(biased.layers):
        wb["model.layers.%d.mlp.down_proj.bias" % i] = \
            (0.5 * np.random.default_rng(SEED + 1 + i).standard_normal(biased.hidden)).astype(np.float32)
    reference(base, w, ids, os.path.join(args.out, "ref.npz"))
    reference(biased, wb, ids, os.path.join(args.out, "ref-bias.npz"))
    cmdline = ["-p", PROMPT, "-t", "2", "-c", "64", "--seed", "1"]
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.gen:
            parts = spec.split(":")
            year, evalcb, gguf_py = parts[:3]
            debug = parts[3] if len(parts) > 3 else None
            cases = CASES[year] + (DEBUG_CASES if debug else [])
            for case in cases:
                model = os.path.join(tmp, "%s-%s.gguf" % (year, case))
                conv = "clean" if case == "warmup" else case
                write_gguf(gguf_py, gguf_tensors(base, w, conv), metadata(base, conv), model)
                prog = debug if case == "warmup" else evalcb
                # the model by a relative path, so that the logs do not name the temporary folder
                out, cut = run([os.path.abspath(prog), "-m", os.path.basename(model)] + cmdline, tmp,
                               fails=case == "failed", want_cut=case == "clean")
                save(os.path.join(args.out, "%s-%s.log.gz" % (year, case)), out)
                # a run of the clean conversion that lost its end, as it is
                if cut and case == "clean":
                    save(os.path.join(args.out, "%s-cut.log.gz" % year), cut)
                got = printed_tokens(out)
                if got is not None and got != (ids[1:] if case == "nobos" else ids):
                    sys.exit("%s-%s: llama.cpp read the prompt as %s, the reference as %s" % (year, case, got, ids))
                print("%s-%s: %d bytes" % (year, case, len(out)))
                if case == "warmup":
                    save_logits(debug, model, cmdline, tmp, os.path.join(args.out, "%s-logits" % year))


def moe(gens, out):
    """The mixture-of-experts fixtures (--moe)."""
    c = config(inter=32, experts=4, experts_used=2)
    w = hf_weights(c, np.random.default_rng(MOE_SEED))
    ids = token_ids(MOE_PROMPT)
    ref = os.path.join(out, "ref-moe.npz")
    reference(c, w, ids, ref)
    gap = routing_gaps(ref)
    if gap < MOE_MIN_GAP:
        sys.exit("the reference's routing nearly ties (gap %.4f < %g): choose another MOE_SEED" % (gap, MOE_MIN_GAP))
    cmdline = ["-p", MOE_PROMPT, "-t", "2", "-c", "64", "--seed", "1"]
    with tempfile.TemporaryDirectory() as tmp:
        for spec in gens:
            year, evalcb, gguf_py = spec.split(":")[:3]
            for case in MOE_CASES:
                model = os.path.join(tmp, "%s-%s.gguf" % (year, case))
                write_gguf(gguf_py, gguf_tensors(c, w, case), metadata(c, case), model)
                log, _ = run([os.path.abspath(evalcb), "-m", os.path.basename(model)] + cmdline, tmp)
                save(os.path.join(out, "%s-%s.log.gz" % (year, case)), log)
                got = printed_tokens(log)
                if got is not None and got != ids:
                    sys.exit("%s-%s: llama.cpp read the prompt as %s, the reference as %s" % (year, case, got, ids))
                print("%s-%s: %d bytes (routing gap %.3f)" % (year, case, len(log), gap))


if __name__ == "__main__":
    main()
