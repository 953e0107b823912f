#!/bin/sh
# polygraphy: Polygraphy RunResults JSON end to end.  mkdemo's npy trees
# (HF names, sub-taps) become the outputs of an ONNX export run with
# `polygraphy run model.onnx --onnxrt --trt --onnx-outputs mark all
# --save-outputs out.json`: torch.onnx names (/model/layers.0/self_attn/
# o_proj/MatMul_output_0), several op outputs per module, int64 shape
# tensors and a bool mask, in graph order, serialised as Polygraphy's
# serde does (json.dumps indent=4, no trailing newline, the type tag last);
# the reference run is the first runner, the candidate the second.  Then
# `tbisect check out.json out.json` pairs every cell and finds each bug's
# first divergence where mkdemo says it is; two one-runner files do too;
# malformed files exit 2 with one line naming them.  Without numpy the
# whole file is one skip.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP
if ! PY=$(find_python numpy); then
	skip "Polygraphy JSON" "no python3 with numpy (Debian: python3-numpy)"
	tap_done
fi

# pg MODE OUT REF [CAND]: write OUT from mkdemo trees.  MODE: both (REF
# the first runner, CAND the second), one (REF alone), or a flaw for the
# refusals (b64, short, no-runners, no-iterations, not-object, cut).
pg() {
	"$PY" - "$@" <<'EOF'
import base64, io, json, sys
import numpy as np

mode, out, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
RUNNERS = ["onnxrt-runner-N0-07/07/26-13:42:10", "trt-runner-N0-07/07/26-13:42:10"]


def load(d, name):
    return np.load(f"{d}/{name}.npy")


def rms(x):
    return x.astype(np.float32), (x * x).astype(np.float32), np.mean(x * x, axis=-1, keepdims=True).astype(np.float32)


def norm_ops(path, x, y):
    # LlamaRMSNorm exported: Cast, Pow, ReduceMean, Add, Sqrt, Div, Mul, Mul_1 (the output)
    cast, pw, mean = rms(x)
    return [(f"{path}/Cast_output_0", cast), (f"{path}/Pow_output_0", pw),
            (f"{path}/ReduceMean_output_0", mean), (f"{path}/Add_output_0", mean + np.float32(1e-6)),
            (f"{path}/Sqrt_output_0", np.sqrt(mean + np.float32(1e-6))), (f"{path}/Mul_1_output_0", y)]


def graph(d):
    """The outputs of a mark-all run, in node order."""
    x = load(d, "model.embed_tokens")
    seq, hid = x.shape[1], x.shape[2]
    g = [("/model/embed_tokens/Gather_output_0", x),
         ("/model/Shape_output_0", np.array([1, seq], dtype=np.int64)),
         ("/model/Range_output_0", np.arange(seq, dtype=np.int64)[None, :]),
         ("/model/Equal_output_0", np.tril(np.ones((seq, seq), dtype=bool)))]
    n_layers = 0
    while True:
        try:
            load(d, f"model.layers.{n_layers}")
        except FileNotFoundError:
            break
        n_layers += 1
    for n in range(n_layers):
        p, hf = f"/model/layers.{n}", f"model.layers.{n}"
        q = load(d, f"{hf}.self_attn.q_proj")
        g += norm_ops(f"{p}/input_layernorm", x, load(d, f"{hf}.input_layernorm"))
        g += [(f"{p}/self_attn/q_proj/MatMul_output_0", q),
              (f"{p}/self_attn/k_proj/MatMul_output_0", load(d, f"{hf}.self_attn.k_proj")),
              (f"{p}/self_attn/v_proj/MatMul_output_0", load(d, f"{hf}.self_attn.v_proj")),
              (f"{p}/self_attn/Shape_output_0", np.array(q.shape, dtype=np.int64)),
              (f"{p}/self_attn/Reshape_output_0", q.reshape(1, seq, 8, hid // 8)),
              (f"{p}/self_attn/Transpose_output_0", q.reshape(1, seq, 8, hid // 8).transpose(0, 2, 1, 3).copy()),
              (f"{p}/self_attn/Reshape_3_output_0", q * np.float32(0.5)),
              (f"{p}/self_attn/o_proj/MatMul_output_0", load(d, f"{hf}.self_attn.o_proj"))]
        h = x + load(d, f"{hf}.self_attn")
        g += [(f"{p}/Add_output_0", h)]
        g += norm_ops(f"{p}/post_attention_layernorm", h, load(d, f"{hf}.post_attention_layernorm"))
        gate, up = load(d, f"{hf}.mlp.gate_proj"), load(d, f"{hf}.mlp.up_proj")
        # The activation's ops sit at the mlp level here: this script can
        # only compute them one way, and so they must be no cell.
        g += [(f"{p}/mlp/gate_proj/MatMul_output_0", gate),
              (f"{p}/mlp/Sigmoid_output_0", (0.5 * (1 + np.tanh(0.5 * gate))).astype(np.float32)),
              (f"{p}/mlp/up_proj/MatMul_output_0", up),
              (f"{p}/mlp/Mul_output_0", gate * up),
              (f"{p}/mlp/down_proj/MatMul_output_0", load(d, f"{hf}.mlp.down_proj")),
              (f"{p}/Add_1_output_0", load(d, hf))]
        x = load(d, hf)
    g += norm_ops("/model/norm", x, load(d, "model.norm"))
    g += [("logits", load(d, "lm_head"))]
    return g


def ndarray(a):
    f = io.BytesIO()
    np.save(f, a, allow_pickle=False)
    return {"array": base64.b64encode(f.getvalue()).decode(), "polygraphy_class": "ndarray"}


def iteration(runner, g):
    outputs = {name: {"values": ndarray(a), "polygraphy_class": "LazyArray"} for name, a in g}
    return {"outputs": outputs, "runtime": 0.0012, "runner_name": runner, "polygraphy_class": "IterationResult"}


if mode == "both":
    lst = [(RUNNERS[k], [iteration(RUNNERS[k], graph(d))]) for k, d in enumerate(dirs)]
else:
    lst = [(RUNNERS[0], [iteration(RUNNERS[0], graph(dirs[0]))])]
res = {"lst": lst, "polygraphy_class": "RunResults"}
outs = res["lst"][0][1][0]["outputs"]
o_proj = outs["/model/layers.0/self_attn/o_proj/MatMul_output_0"]["values"]
if mode == "b64":
    o_proj["array"] = o_proj["array"][:40] + "!" + o_proj["array"][41:]
elif mode == "short":
    o_proj["array"] = base64.b64encode(base64.b64decode(o_proj["array"])[:-4]).decode()
elif mode == "no-runners":
    res["lst"] = []
elif mode == "no-iterations":
    res["lst"][0] = (RUNNERS[0], [])
elif mode == "not-object":
    outs["/model/layers.0/self_attn/o_proj/MatMul_output_0"] = [1, 2]
text = json.dumps(res, indent=4)
if mode == "cut":
    text = text[: len(text) // 2]
with open(out, "w") as f:
    f.write(text)
EOF
}

# first_div DESC WANT REF CAND: check --json exits 1 with the first divergence at WANT.
first_div() {
	expect_exit 1 "$1: exit 1" "$TBISECT" check --json "$3" "$4"
	json_is "$1: first divergence $2" first_divergence.cell "$2"
}

"$MKDEMO" --sub --layers 2 "$T/ok/ref" "$T/ok/cand" || bail_out "mkdemo failed"
pg both "$T/out.json" "$T/ok/ref" "$T/ok/cand" || bail_out "writing the Polygraphy file failed"
check_that "the file ends without a newline, as Polygraphy writes it" sh -c '[ "$(tail -c 1 "$1")" = "}" ]' x "$T/out.json"

# One correct port: every cell pairs, every other output is no cell.
expect_exit 0 "check out.json out.json: match, exit 0" "$TBISECT" check --json "$T/out.json" "$T/out.json"
json_is "match: verdict" verdict match
json_is "match: no unpaired reference tensor" 'unpaired.ref.#' 0
json_is "match: no unpaired candidate tensor" 'unpaired.cand.#' 0
json_is "match: 27 cells (embed, 2 x 12 per layer, final_norm, logits)" 'cells.#' 27
json_is "match: 27 cells paired" coverage.paired 27
json_is "match: coverage full (reference)" coverage.ref_tensors 27
json_is "match: coverage full (candidate)" coverage.cand_tensors 27
# self_attn and mlp end with o_proj's and down_proj's MatMul: no output of
# their own, their cells are the projections'
json_is "match: L0.attn is o_proj's output" cells.6.ref_name model/layers.0/self_attn/o_proj
json_is "match: L0.mlp is down_proj's output" cells.11.ref_name model/layers.0/mlp/down_proj
json_is "match: the reference cell is the first runner's o_proj" cells.5.ref_name model/layers.0/self_attn/o_proj
check_that "match: the runners are named on stderr" grep -q "out.json: runner trt-runner-N0-07/07/26-13:42:10, iteration 0 of 1" "$TAP_ERR"

expect_exit 0 "ls out.json" "$TBISECT" ls "$T/out.json"
while read -r name cell; do
	check_that "ls: $name is $cell" grep -q "^$name  *$cell " "$TAP_OUT"
done <<'LIST'
model/embed_tokens embed
model/layers.0/input_layernorm L0.attn_norm
model/layers.0/self_attn/q_proj L0.attn.q
model/layers.0/self_attn/k_proj L0.attn.k
model/layers.0/self_attn/v_proj L0.attn.v
model/layers.0/self_attn/o_proj L0.attn.o
model/layers.0/post_attention_layernorm L0.mlp_norm
model/layers.1/mlp/gate_proj L1.mlp.gate
model/layers.1/mlp/up_proj L1.mlp.up
model/layers.1/mlp/down_proj L1.mlp.down
model/layers.0 L0.block
model/layers.1 L1.block
model/norm final_norm
logits logits
LIST
check_that "ls: op outputs keep their names" grep -q "^model/layers.1/self_attn/Reshape_3_output_0 " "$TAP_OUT"
check_that "ls: the first runner is read" grep -q "^note: .*runner onnxrt-runner-N0-07/07/26-13:42:10, iteration 0 of 1" "$TAP_OUT"

# Each bug's first divergence, where mkdemo's catalogue puts it.
for bug in rope-style mlp-activation final-norm; do
	want=$("$MKDEMO" --sub --layers 2 --expect "$bug")
	"$MKDEMO" --sub --layers 2 --bug "$bug" "$T/$bug/ref" "$T/$bug/cand" || bail_out "mkdemo failed"
	pg both "$T/$bug.json" "$T/$bug/ref" "$T/$bug/cand" || bail_out "writing the Polygraphy file failed"
	first_div "$bug, one file of two runners" "$want" "$T/$bug.json" "$T/$bug.json"
	json_is "$bug: every cell paired" 'unpaired.cand.#' 0
	pg one "$T/$bug-ref.json" "$T/$bug/ref" && pg one "$T/$bug-cand.json" "$T/$bug/cand" ||
		bail_out "writing the Polygraphy files failed"
	first_div "$bug, two one-runner files" "$want" "$T/$bug-ref.json" "$T/$bug-cand.json"
done
pg one "$T/one.json" "$T/ok/cand" || bail_out "writing the Polygraphy file failed"
expect_exit 0 "two one-runner files of a correct port: match" "$TBISECT" check "$T/one.json" "$T/one.json"
expect_exit 0 "a one-runner file against the npy tree it came from: match" "$TBISECT" check "$T/one.json" "$T/ok/ref"

# Malformed files: exit 2, one line naming the file.
while read -r mode reason; do
	pg "$mode" "$T/$mode.json" "$T/ok/ref" "$T/ok/cand" || bail_out "writing the Polygraphy file failed"
	expect_error_msg 2 "$T/$mode.json" "$reason" "check refuses $mode" "$TBISECT" check "$T/$mode.json" "$T/$mode.json"
	expect_error_msg 2 "$T/$mode.json" "$reason" "check GOOD BAD refuses $mode" "$TBISECT" check "$T/out.json" "$T/$mode.json"
	expect_error_msg 2 "$T/$mode.json" "$reason" "ls refuses $mode" "$TBISECT" ls "$T/$mode.json"
done <<'BAD'
b64 output '/model/layers.0/self_attn/o_proj/MatMul_output_0': its array is not valid base64
short output '/model/layers.0/self_attn/o_proj/MatMul_output_0': npy data truncated
no-runners Polygraphy results hold no runners
no-iterations runner onnxrt-runner-N0-07/07/26-13:42:10 holds no iterations
not-object output '/model/layers.0/self_attn/o_proj/MatMul_output_0' is not an object
cut Polygraphy results is not valid JSON
BAD
expect_error_msg 2 "$T/out.json" "holds 1 iteration; --record 1 is out of range" "--record past the last iteration" \
	"$TBISECT" check --record 1 "$T/out.json" "$T/out.json"
tap_done
