#!/bin/sh
# The naming conventions of the tools people dump with, built in: the same
# port (RoPE style bug, first seen at L0.attn) dumped as MaxText names it,
# as llama.cpp's graph names it, and a reference dumped as Hugging Face's
# output_hidden_states; each pairs whole with the Hugging Face module dump,
# with no map, and the first divergence is found exactly.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP
need_python numpy

"$MKDEMO" --bug rope-style "$T/ref" "$T/cand" >/dev/null || bail_out "mkdemo failed"

# relayout SRC DST STYLE: the HF-named npy tree SRC written again as STYLE
# names and shapes it (numpy only; the values are SRC's).
relayout() {
	"$PY" - "$1" "$2" "$3" <<'PY'
import os, re, sys
import numpy as np
src, dst, style = sys.argv[1:4]
L = 4
def load(name):
    return np.load(os.path.join(src, name + ".npy"))
def save(rel, a):
    path = os.path.join(dst, rel + ".npy")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, a)
hf = {"input_layernorm": 0, "self_attn": 1, "post_attention_layernorm": 2, "mlp": 3}
if style == "maxtext":
    # Flax module paths as directories, activations [batch, seq, hidden].
    sub = ["pre_self_attention_layer_norm", "self_attention", "post_self_attention_layer_norm", "mlp"]
    save("token_embedder", load("model.embed_tokens"))
    for l in range(L):
        for k, i in hf.items():
            save("decoder/layers_%d/%s" % (l, sub[i]), load("model.layers.%d.%s" % (l, k)))
        save("decoder/layers_%d" % l, load("model.layers.%d" % l))
    save("decoder/decoder_norm", load("model.norm"))
    save("logits", load("lm_head"))
elif style == "llamacpp":
    # ggml graph tensor names, [tokens, n_embd] (ggml's ne[0] is the last axis).
    sub = ["attn_norm", "attn_out", "ffn_norm", "ffn_out"]
    save("inp_embd", load("model.embed_tokens")[0])
    for l in range(L):
        for k, i in hf.items():
            save("%s-%d" % (sub[i], l), load("model.layers.%d.%s" % (l, k))[0])
        save("l_out-%d" % l, load("model.layers.%d" % l)[0])
    save("result_norm", load("model.norm")[0])
    save("result_output", load("lm_head")[0])
elif style == "maxtext-scan":
    # nn.scan over the layers: one tensor per tap, the layer axis first.
    sub = ["pre_self_attention_layer_norm", "self_attention", "post_self_attention_layer_norm", "mlp"]
    save("token_embedder", load("model.embed_tokens"))
    for k, i in hf.items():
        save("decoder/layers/" + sub[i], np.stack([load("model.layers.%d.%s" % (l, k)) for l in range(L)]))
    save("decoder/layers", np.stack([load("model.layers.%d" % l) for l in range(L)]))
    save("decoder/decoder_norm", load("model.norm"))
    save("logits", load("lm_head"))
elif style == "vllm":
    # vLLM/SGLang module paths: q/k/v and gate/up fused into one projection.
    for f in os.listdir(src):
        name = f[:-4]
        if re.search(r"\.(q|k|v)_proj$|\.(gate|up)_proj$", name):
            continue
        save(name, np.load(os.path.join(src, f)))
    for l in range(L):
        p = "model.layers.%d." % l
        q, k, v = (load(p + "self_attn.%s_proj" % x) for x in "qkv")
        save(p + "self_attn.qkv_proj", np.concatenate([q, k, v], axis=-1))
        g, u = load(p + "mlp.gate_proj"), load(p + "mlp.up_proj")
        save(p + "mlp.gate_up_proj", np.concatenate([g, u], axis=-1))
elif style == "hidden":
    # output_hidden_states: the embedding output, each layer's output but
    # the last, then the final norm's output (HF appends it after the norm).
    hs = [load("model.embed_tokens")] + [load("model.layers.%d" % l) for l in range(L - 1)] + [load("model.norm")]
    os.makedirs(dst, exist_ok=True)
    np.savez(os.path.join(dst, "out.npz"), logits=load("lm_head"),
             **{"hidden_states.%d" % i: a for i, a in enumerate(hs)})
PY
}

relayout "$T/cand" "$T/maxtext" maxtext || bail_out "relayout maxtext failed"
relayout "$T/cand" "$T/llamacpp" llamacpp || bail_out "relayout llamacpp failed"
relayout "$T/ref" "$T/hidden" hidden || bail_out "relayout hidden failed"
relayout "$T/ref" "$T/maxref" maxtext || bail_out "relayout maxtext reference failed"
relayout "$T/cand" "$T/maxscan" maxtext-scan || bail_out "relayout maxtext-scan failed"
"$MKDEMO" --sub --bug rope-style "$T/subref" "$T/subcand" >/dev/null || bail_out "mkdemo --sub failed"
relayout "$T/subcand" "$T/vllm" vllm || bail_out "relayout vllm failed"

# pairs_whole NAME REF CAND PAIRED [OPTION...]: check pairs PAIRED cells,
# none unpaired, and finds the first divergence at L0.attn.
pairs_whole() {
	_pw_name=$1 _pw_ref=$2 _pw_cand=$3 _pw_n=$4
	shift 4
	expect_exit 1 "$_pw_name: diverged (the port's bug)" "$TBISECT" check --json --no-history "$@" "$_pw_ref" "$_pw_cand"
	json_is "$_pw_name: $_pw_n tensors paired" coverage.paired "$_pw_n"
	json_is "$_pw_name: nothing unpaired in the reference" 'unpaired.ref.#' 0
	json_is "$_pw_name: nothing unpaired in the candidate" 'unpaired.cand.#' 0
	json_is "$_pw_name: the first divergence is L0.attn" first_divergence.cell L0.attn
	json_is "$_pw_name: at position 1" first_divergence.first_bad_position 1
	json_is "$_pw_name: the cause is rope-style" causes.0.id rope-style
}
pairs_whole "MaxText names" "$T/ref" "$T/maxtext" 23
pairs_whole "llama.cpp graph names, [S, H] tensors" "$T/ref" "$T/llamacpp" 23
pairs_whole "a MaxText reference against a llama.cpp port" "$T/maxref" "$T/llamacpp" 23

pairs_whole "MaxText with scanned layers (one [L, ...] tensor per tap)" "$T/ref" "$T/maxscan" 23
expect_exit 1 "scanned layers: the layer views are named by index" "$TBISECT" check --json --no-history "$T/ref" "$T/maxscan"
json_is "scanned layers: L2.attn is layer 2 of decoder.layers.self_attention" cells.12.cand_name 'decoder.layers.self_attention[2]'
check_that "scanned layers: nothing was copied into the tree" test "$(find "$T/maxscan" -type f | wc -l)" -eq 8

# vLLM/SGLang fuse q/k/v and gate/up; split by the reference's projections.
expect_exit 1 "fused qkv_proj/gate_up_proj against separate projections" \
	"$TBISECT" check --json --no-history "$T/subref" "$T/vllm"
json_is "fused: nothing unpaired in the candidate" 'unpaired.cand.#' 0
json_is "fused: nothing unpaired in the reference" 'unpaired.ref.#' 0
json_is "fused: the first divergence is L0.attn.q (after RoPE in this dump)" first_divergence.cell L0.attn.q
json_is "fused: L0.attn.q is the q part of qkv_proj" first_divergence.cand_name 'model.layers.0.self_attn.qkv_proj[q]'
expect_exit 0 "fused, the reference against its own fused dump: every part matches" \
	"$TBISECT" check --json --no-history "$T/subcand" "$T/vllm"
json_is "fused, same numbers: verdict match" verdict match
json_is "fused, same numbers: 51 cells paired (23 and 7 sub-taps a layer)" coverage.paired 51
# Without the reference's v_proj the widths come from the head counts.
mkdir "$T/refnov"
cp "$T"/subref/*.npy "$T/refnov/"
rm "$T"/refnov/model.layers.*.self_attn.v_proj.npy
expect_exit 1 "qkv_proj against q/k only, no head counts: still compared" \
	"$TBISECT" check --json --no-history --allow-partial "$T/refnov" "$T/vllm"
check_that "no head counts: qkv_proj is unpaired, and says how to split it" \
	sh -c "'$TBISECT' check --no-history --allow-partial '$T/refnov' '$T/vllm' | grep -q 'qkv_proj  (a fused projection the other tree has as separate ones: give --heads and --kv-heads'"
expect_exit 1 "qkv_proj against q/k only, --heads 8 --kv-heads 2: split" \
	"$TBISECT" check --json --no-history --heads 8 --kv-heads 2 "$T/refnov" "$T/vllm"
json_is "--heads: L0.attn.k is the k part" cells.3.cand_name 'model.layers.0.self_attn.qkv_proj[k]'

# With the built-in names switched off, suggest-map finds the same
# pairing from the trees' structure alone.
for d in maxtext llamacpp; do
	TAP_RC=0
	"$TBISECT" suggest-map --no-builtin-names "$T/ref" "$T/$d" >"$T/$d.map" 2>"$TAP_ERR" || TAP_RC=$?
	check_that "suggest-map --no-builtin-names on the $d dump: exit 0 ($TAP_RC)" test "$TAP_RC" -eq 0
	check_that "suggest-map on the $d dump: rules with confidence and evidence" \
		sh -c "'$JSONQ' '$T/$d.map' rules.0.evidence >/dev/null && '$JSONQ' '$T/$d.map' rules.0.confidence >/dev/null"
	pairs_whole "$d names through suggest-map's map, no built-in names" "$T/ref" "$T/$d" 23 \
		--no-builtin-names --map "$T/$d.map"
done

expect_exit 0 "ls: MaxText's self_attention is an attention output" "$TBISECT" ls "$T/maxtext"
check_that "ls: decoder.layers_2.self_attention is L2.attn" grep -q '^decoder\.layers_2\.self_attention  *L2\.attn ' "$TAP_OUT"
check_that "ls: no MaxText tensor unmapped" grep -q '^23 tensors, 0 unmapped$' "$TAP_OUT"
expect_exit 0 "ls: llama.cpp's ffn_inp" "$TBISECT" ls "$T/llamacpp"
check_that "ls: l_out-3 is L3.block" grep -q '^l_out-3  *L3\.block ' "$TAP_OUT"

# output_hidden_states of the reference against its module dump: the
# same numbers, so everything matches only when entry i is layer i-1's
# output and the last entry the final norm's.
expect_exit 0 "hidden_states against the module dump: match" "$TBISECT" check --json --no-history "$T/ref" "$T/hidden/out.npz"
json_is "hidden_states: 6 tensors paired" coverage.paired 6
json_is "hidden_states: verdict match" verdict match
expect_exit 0 "ls of the hidden_states" "$TBISECT" ls "$T/hidden/out.npz"
check_that "ls: hidden_states.0 is embed" grep -q '^hidden_states\.0  *embed ' "$TAP_OUT"
check_that "ls: hidden_states.1 is L0.block" grep -q '^hidden_states\.1  *L0\.block ' "$TAP_OUT"
# Saved off by one (layer l's output as hidden_states[l], forgetting that
# entry 0 is the embedding output): the dump-offset check names the rule.
"$MKDEMO" --layers 8 --ref-only "$T/ref8" >/dev/null || bail_out "mkdemo --layers 8 failed"
"$PY" - "$T/ref8" "$T/hiddenoff.npz" <<'PY' || bail_out "writing the off-by-one hidden_states failed"
import os, sys
import numpy as np
src, out = sys.argv[1:3]
load = lambda n: np.load(os.path.join(src, n + ".npy"))
np.savez(out, logits=load("lm_head"), **{"hidden_states.%d" % l: load("model.layers.%d" % l) for l in range(8)})
PY
expect_exit 1 "hidden_states off by one: diverged" "$TBISECT" check --json --no-history "$T/ref8" "$T/hiddenoff.npz"
json_is "hidden_states off by one: the dump-offset warning" warnings.0.id dump-offset
check_that "hidden_states off by one: the warning gives the rule" \
	sh -c "'$JSONQ' '$TAP_OUT' warnings.0.text | grep -q 'hidden_states\[0\] is the embedding output, so hidden_states\[i\] is layer i-1'\''s output'"
tap_done
