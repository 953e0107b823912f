#!/bin/sh
# llama.cpp's own dumps: the text llama-eval-callback prints (captured with
# its logs, 2>&1), printed here from the demo decoder's tensors exactly as
# common/debug.cpp prints them (and once as the older eval-callback did),
# under the names and shapes llama's graph gives them; and the raw float32
# logits files of its model-conversion scripts.  Text against text pairs
# whole and finds the first divergence exactly; text against the full npy
# reference gathers the reference's elements at the printed ones, finds
# the same first divergence, and says "partial"; raw logits compare as
# logits with --vocab; cut or garbled dumps and bad sizes exit 2 naming
# the file.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
need_python numpy
T=$TAP_TMP
FMTGEN=$top_builddir/tests/fmtgen

# evalcb SRC OUT STYLE [cvec]: the HF-named npy tree SRC (mkdemo --sub, two
# layers) as llama-eval-callback prints its graph (STYLE v3: common/debug.cpp;
# v1: the older ggml_debug), with the loader's log around it.  cvec: layer 0
# writes ffn_out twice, as llama's graph does with a control vector.
evalcb() {
	"$PY" - "$@" <<'PY'
import os, sys
import numpy as np
src, out, style = sys.argv[1:4]
cvec = len(sys.argv) > 4
L, HD, NH, NKV = 2, 8, 8, 2
IND = "    "
def load(name):
    return np.load(os.path.join(src, name + ".npy"))[0].astype(np.float32)
def ne_str(ne):
    return ", ".join(str(x) for x in ne)
def header(name, typ, op, srcs, ne):
    s = [("%s{%s}" % (n, ne_str(e))) if n else "" for n, e in srcs + [("", None)] * (2 - len(srcs))]
    fn = "common_debug_cb_eval" if style == "v3" else "ggml_debug"
    return "%s: %24s = (%s) %10s(%s, %s}) = {%s}\n" % (fn, name, typ, op, s[0], s[1], ne_str(ne))
def body(a, ne, n=3):
    a = np.asarray(a, dtype=np.float32).reshape(ne[3], ne[2], ne[1], ne[0])
    # the indents of the i3, i2 and row levels, the elision inside a row, a row's end
    ind, i2, i1, e0, er = {"v3": (IND, 2 * IND, 3 * IND, "   ..., ", "  ],\n"),
                           "v1": (" " * 37, " " * 38, " " * 39, "..., ", "],\n")}[style]
    o3, o2, e2, e1, row, c2, c3 = (ind + "[\n", i2 + "[\n", i2 + "..., \n", i1 + "..., \n", i1 + "[", i2 + "],\n",
                                   ind + "]\n")
    s = np.float32(0)
    for v in a.reshape(-1):
        s = np.float32(s + v)
    def walk(m):
        # an axis's entries as the printer visits them, None for its "..."
        i = 0
        while i < m:
            if i == n and m > 2 * n:
                yield None
                i = m - n
            yield i
            i += 1
    out = []
    for i3 in range(ne[3]):
        out.append(o3)
        for i2 in walk(ne[2]):
            out.append(e2 if i2 is None else o2)
            for i1 in ([] if i2 is None else walk(ne[1])):
                if i1 is None:
                    out.append(e1)
                    continue
                r = row
                for i0 in walk(ne[0]):
                    if i0 is None:
                        r += e0
                        continue
                    r += "%12.4f" % float(a[i3, i2, i1, i0])
                    if i0 < ne[0] - 1:
                        r += ", "
                out.append(r + er)
            if i2 is not None:
                out.append(c2)
        out.append(c3)
        out.append(ind + "sum = %f\n" % float(s))
    return "".join(out)
def node(name, a, op="MUL_MAT", srcs=(), typ="f32", ne=None):
    a = np.asarray(a, dtype=np.float32)
    if ne is None:
        ne = tuple(reversed(a.shape)) + (1,) * (4 - a.ndim)
    return header(name, typ, op, list(srcs), ne) + body(a, ne)
S = load("model.embed_tokens").shape[0]
w = []
w.append("build: 4567 (abcdef12) with cc (Debian 14.2.0-19) 14.2.0 for x86_64-linux-gnu\n"
         "llama_model_loader: loaded meta data with 24 key-value pairs and 20 tensors from demo.gguf (version GGUF V3 (latest))\n"
         "llama_model_loader: - kv   0:                       general.architecture str              = llama\n"
         "llama_model_loader: - type  f32:   20 tensors\n"
         "print_info: n_embd           = 64\nprint_info: n_head           = 8\n"
         "load_tensors:   CPU_Mapped model buffer size =     0.40 MiB\n"
         "llama_context: n_ctx         = 4096\n"
         "system_info: n_threads = 2 (n_threads_batch = 2) / 2 | CPU : SSE3 = 1 | AVX = 1 |\n"
         "number of input tokens = %d\n" % S)
w.extend("%6d -> 'tok%d'\n" % (t, t) for t in range(S))
emb = load("model.embed_tokens")
w.append(node("inp_embd", emb, "GET_ROWS", [("token_embd.weight", (64, 256, 1, 1)), ("inp_tokens", (S, 1, 1, 1))]))
resid = emb
for l in range(L):
    last = l == L - 1
    an = load("model.layers.%d.input_layernorm" % l)
    w.append(node("norm-%d" % l, an * 0.5, "RMS_NORM", [("inp_embd" if l == 0 else "l_out-%d" % (l - 1), (64, S, 1, 1))]))
    w.append(node("attn_norm-%d" % l, an, "MUL", [("norm-%d" % l, (64, S, 1, 1)), ("blk.%d.attn_norm.weight" % l, (64, 1, 1, 1))]))
    # Q and K before RoPE (here: values both sides share), their reshape
    # (a view), then RoPE's output under the same name: the last write.
    q, k, v = (load("model.layers.%d.self_attn.%s_proj" % (l, x)) for x in "qkv")
    w.append(node("Qcur-%d" % l, an, "MUL_MAT", [("blk.%d.attn_q.weight" % l, (64, 64, 1, 1)), ("attn_norm-%d" % l, (64, S, 1, 1))]))
    w.append(node("Qcur-%d (reshaped)" % l, an, "RESHAPE", [("Qcur-%d" % l, (64, S, 1, 1))], ne=(HD, NH, S, 1)))
    w.append(node("Kcur-%d" % l, an[:, :16], "MUL_MAT", [("blk.%d.attn_k.weight" % l, (64, 16, 1, 1)), ("attn_norm-%d" % l, (64, S, 1, 1))]))
    w.append(node("Kcur-%d (reshaped)" % l, an[:, :16], "RESHAPE", [("Kcur-%d" % l, (16, S, 1, 1))], ne=(HD, NKV, S, 1)))
    w.append(node("Vcur-%d" % l, v, "MUL_MAT", [("blk.%d.attn_v.weight" % l, (64, 16, 1, 1)), ("attn_norm-%d" % l, (64, S, 1, 1))]))
    w.append(node("Vcur-%d" % l, v, "RESHAPE", [("Vcur-%d" % l, (16, S, 1, 1))], ne=(HD, NKV, S, 1)))
    w.append(node("Qcur-%d" % l, q, "ROPE", [("Qcur-%d (reshaped)" % l, (HD, NH, S, 1)), ("inp_pos", (S, 1, 1, 1))], ne=(HD, NH, S, 1)))
    w.append(node("Kcur-%d" % l, k, "ROPE", [("Kcur-%d (reshaped)" % l, (HD, NKV, S, 1)), ("inp_pos", (S, 1, 1, 1))], ne=(HD, NKV, S, 1)))
    w.append(header("cache_k_l%d (view)" % l, "f16", "VIEW", [("cache_k_l%d" % l, (16, 4096, 1, 1))], (16, S, 1, 1)) +
             body(k.reshape(S, 16), (16, S, 1, 1)))
    w.append(header("k_q8-%d" % l, "q8_0", "CPY", [("Kcur-%d" % l, (HD, NKV, S, 1))], (16, S, 1, 1)))
    att = load("model.layers.%d.self_attn" % l)
    w.append(node("attn_out-%d" % l, att, "MUL_MAT", [("blk.%d.attn_output.weight" % l, (64, 64, 1, 1)), ("kqv_out-%d" % l, (64, S, 1, 1))]))
    rows = slice(S - 1, S) if last else slice(0, S)
    if last:
        # inp_out_ids keeps the last token only from here on
        w.append(node("node_%d" % (40 * l), att[rows], "GET_ROWS", [("attn_out-%d" % l, (64, S, 1, 1)), ("inp_out_ids", (1, 1, 1, 1))]))
        w.append(node("node_%d" % (40 * l + 1), resid[rows], "GET_ROWS", [("l_out-%d" % (l - 1), (64, S, 1, 1)), ("inp_out_ids", (1, 1, 1, 1))]))
    fin = (att + resid)[rows]
    w.append(node("ffn_inp-%d" % l, fin, "ADD", [("attn_out-%d" % l, (64, S, 1, 1)), ("l_out", (64, S, 1, 1))]))
    mn = load("model.layers.%d.post_attention_layernorm" % l)[rows]
    w.append(node("norm-%d" % l, mn * 0.5, "RMS_NORM", [("ffn_inp-%d" % l, (64, S, 1, 1))]))
    w.append(node("ffn_norm-%d" % l, mn, "MUL", [("norm-%d" % l, (64, S, 1, 1)), ("blk.%d.ffn_norm.weight" % l, (64, 1, 1, 1))]))
    w.append(node("ffn_gate-%d" % l, load("model.layers.%d.mlp.gate_proj" % l)[rows], "MUL_MAT", [("blk.%d.ffn_gate.weight" % l, (64, 128, 1, 1))]))
    w.append(node("ffn_up-%d" % l, load("model.layers.%d.mlp.up_proj" % l)[rows], "MUL_MAT", [("blk.%d.ffn_up.weight" % l, (64, 128, 1, 1))]))
    mlp = load("model.layers.%d.mlp" % l)[rows]
    blk = load("model.layers.%d" % l)[rows]
    w.append(node("ffn_out-%d" % l, mlp, "MUL_MAT", [("blk.%d.ffn_down.weight" % l, (128, 64, 1, 1)), ("ffn_swiglu-%d" % l, (128, S, 1, 1))]))
    if cvec and l == 0:
        w.append(node("ffn_out-%d" % l, blk, "ADD", [("ffn_out-%d" % l, (64, S, 1, 1)), ("ffn_inp-%d" % l, (64, S, 1, 1))]))
    w.append(node("l_out-%d" % l, blk, "ADD", [("ffn_out-%d" % l, (64, S, 1, 1)), ("ffn_inp-%d" % l, (64, S, 1, 1))]))
    resid = load("model.layers.%d" % l)
fn = load("model.norm")[S - 1:]
w.append(node("norm", fn * 0.5, "RMS_NORM", [("l_out-%d" % (L - 1), (64, 1, 1, 1))]))
w.append(node("result_norm", fn, "MUL", [("norm", (64, 1, 1, 1)), ("output_norm.weight", (64, 1, 1, 1))]))
w.append(node("result_output", load("lm_head")[S - 1:], "MUL_MAT", [("output.weight", (64, 256, 1, 1)), ("result_norm", (64, 1, 1, 1))]))
w.append("\nllama_perf_context_print:        load time =      12.34 ms\n"
         "llama_perf_context_print: prompt eval time =       1.23 ms /    16 tokens\n")
with open(out, "w") as f:
    f.write("".join(w))
PY
}

# cells Q A B: from the JSON report in $TAP_OUT, with Q "key": key B of the
# cell named A (L0.mlp, embed), strings raw and the rest as JSON; with Q
# "count": how many cells have status A.
cells() {
	"$PY" - "$TAP_OUT" "$@" <<'PY' 2>&1 || :
import json, sys
doc = json.load(open(sys.argv[1]))
q, a = sys.argv[2:4]
show = lambda v: v if isinstance(v, str) else json.dumps(v)
name = lambda c: c["tap"] if c["layer"] is None else "L%d.%s" % (c["layer"], c["tap"])
if q == "count":
    print(sum(1 for c in doc["cells"] if c["status"] == a))
else:
    print(show(next((c for c in doc["cells"] if name(c) == a), {}).get(sys.argv[4])))
PY
}

# cell_is DESC CELL KEY WANT: the cell named CELL has WANT at KEY.
cell_is() {
	_got=$(cells key "$2" "$3")
	if [ "$_got" = "$4" ]; then ok "$1"; else not_ok "$1" "$2 $3 is '$_got', expected '$4'"; fi
}

# count_is DESC STATUS N: N cells have STATUS.
count_is() {
	_got=$(cells count "$2")
	if [ "$_got" = "$3" ]; then ok "$1"; else not_ok "$1" "$_got cells $2, expected $3"; fi
}

# rawlogits SRC OUT: the last token's logits of SRC, as the model-conversion scripts write them.
rawlogits() {
	"$PY" -c 'import sys, numpy as np; np.load(sys.argv[1] + "/lm_head.npy")[0, -1].astype("<f4").tofile(sys.argv[2])' "$@"
}

"$MKDEMO" --sub --layers 2 "$T/ref" "$T/same" >/dev/null || bail_out "mkdemo failed"
for bug in mlp-activation rope-style; do
	"$MKDEMO" --sub --layers 2 --cand-only --bug "$bug" "$T/$bug" >/dev/null || bail_out "mkdemo failed"
done
# The npy reference as a hook dump without the projections (llama's Qcur and
# Kcur are after RoPE, which q_proj and k_proj are not).
mkdir "$T/refnpy"
cp "$T/ref"/*.npy "$T/refnpy/"
rm "$T/refnpy"/*_proj.npy
evalcb "$T/ref" "$T/ref.txt" v3 || bail_out "evalcb failed"
evalcb "$T/same" "$T/same-v1.txt" v1
evalcb "$T/same" "$T/same-cvec.txt" v3 cvec
evalcb "$T/mlp-activation" "$T/mlp.txt" v3
evalcb "$T/rope-style" "$T/rope.txt" v3
want_mlp=$("$MKDEMO" --expect mlp-activation --layers 2)

# --- text against text ---
expect_exit 0 "ls reads the eval-callback capture" "$TBISECT" ls "$T/ref.txt"
check_that "ls: Qcur-0 is after RoPE, 8 heads of 8 by 16 tokens, 6 of each printed" \
	grep -q '^Qcur-0  *L0.attn.q_rope  *f32  *\[216\]' "$TAP_OUT"
check_that "ls: the views are not listed" sh -c '! grep -q "(reshaped)\|(view)" "$1"' x "$TAP_OUT"
check_that "ls: result_norm is the final norm, not norm (before its weight)" sh -c \
	'grep -q "^result_norm  *final_norm " "$1" && ! grep -q "^norm " "$1"' x "$TAP_OUT"
check_that "ls: the quantized header is noted" grep -q 'note: skipped 2 quantized tensors of .*ref.txt, k_q8-0 (q8_0) and others' "$TAP_OUT"
expect_exit 0 "V3 capture against the same run printed in the V1 layout: exit 0" \
	"$TBISECT" check --json "$T/ref.txt" "$T/same-v1.txt"
json_is "V3 against V1: verdict match" verdict match
count_is "V3 against V1: no cell missing" missing 0
count_is "V3 against V1: every cell of the two layers matches" match 21
cell_is "V3 against V1: L0.attn.q_rope is partial" L0.attn.q_rope partial true
cell_is "V3 against V1: result_output is partial" logits partial true
expect_exit 0 "ffn_out written twice (control vector): the first, the MLP's output, is compared" \
	"$TBISECT" check --json "$T/ref.txt" "$T/same-cvec.txt"
cell_is "cvec: L0.mlp matches" L0.mlp status match
expect_exit 1 "MLP activation bug, text against text: exit 1" "$TBISECT" check "$T/ref.txt" "$T/mlp.txt"
check_that "text against text finds the first divergence at $want_mlp" grep -q "^first divergence: $want_mlp$" "$TAP_OUT"
check_that "the text report says the cell is partial" grep -q '^  partial: 36 of 1024 values dumped (whole shape \[1, 1, 16, 64\])$' "$TAP_OUT"
expect_exit 1 "RoPE bug, text against text: exit 1" "$TBISECT" check "$T/ref.txt" "$T/rope.txt"
check_that "Qcur's last write (after RoPE) is what diverges first" grep -q '^first divergence: L0.attn.q_rope$' "$TAP_OUT"

# --- text against the npy reference ---
expect_exit 0 "the npy reference against the same run's text: exit 0 (the last layer read at the last token)" \
	"$TBISECT" check --json "$T/refnpy" "$T/ref.txt"
cell_is "npy against text: L0.block matches at the printed elements" L0.block status match
cell_is "npy against text: L0.block is partial" L0.block partial true
cell_is "npy against text: L0.block compares 36 elements" L0.block elements 36
cell_is "npy against text: embed matches" embed status match
cell_is "npy against text: the last layer's MLP, the last token only, matches the reference's last position" \
	L1.mlp status match
cell_is "npy against text: the last token's MLP compares its 6 printed values" L1.mlp elements 6
# v_proj's [S, kv_heads*d] against Vcur's [S, kv_heads, d]: the same order
cp "$T/ref"/model.layers.*.self_attn.v_proj.npy "$T/refnpy/"
expect_exit 0 "v_proj against Vcur-N (heads folded into channels)" "$TBISECT" check --json "$T/refnpy" "$T/ref.txt"
cell_is "v_proj against Vcur-N: L0.attn.v matches" L0.attn.v status match
cell_is "v_proj against Vcur-N: read at the printed elements" L0.attn.v partial true
rm "$T/refnpy"/*_proj.npy
expect_exit 1 "MLP activation bug as text against the npy reference: exit 1" \
	"$TBISECT" check --json "$T/refnpy" "$T/mlp.txt"
json_is "npy against text: first divergence at $want_mlp as npy against npy" first_divergence.cell "$want_mlp"
cell_is "npy against text: the first divergence is partial" "$want_mlp" partial true
expect_exit 1 "npy against text: the Markdown summary" "$TBISECT" check --markdown --html "$T/partial.html" "$T/refnpy" "$T/mlp.txt"
check_that "Markdown: the first divergence is read at the printed elements" \
	grep -q '^- \*\*First divergence:\*\* .*, at the elements a partial dump printed$' "$TAP_OUT"
check_that "HTML: the partial cells are marked" grep -q 'data-partial="true"' "$T/partial.html"
printf 'f\nEnter\n:save-display %s\nq\n' "$T/detail.txt" >"$T/script"
expect_exit 1 "the interactive view opens the first divergence's detail (script mode)" env TERM=xterm-256color LINES=30 \
	COLUMNS=100 HOME="$T" TBISECT_SCRIPT="$T/script" "$TBISECT" "$T/refnpy" "$T/mlp.txt"
check_that "the detail screen says the cell is partial" \
	grep -q '^partial: 36 of 1024 values dumped (whole shape \[1, 1, 16, 64\]); the metrics are of those' "$T/detail.txt"
printf 'f\nEnter\n:save-display %s\nq\n' "$T/heads.txt" >"$T/script"
expect_exit 1 "the RoPE bug's first divergence in the interactive view, with --heads" env TERM=xterm-256color \
	LINES=60 COLUMNS=100 HOME="$T" TBISECT_SCRIPT="$T/script" "$TBISECT" --heads 8 --kv-heads 2 "$T/ref.txt" "$T/rope.txt"
check_that "a partial cell claims no heads: its values are a few of each axis" \
	grep -q '^  only some values were dumped: no heads to split' "$T/heads.txt"
expect_exit 0 "sketch the npy reference" "$TBISECT" sketch "$T/refnpy" -o "$T/refnpy.tbsk"
expect_error 2 "refnpy.tbsk" "a sketch against a partial text dump: refused, naming the sketch" \
	"$TBISECT" check --no-history "$T/refnpy.tbsk" "$T/mlp.txt"
check_that "sketch against partial: the message says why" grep -q "compares with the tree itself" "$TAP_ERR"
expect_exit 1 "npy against npy agrees" "$TBISECT" check --json "$T/refnpy" "$T/mlp-activation"
json_is "npy against npy: first divergence at $want_mlp" first_divergence.cell "$want_mlp"

# --- raw logits ---
rawlogits "$T/ref" "$T/pytorch-demo.bin"
rawlogits "$T/same" "$T/llamacpp-demo.bin"
"$MKDEMO" --layers 2 --cand-only --bug lm-head "$T/lmhead" >/dev/null
rawlogits "$T/lmhead" "$T/llamacpp-lmhead.bin"
expect_exit 0 "raw logits with --vocab 256: exit 0" \
	"$TBISECT" check --json --vocab 256 "$T/pytorch-demo.bin" "$T/llamacpp-demo.bin"
json_is "raw logits pair in the logits cell" cells.0.tap logits
json_is "raw logits: KL of equal logits is 0" logits.kl_mean 0
json_is "raw logits: top-1 agrees" logits.top1_agree 1
expect_exit 1 "raw logits of an lm_head bug: exit 1" \
	"$TBISECT" check --vocab 256 "$T/pytorch-demo.bin" "$T/llamacpp-lmhead.bin"
check_that "the lm_head bug diverges in logits" grep -q '^first divergence: logits$' "$TAP_OUT"
head -c 1000 "$T/pytorch-demo.bin" >"$T/pytorch-short.bin"
expect_error_msg 2 "$T/pytorch-short.bin" "its 1000 bytes are not rows of --vocab 256 float32 logits" \
	"a size that is no whole rows of --vocab: exit 2 naming the file" \
	"$TBISECT" check --vocab 256 "$T/pytorch-short.bin" "$T/llamacpp-demo.bin"
expect_error_msg 2 "$T/pytorch-demo.bin" "--vocab N reads raw float32 logits" "a .bin without --vocab: exit 2 saying what reads it" \
	"$TBISECT" check "$T/pytorch-demo.bin" "$T/llamacpp-demo.bin"
"$FMTGEN" convert pt "$T/refnpy" "$T/pytorch_model.bin" || bail_out "fmtgen failed"
expect_exit 0 "a torch.save pytorch_model.bin is still a torch file with --vocab" \
	"$TBISECT" ls --vocab 256 "$T/pytorch_model.bin"
check_that "its tensors are torch's" grep -q '^model.layers.0.mlp ' "$TAP_OUT"

# --- refusals ---
head -c 3000 "$T/ref.txt" >"$T/cut.txt"
expect_error_msg 2 "$T/cut.txt" "the dump was cut short" "a capture cut mid-line: exit 2 naming the file" \
	"$TBISECT" check "$T/cut.txt" "$T/ref.txt"
check_that "the message gives the line" grep -q 'cut.txt: line [0-9]*: ' "$TAP_ERR"
sed '0,/^            \[ *[-0-9.]*,/s//            [      0.12x4,/' "$T/ref.txt" >"$T/garbled.txt"
expect_error_msg 2 "$T/garbled.txt" "'0.12x4' is not a number" "a non-numeric value: exit 2 naming the file" \
	"$TBISECT" check "$T/ref.txt" "$T/garbled.txt"
tap_done
