#!/bin/sh
# The layouts engines' dumpers write, read with no map: SGLang's dumper,
# vLLM's intermediate logging, transformers' model debugger and hand-made
# rank_K/step_N folders (tests/layoutgen writes each as its source does,
# from mkdemo's trees).  Tensor-parallel shards are joined (split, partial
# sums, replicated; TP2 against TP1), prefill and decode steps stitched or
# picked, stale decode buffers named, and every malformed variant refused
# with exit 2 and one line naming the file.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP
GEN=$top_builddir/tests/layoutgen
CUTS=12,1,1,1,1

"$MKDEMO" --sub --layers 3 --seq 16 "$T/ref" "$T/ok" >/dev/null || bail_out "mkdemo failed"
"$MKDEMO" --sub --layers 3 --seq 16 --bug mlp-gating "$T/ref" "$T/bug" >/dev/null || bail_out "mkdemo failed"

# first_is DESC WANT: the last check's first divergence cell is WANT.
first_is() {
	json_is "$1" first_divergence.cell "$2"
}

# cell_status LAYER TAP: the status of that cell in the last JSON report ("" if absent).
cell_status() {
	_n=$(json_get 'cells.#')
	_i=0
	while [ "$_i" -lt "${_n:-0}" ]; do
		if [ "$(json_get "cells.$_i.layer")" = "$1" ] && [ "$(json_get "cells.$_i.tap")" = "$2" ]; then
			json_get "cells.$_i.status"
			return
		fi
		_i=$((_i + 1))
	done
}

expect_exit 1 "plain npy trees: the bug diverges" "$TBISECT" check --json --no-history "$T/ref" "$T/bug"
want=$(json_get first_divergence.cell)
check_that "plain npy trees: a first divergence to look for" test -n "$want"

# --- each layout, tensor-parallel and stepped, against the reference ---
for layout in sglang vllm npy; do
	"$GEN" "$layout" "$T/ok" "$T/$layout-ok" 2 "$CUTS" || bail_out "layoutgen $layout failed"
	"$GEN" "$layout" "$T/bug" "$T/$layout-bug" 2 "$CUTS" || bail_out "layoutgen $layout failed"
	before=$(snapshot "$T/$layout-ok")
	expect_exit 0 "$layout TP2, 5 steps: the correct port matches" "$TBISECT" check --json --no-history "$T/ref" "$T/$layout-ok"
	json_is "$layout: verdict match" verdict match
	if [ "$layout" = vllm ]; then
		# its fused add-norm's residual (attn.resid) is a tap the reference lacks,
		# and it logs only each step's last logits row
		json_is "$layout: only the residuals are one-sided" 'unpaired.cand.#' 3
		json_is "$layout: only the logits are not in the dump" 'unpaired.ref.#' 1
	else
		json_is "$layout: every candidate tensor pairs" 'unpaired.cand.#' 0
	fi
	if [ "$layout" = npy ]; then
		json_is "$layout: every reference tensor pairs" 'unpaired.ref.#' 0
	fi
	json_is "$layout: two ranks joined" layout.cand.ranks 2
	json_is "$layout: five steps" layout.cand.steps 5
	json_is "$layout: stitched against a one-pass reference" layout.cand.stitched true
	json_is "$layout: the reference has no layout" layout.ref.ranks 0
	check_that "$layout: the dump is not written to" test "$before" = "$(snapshot "$T/$layout-ok")"
	expect_exit 1 "$layout TP2: the bug diverges" "$TBISECT" check --json --no-history "$T/ref" "$T/$layout-bug"
	first_is "$layout: first divergence $want, as in the plain trees" "$want"
done

expect_exit 0 "the Markdown summary" "$TBISECT" check --markdown --no-history "$T/ref" "$T/sglang-ok"
check_that "Markdown: the candidate's layout" grep -q '^- \*\*Candidate:\*\* `.*sglang-ok` (2 tensor-parallel ranks joined, steps 0..4 stitched along the positions)$' "$TAP_OUT"

# --- what each joined: SGLang's dims say, the others by the tap ---
expect_exit 0 "ls an SGLang dump" "$TBISECT" ls "$T/sglang-ok"
check_that "ls: SGLang's layer_input of layer 1 is layer 0's block" grep -q '^layers.1.layer_input  *L0.block ' "$TAP_OUT"
check_that "ls: the q_proj shards join to the full width" grep -q '^model.layers.0.self_attn.q_proj.output  *L0.attn.q  *f32  *\[12, 64\]' "$TAP_OUT"
check_that "ls: says the layout" grep -q '^layout: 2 tensor-parallel ranks joined, step 0 of 0..4$' "$TAP_OUT"
check_that "ls: core records are inputs, not unmapped" grep -q '^positions  *(input) ' "$TAP_OUT"
expect_error_msg 2 "qkv_proj" "needs --heads and --kv-heads" "ls a vLLM dump alone: the fused qkv shards need the head counts" "$TBISECT" ls "$T/vllm-ok"
expect_exit 0 "ls a vLLM dump with the head counts" "$TBISECT" ls --heads 8 --kv-heads 2 "$T/vllm-ok"
check_that "ls: vLLM's fused qkv_proj shards join per projection" grep -q 'qkv_proj.outputs_0  *L0.attn.qkv  *f32  *\[12, 96\]' "$TAP_OUT"
check_that "ls: the final norm's residual is the last block" grep -q 'model.norm.outputs_1 ' "$TAP_OUT"

# --- different degrees on the two sides, one step or all ---
"$GEN" sglang "$T/ok" "$T/sglang-tp1" 1 "$CUTS" || bail_out "layoutgen failed"
expect_exit 0 "SGLang TP1 against TP2: the first step by default" "$TBISECT" check --json --no-history "$T/sglang-tp1" "$T/sglang-ok"
json_is "TP1 vs TP2: match" verdict match
json_is "TP1 vs TP2: cells carry the step" cells.0.step 0
json_is "TP1 vs TP2: one rank on the reference side" layout.ref.ranks 1
expect_exit 0 "TP1 vs TP2 --step 3" "$TBISECT" check --json --no-history --step 3 "$T/sglang-tp1" "$T/sglang-ok"
json_is "--step 3: cells of step 3" cells.0.step 3
json_is "--step 3: decode step of one position" cells.0.shape.0 1
expect_exit 0 "TP1 vs TP2 --steps all" "$TBISECT" check --json --no-history --steps all "$T/sglang-tp1" "$T/sglang-ok"
json_is "--steps all: no single step" layout.cand.step null
expect_exit 1 "vLLM TP2 against SGLang TP1, all steps: the bug" "$TBISECT" check --json --no-history --steps all --heads 8 --kv-heads 2 "$T/sglang-tp1" "$T/vllm-bug"
first_is "vLLM vs SGLang: first divergence $want" "$want"

# --- transformers' model debugger ---
"$GEN" hfdebug "$T/ok" "$T/hf-ok" || bail_out "layoutgen hfdebug failed"
"$GEN" hfdebug "$T/bug" "$T/hf-bug" || bail_out "layoutgen hfdebug failed"
expect_exit 0 "model debugger: the correct port matches" "$TBISECT" check --json --no-history "$T/ref" "$T/hf-ok"
json_is "model debugger: every tensor pairs" 'unpaired.cand.#' 0
check_that "model debugger: block of the last layer from the final norm's input" test "$(cell_status 2 block)" = match
expect_exit 1 "model debugger: the bug diverges" "$TBISECT" check --json --no-history "$T/ref" "$T/hf-bug"
first_is "model debugger: first divergence $want" "$want"

# --- stale decode buffers ---
"$GEN" sglang "$T/ok" "$T/stale" 2 "$CUTS" 3 || bail_out "layoutgen failed"
expect_exit 1 "a stale decode step diverges" "$TBISECT" check --json --no-history "$T/ref" "$T/stale"
json_is "stale: the cause is the dump" causes.0.id dump-duplicate
json_is "stale: counted" layout.cand.stale_steps 1
expect_exit 1 "stale: the text report" "$TBISECT" check --no-history "$T/ref" "$T/stale"
check_that "stale: the warning names the step" grep -q '^warning (dump-duplicate): candidate step 3 holds the previous step.s tensors' "$TAP_OUT"
"$GEN" npy "$T/ok" "$T/stale-npy" 2 "$CUTS" 2 || bail_out "layoutgen failed"
expect_exit 1 "stale in rank/step folders" "$TBISECT" check --json --no-history "$T/ref" "$T/stale-npy"
json_is "stale npy: the cause is the dump" causes.0.id dump-duplicate

# --- a bug only decode steps show ---
"$MKDEMO" --sub --layers 2 --seq 104 --bug decode-position "$T/ref104" "$T/dec" >/dev/null || bail_out "mkdemo failed"
"$GEN" npy "$T/dec" "$T/dec-steps" 1 100,1,1,1,1 || bail_out "layoutgen failed"
expect_exit 1 "decode-only bug, stitched" "$TBISECT" check --json --no-history "$T/ref104" "$T/dec-steps"
json_is "decode-only bug: first bad position is the first decode step's" first_divergence.first_bad_position 100
expect_exit 0 "decode-only bug: the prefill step alone matches" "$TBISECT" check --json --no-history --step 0 "$T/dec-steps" "$T/dec-steps"

# --- --shard overrides the default ---
expect_exit 1 "--shard attn.o=replicated takes rank 0's partial sum" "$TBISECT" check --no-history --shard attn.o=replicated "$T/ref" "$T/npy-ok"
check_that "--shard: the ranks' disagreement is a warning" grep -q '^warning (dump-duplicate): candidate ranks disagree on replicated tensors' "$TAP_OUT"
check_that "--shard: attn.o diverges first" grep -q '^first divergence: L0.attn.o$' "$TAP_OUT"
expect_exit 0 "--shard attn.o='b s h[tp:partial]' is the default's sum" "$TBISECT" check --no-history --shard 'attn.o=b s h[tp:partial]' "$T/ref" "$T/npy-ok"

# --- malformed layouts: exit 2, one line naming the file ---
cp -R "$T/npy-ok" "$T/norank"
rm "$T/norank/rank_1/step_2/model.layers.1.mlp.npy"
expect_error_msg 2 "model.layers.1.mlp" "rank 1 is missing (the tree has ranks 0..1)" "a missing rank" "$TBISECT" check --no-history "$T/ref" "$T/norank"
cp -R "$T/npy-ok" "$T/gap"
rm -r "$T/gap/rank_0/step_2" "$T/gap/rank_1/step_2"
expect_error_msg 2 "$T/gap" "step 2 is missing" "a step gap" "$TBISECT" check --no-history "$T/ref" "$T/gap"
cp -R "$T/npy-ok" "$T/mixed"
mkdir -p "$T/mixed/rank_2/step_0"
cp "$T/mixed/rank_0/step_0/model.norm.npy" "$T/mixed/rank_2/step_0/"
expect_error_msg 2 "$T/mixed" "rank 2 is missing (the tree has ranks 0..2), or the tree mixes tensor-parallel degrees" "mixed degrees in one tree" "$TBISECT" check --no-history "$T/ref" "$T/mixed"
cp -R "$T/npy-ok" "$T/nojoin"
cp "$T/nojoin/rank_1/step_1/model.layers.0.self_attn.q_proj.npy" "$T/nojoin/rank_1/step_0/model.layers.0.self_attn.q_proj.npy"
expect_error_msg 2 "q_proj" "do not join" "shards that do not join" "$TBISECT" check --no-history "$T/ref" "$T/nojoin"
"$GEN" npy "$T/ok" "$T/short" 2 12,1,1,1 || bail_out "layoutgen failed"
expect_error_msg 2 "$T/short" "stitch to 15 positions" "positions that do not add up" "$TBISECT" check --no-history "$T/ref" "$T/short"
expect_error_msg 2 "$T/npy-ok" "no step 9" "--step past the last" "$TBISECT" check --no-history --step 9 "$T/npy-ok" "$T/npy-ok"
# usage errors: exit 2, the reason, and where to look
expect_exit 2 "--step with --steps" "$TBISECT" check --step 1 --steps all "$T/ref" "$T/npy-ok"
check_that "--step with --steps: says why" grep -q -- "--step K and --steps all exclude each other" "$TAP_ERR"
expect_exit 2 "--shard without a split dim" "$TBISECT" check --shard 'attn.q=s h' "$T/ref" "$T/npy-ok"
check_that "--shard without a split dim: says why" grep -q -F "no dim is marked [tp]" "$TAP_ERR"
expect_exit 2 "--shard on no tap" "$TBISECT" check --shard 'nothing=partial' "$T/ref" "$T/npy-ok"
check_that "--shard on no tap: says why" grep -q "unknown tap 'nothing'" "$TAP_ERR"
cp -R "$T/sglang-ok" "$T/trunc"
victim=$(find "$T/trunc" -name 'step=1___rank=1___*name=attn_output*layer_id=0.pt')
head -c 300 "$victim" >"$T/cut.pt" && mv "$T/cut.pt" "$victim"
expect_error 2 "$victim" "a truncated SGLang record" "$TBISECT" check --no-history "$T/ref" "$T/trunc"
cp -R "$T/vllm-ok" "$T/noside"
side=$(find "$T/noside" -path '*step_2/model.layers.1.mlp/outputs.json')
rm "$side"
expect_error_msg 2 "step_2/model.layers.1.mlp/outputs_cuda_0.pt" "without its sidecar" "a vLLM record without its sidecar" "$TBISECT" check --no-history "$T/ref" "$T/noside"
# On the CPU, torch names the device "cpu": outputs_cpu.pt, inputs_0_cpu.pt
# (save_tensors in vLLM's vllm/v1/intermediates/intermediates_logging.py);
# versions of it that write no JSON sidecars leave the .pt files alone.
"$GEN" vllm "$T/ok" "$T/vllm-cpu" 1 "$CUTS" || bail_out "layoutgen vllm failed"
find "$T/vllm-cpu" -name '*_cuda_0.pt' | while read -r f; do mv "$f" "${f%_cuda_0.pt}_cpu.pt"; done
expect_exit 0 "a vLLM dump on the CPU (outputs_cpu.pt) is read" \
	"$TBISECT" check --json --no-history --heads 8 --kv-heads 2 "$T/ref" "$T/vllm-cpu"
json_is "... and matches" verdict match
json_is "... its records in the cells, as on cuda" 'unpaired.cand.#' 3
find "$T/vllm-cpu" -name '*.json' -exec rm {} +
expect_exit 0 "a vLLM dump without any sidecar is read" \
	"$TBISECT" check --json --no-history --heads 8 --kv-heads 2 "$T/ref" "$T/vllm-cpu"
json_is "... and matches" verdict match
# vLLM logs a step's logits in the next step's folder: a dump of step 1
# alone (log_step_ids [1]) holds step 0's logits and nothing else of it.
cp -R "$T/vllm-ok" "$T/vllm-one"
run=$(dirname "$(find "$T/vllm-one" -name step_1)")
rm -r "$run/step_0" "$run/step_2" "$run/step_3" "$run/step_4"
expect_exit 1 "a step whose folder holds only the logits is left out" \
	"$TBISECT" check --json --no-history "$T/ref" "$T/vllm-one"
json_is "... the step compared is the one whose forward pass is there" layout.cand.steps 1
check_that "... noted" grep -q "note: step 0 holds only the logits, of a forward pass the dump does not hold: left out" \
	"$TAP_ERR"
# A side whose layout leaves nothing (no tap has every step) pairs nothing:
# all missing is no match.
cp -R "$T/vllm-ok" "$T/vllm-none"
run=$(dirname "$(find "$T/vllm-none" -name step_1)")
rm -r "$run/step_2" "$run/step_3" "$run/step_4" "$run"/step_0/model.layers.1*
find "$run/step_1" -mindepth 1 -maxdepth 1 -type d ! -name 'model.layers.1*' -exec rm -r {} +
expect_error_msg 2 "$T/vllm-none" "no tensor left to compare once its ranks and steps were laid out; " \
	"a side with nothing left to compare: exit 2, not a match" "$TBISECT" check --no-history "$T/ref" "$T/vllm-none"
check_that "... the layout's note says why" grep -q "not stitched, it has no step" "$TAP_ERR"
cp -R "$T/vllm-ok" "$T/norec"
rm "$(dirname "$(find "$T/norec" -path '*step_1/model.layers.0.self_attn.o_proj/outputs.json')")"/outputs_0_cuda_*.pt
expect_error_msg 2 "step_1/model.layers.0.self_attn.o_proj/outputs.json" "names item 0" "a vLLM sidecar naming a missing record" "$TBISECT" check --no-history "$T/ref" "$T/norec"
cp -R "$T/hf-ok" "$T/hfgone"
rm "$T/hfgone/LlamaForCausalLM.model.layers.1.mlp.up_proj_outputs.safetensors"
expect_error_msg 2 "FULL_TENSORS.json" "which is missing" "a model-debugger tree naming a missing file" "$TBISECT" check --no-history "$T/ref" "$T/hfgone"

# SGLang's CUDA-graph frames on a prefill/decode-disaggregated server: the
# decode process's steps follow the prefill's, a module's second call is
# a tensor of its own, a frame at its padded width says its rows may be stale.
"$GEN" sglang-pd "$T/ok" "$T/pd" 12,1,1,1,1 || bail_out "layoutgen failed"
expect_exit 0 "sglang-pd: ls" "$TBISECT" ls "$T/pd"
check_that "sglang-pd: prefill step 0 and decode steps 0..3 are steps 0..4" grep -q "step 0 of 0..4" "$TAP_OUT"
check_that "sglang-pd: the renumbering said" grep -q "note: the decode process's steps (pd_role=decode) follow the prefill process's: its step 0 is step 1 here" "$TAP_OUT"
expect_exit 0 "sglang-pd: ls at a decode step" "$TBISECT" ls --step 1 "$T/pd"
check_that "sglang-pd: the MLP's first call is L0.mlp" grep -q "^layers.0.mlp_output  *L0.mlp " "$TAP_OUT"
check_that "sglang-pd: its second call is a tensor of its own" grep -q "^layers.0.mlp_output.call_1  *(unmapped) " "$TAP_OUT"
expect_exit 1 "sglang-pd against the bug: stitched, it diverges" "$TBISECT" check --json --no-history "$T/pd" "$T/bug"
json_is "sglang-pd: its 5 steps stitched" layout.ref.stitched true
check_that "sglang-pd: the second call is kept out of L0.mlp's stitching" \
	grep -q "layers.0.mlp_output.call_1: not stitched, it has no step 0" "$TAP_ERR"
expect_exit 0 "sglang-pd against itself at decode step 2" "$TBISECT" check --json --no-history --step 2 "$T/pd" "$T/pd"
json_is "sglang-pd: the padded frame is L0.mlp.experts" cells.4.tap mlp.experts
json_is "sglang-pd: the padded frame is said" cells.4.layout \
	"a CUDA-graph frame at its padded width (graph_size rows per token slot): rows past the batch's real count may be stale"
for bad in "occurrence=x" "pd_role=both" "graph_size=0"; do
	rm -rf "$T/pdbad"
	cp -R "$T/pd" "$T/pdbad"
	victim=$(find "$T/pdbad" -name 'step=1___*name=mlp_output*occurrence=1*' | head -n 1)
	key=${bad%%=*}
	moved=$(printf '%s' "$victim" | sed "s/___${key}=[^_]*/___${bad}/")
	[ "$key" = occurrence ] || moved=$(printf '%s' "$victim" | sed "s/___${key}=[^_.]*/___${bad}/")
	mv "$victim" "$moved"
	expect_error_msg 2 "$moved" "$key" "sglang-pd: a frame with $bad is refused" "$TBISECT" check --no-history "$T/ref" "$T/pdbad"
done

# TensorRT-LLM's debug hook: call chains read as module paths, the inputs
# it dumps again as outputs not taken for outputs.
"$GEN" trtllm "$T/ok" "$T/trt" || bail_out "layoutgen failed"
"$GEN" trtllm "$T/bug" "$T/trtbug" || bail_out "layoutgen failed"
expect_exit 0 "trtllm: ls" "$TBISECT" ls "$T/trt"
check_that "trtllm: the MLP's output, named after an argument it is not, is L0.mlp" \
	grep -q "^model.layers.0.mlp  *L0.mlp .*GatedMLP-output.all_rank_num_tokens.pt" "$TAP_OUT"
check_that "trtllm: the norm's input dumped again as an output is left out" \
	grep -q "TensorRT-LLM's debug hook left out: inputs it dumped again as outputs" "$TAP_OUT"
check_that "trtllm: no layer-1 norm input taken for an output" sh -c '! grep -q "RMSNorm-output.hidden_states.pt" "$1"' sh "$TAP_OUT"
expect_exit 0 "trtllm: the correct port matches the HF tree" "$TBISECT" check --json --no-history "$T/ref" "$T/trt"
json_is "trtllm: every main cell paired" coverage.cells.paired 18
check_that "trtllm: fused qkv split and compared" test "$(cell_status 0 attn.q)" = match
expect_exit 1 "trtllm: the bug diverges" "$TBISECT" check --json --no-history "$T/ref" "$T/trtbug"
first_is "trtllm: at the HF tree's first divergence" "$want"

tap_done
