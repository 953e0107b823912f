#!/bin/sh
# llama.cpp's own dumps, as llama.cpp itself wrote them: the captures of
# llama-eval-callback (koboldcpp's llama.cpp of 2024-10 and a July 2026
# llama.cpp) and llama-debug (2026) under tests/llamacpp/captures, made by
# tests/llamacpp/mkfixtures.py from a tiny Llama converted to GGUF with
# each tree's own gguf-py, against the Hugging Face forward-hook dump of
# the same weights (ref.npz).  Every pair compares with no map; a clean
# conversion is close (llama.cpp's KV cache is f16), each conversion bug's
# first divergence is where it was injected; llama.cpp's queries and keys
# are read in Hugging Face's channel order; a capture that lost its end, a
# model that failed to load and two runs in one file exit 2 with the
# line; the real llama-debug --save-logits files compare as logits.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
need_python numpy
T=$TAP_TMP
C=$top_srcdir/tests/llamacpp/captures
REF=$C/ref.npz

for f in "$C"/*.log.gz; do
	b=$(basename "$f" .gz)
	gzip -dc "$f" >"$T/$b" || bail_out "cannot unpack $f"
done

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

# --- clean conversions: every main cell pairs with no map, none diverges ---
for cap in 2024-clean 2026-clean 2026-f16 2026-warmup; do
	expect_exit 0 "$cap: a clean conversion compares with no map, exit 0" \
		"$TBISECT" check --json --no-history "$REF" "$T/$cap.log"
	json_is "$cap: verdict close (llama.cpp's KV cache is f16)" verdict close
	json_is "$cap: the 13 main cells pair" coverage.cells.paired 13
	count_is "$cap: no cell diverged" diverged 0
	cell_is "$cap: Qcur after RoPE, in Hugging Face's order, pairs with apply_rotary_pos_emb's" \
		L0.attn.q_rope ref_name layers.0.attn.q_rope
done
cell_is "2026-warmup: Qcur after RoPE, in Hugging Face's order, matches apply_rotary_pos_emb's" \
	L0.attn.q_rope status match
expect_exit 0 "2024: check" "$TBISECT" check --json --no-history "$REF" "$T/2024-clean.log"
cell_is "2024: Qcur after RoPE matches apply_rotary_pos_emb's" L0.attn.q_rope status match
cell_is "2024: kqv_out-0 (MUL_MAT by attn_output.weight) is the attention output" L0.attn cand_name kqv_out-0
cell_is "2024: o_proj's input is kqv_merged_cont-0" L0.attn.core cand_name kqv_merged_cont-0
expect_exit 0 "2026: check" "$TBISECT" check --json --no-history "$REF" "$T/2026-clean.log"
cell_is "2026: attn_out-0 is the attention output" L0.attn cand_name attn_out-0
cell_is "2026: kqv_out-0 is o_proj's input" L0.attn.core cand_name kqv_out-0
cell_is "2026: the embedding is embd" embed cand_name embd
cell_is "2026: the queries' layout says how they were read" L0.attn.q_rope layout \
	"llama.cpp's channels of each head put back in Hugging Face's order (undoing the permutation convert_hf_to_gguf applies for llama.cpp's RoPE), and its [S, heads, d] read as [heads, S, d]"
cell_is "2026: the last layer's MLP, the last token only, is read at the reference's last position" \
	L1.mlp status close
expect_exit 0 "the 2024 capture against the 2026 one (two graphs, one model)" \
	"$TBISECT" check --json --no-history "$T/2024-clean.log" "$T/2026-clean.log"
json_is "2024 against 2026: the 13 main cells pair" coverage.cells.paired 13
count_is "2024 against 2026: no cell diverged" diverged 0

# --- conversion bugs: the first divergence is where the bug is, its first
# bad position the first printed row past --diverge, and the cause ranked
# first is the bug's, from the printed rows (positions, channels) ---
while read -r cap ref cell pos cause; do
	expect_exit 1 "$cap: exit 1" "$TBISECT" check --json --no-history "$C/$ref" "$T/$cap.log"
	json_is "$cap: first divergence $cell" first_divergence.cell "$cell"
	json_is "$cap: first bad position $pos" first_divergence.first_bad_position "$pos"
	json_is "$cap: the cause ranked first is $cause" causes.0.id "$cause"
done <<EOF
2024-noperm ref.npz L0.attn.q_rope 1 rope-style
2026-noperm ref.npz L0.attn.q_rope 1 rope-style
2024-eps ref.npz L0.attn_norm 0 norm-epsilon
2026-theta ref.npz L0.attn.q_rope 1 rope-theta
2024-gateup ref.npz L0.mlp.gate 0 mlp-gating
2026-gateup ref.npz L0.mlp.gate 0 mlp-gating
2026-transposed ref.npz L1.attn 0 weight-mapping
2026-nobias ref-bias.npz L0.mlp 0 mlp-bias
2024-nooutput ref.npz logits null tied-embeddings
2024-nobos ref.npz embed null tokenizer
2026-nobos ref.npz embed null tokenizer
EOF
expect_exit 1 "no BOS, 2024 (no ids printed): check" "$TBISECT" check --json --no-history "$REF" "$T/2024-nobos.log"
check_that "no BOS, 2024: the printed rows are the reference's shifted by one" \
	sh -c "'$JSONQ' '$TAP_OUT' causes.0.why | grep -q \"row p matches the reference's row p+1 or p-1 for 1.00 of positions\""
expect_exit 1 "no BOS, 2026: check" "$TBISECT" check --json --no-history "$REF" "$T/2026-nobos.log"
json_is "no BOS, 2026: the ids eval-callback printed are one short" warnings.0.text \
	"token ids differ: 14 in the reference, 13 in the candidate; the candidate's ids are the reference's shifted by -1"
expect_exit 1 "q and k not permuted: check" "$TBISECT" check --json --no-history "$REF" "$T/2024-noperm.log"
json_is "not permuted: the warning says the queries agree in llama.cpp's own order" warnings.0.id qk-order
check_that "not permuted: the warning quotes both agreements" \
	sh -c "'$JSONQ' '$TAP_OUT' warnings.0.text | grep -q 'L0.attn.q: rel_l2 [0-9.e-]* as they are, [0-9.]* undone'"
cell_is "not permuted: the projection before RoPE matches" L0.attn.q status match
expect_exit 1 "RoPE base: check" "$TBISECT" check --json --no-history "$REF" "$T/2026-theta.log"
cell_is "RoPE base: a partial cell has the whole tensor's shape" L0.attn.q_rope shape "[1, 8, 14, 8]"
cell_is "RoPE base: its worst element is an index into the whole tensor, at a printed row" L0.attn.q_rope worst \
	'{"index": [0, 2, 13, 1], "ref": -1.715308666229248, "cand": 1.507599949836731}'
"$JSONQ" "$TAP_OUT" first_divergence.pos_rel_l2 >"$T/profile.json"
check_that "RoPE base: the profile is of the printed rows (0-2, 11-13), null elsewhere, growing" "$PY" -c '
import json, sys
e = json.load(open(sys.argv[1]))
sys.exit(not (len(e) == 14 and e[3:11] == [None] * 8 and e[0] < 1e-3 and e[13] > e[11] > e[1]))' "$T/profile.json"

# q8_0 weights: diverged at --diverge 1e-2 (1.2% at L0.attn.q), and named
# for what it is: the embedding, a lookup, already differs by 0.5%
expect_exit 1 "q8_0 weights: exit 1" "$TBISECT" check --json --no-history "$REF" "$T/2026-q8.log"
json_is "q8_0 weights: the cause is the weights' precision" causes.0.id dtype-precision
check_that "q8_0 weights: the why quotes the embedding's own error" \
	sh -c "'$JSONQ' '$TAP_OUT' causes.0.why | grep -q '^the embedding, a lookup that computes nothing, already differs by rel_l2 0.005 '"

# --- what ls shows ---
expect_exit 0 "ls reads the 2024 capture" "$TBISECT" ls "$T/2024-clean.log"
check_that "ls: kqv_out-0 is the attention output by its op" grep -q '^kqv_out-0  *L0\.attn  *f32  *\[1, 1, 14, 64\] (36 printed) ' "$TAP_OUT"
check_that "ls: RoPE's output, the whole shape and the values printed" \
	grep -q '^Qcur-0 (ROPE)  *L0\.attn\.q_rope  *f32  *\[1, 14, 8, 8\] (216 printed) ' "$TAP_OUT"
check_that "ls: the KV cache's view is f16 as printed, a graph internal" grep -q '^k-0  *(internal)  *f16 ' "$TAP_OUT"
check_that "ls: the views are not listed" sh -c '! grep -q "(reshaped)\|(view)" "$1"' x "$TAP_OUT"
check_that "ls: nothing unmapped" grep -q ' 0 unmapped$' "$TAP_OUT"
expect_exit 0 "ls --json reads the 2026 capture" "$TBISECT" ls --json "$T/2026-warmup.log"
json_is "ls --json: the op of the first tensor" tensors.0.op "GET_ROWS(token_embd.weight, inp_tokens)"
json_is "ls --json: partial" tensors.0.partial true
json_is "ls --json: the whole shape" tensors.0.shape "[1,1,14,64]"
check_that "ls: llama-debug's warmup decode is left out with a note" \
	sh -c "'$JSONQ' '$TAP_OUT' notes.0 | grep -q '^left out the warmup decode of .*2026-warmup.log (lines 6-'"

# --- suggest-map against a capture: the printed values at their places ---
mkdir "$T/renamed"
"$PY" - "$REF" "$T/renamed" <<'PY' || bail_out "cannot write the renamed reference"
import re, sys
import numpy as np
d = np.load(sys.argv[1])
for k in d.files:
    np.save("%s/%s.npy" % (sys.argv[2], re.sub(r"^model\.layers\.(\d+)\.input_layernorm$", r"net.blk\1.ln_in", k)), d[k])
PY
expect_exit 0 "suggest-map: a reference name no convention knows, against the capture's printed values" \
	"$TBISECT" suggest-map "$T/renamed" "$T/2024-clean.log"
cp "$TAP_OUT" "$T/suggested.json"
json_is "suggest-map: the rule" rules.0.match '^net\.blk([0-9]+)\.ln_in$'
json_is "suggest-map: its cell" rules.0.tap attn_norm
expect_exit 0 "the suggested map pairs the renamed reference with the capture" \
	"$TBISECT" check --json --no-history --map "$T/suggested.json" "$T/renamed" "$T/2024-clean.log"
json_is "with the map: the 13 main cells pair" coverage.cells.paired 13
mkdir "$T/noise"
"$PY" -c 'import sys, numpy as np; np.save(sys.argv[1], np.random.default_rng(1).standard_normal((3, 5)).astype("f4"))' \
	"$T/noise/blk0_x.npy" || bail_out "cannot write noise"
cp "$T/renamed/lm_head.npy" "$T/noise/"
expect_exit 0 "suggest-map with nothing to suggest: exit 0" "$TBISECT" suggest-map "$T/noise" "$T/2024-clean.log"
check_that "suggest-map says why it found no rule" grep -q "^tbisect: no rule found for the 1 unmapped names of $T/noise: none of them lines up with a cell the other tree has and this one lacks" "$TAP_ERR"

# --- the capture anywhere in a file: a .out, after 50 KB of log ---
{
	i=0
	while [ "$i" -lt 600 ]; do
		echo "llm_load_print_meta: n_embd           = 64 (line $i of a long log before the tensors)"
		i=$((i + 1))
	done
	cat "$T/2024-eps.log"
} >"$T/dump.out"
expect_exit 1 "a capture saved as dump.out after 50 KB of log: exit 1" \
	"$TBISECT" check --json --no-history "$REF" "$T/dump.out"
json_is "dump.out: the same first divergence" first_divergence.cell L0.attn_norm

# --- the text report and the view on a partial cell ---
expect_exit 1 "eps: the text report" "$TBISECT" check --no-history "$REF" "$T/2024-eps.log"
check_that "the text report says the cell is partial" \
	grep -q '^  partial: 36 of 896 values dumped (whole shape \[1, 1, 14, 64\])$' "$TAP_OUT"
check_that "the replay hint says what is missing: values, not tensors" \
	grep -q '^  no replay from a partial dump: L0.attn_norm holds 36 of its 896 values (llama.cpp prints the first and last three of each axis)' "$TAP_OUT"
printf 'f\nEnter\n:save-display %s\nq\n' "$T/detail.txt" >"$T/script"
expect_exit 1 "the interactive view opens the first divergence's detail (script mode)" env TERM=xterm-256color \
	LINES=40 COLUMNS=100 HOME="$T" TBISECT_SCRIPT="$T/script" "$TBISECT" --no-history "$REF" "$T/2026-theta.log"
check_that "the detail screen says the cell is partial" grep -q '^partial: 216 of 896 values dumped' "$T/detail.txt"
check_that "the detail screen says how the queries were laid out" grep -q "^layout: llama.cpp's channels of each head" "$T/detail.txt"

expect_exit 1 "eps: the Markdown summary and the HTML report" \
	"$TBISECT" check --no-history --markdown --html "$T/partial.html" "$REF" "$T/2024-eps.log"
check_that "Markdown: the first divergence is read at the elements printed" \
	grep -q '^- \*\*First divergence:\*\* .*, at the elements a partial dump printed$' "$TAP_OUT"
check_that "HTML: the partial cells are marked" grep -q 'data-partial="true"' "$T/partial.html"
expect_exit 0 "sketch the reference" "$TBISECT" sketch "$REF" -o "$T/ref.tbsk"
expect_error 2 "ref.tbsk" "a sketch against a partial capture: refused, naming the sketch" \
	"$TBISECT" check --no-history "$T/ref.tbsk" "$T/2024-eps.log"

# --- refusals, each naming the file and the line ---
expect_error_msg 2 "$T/2026-cut.log" "line 1477: the capture ends after 'result_norm' (final_norm), before the logits" \
	"a capture that lost its end (a real run): exit 2" "$TBISECT" check "$REF" "$T/2026-cut.log"
sed -n '1,/attn_norm-1 = /p' "$T/2024-clean.log" | sed '$d' >"$T/cut-2024.log"
expect_error_msg 2 "$T/cut-2024.log" "the capture ends after 'norm-1', before the logits, with nothing after it; the last cell it printed is 'l_out-0' (L0.block)" \
	"the 2024 capture cut after layer 0: exit 2" "$TBISECT" check "$REF" "$T/cut-2024.log"
head -c 20000 "$T/2026-clean.log" >"$T/mid.log"
expect_error_msg 2 "$T/mid.log" "the dump was cut short" "a capture cut inside a line: exit 2" \
	"$TBISECT" check "$REF" "$T/mid.log"
expect_error_msg 2 "$T/2024-failed.log" \
	"line 57: llama.cpp did not run the model, so it printed no tensor: 'llama_model_load: error loading model: check_tensor_dims: tensor 'blk.1.ffn_down.weight' not found'" \
	"a 2024 run whose model did not load: exit 2 with llama.cpp's line" "$TBISECT" check "$REF" "$T/2024-failed.log"
expect_error_msg 2 "$T/2026-failed.log" "llama.cpp did not run the model, so it printed no tensor: 'llama_model_load: error loading model: missing tensor 'blk.1.ffn_down.weight''" \
	"a 2026 run whose model did not load: exit 2 with llama.cpp's line" "$TBISECT" check "$REF" "$T/2026-failed.log"
cat "$T/2024-clean.log" "$T/2024-eps.log" >"$T/two.log"
expect_error_msg 2 "$T/two.log" "another run of llama.cpp starts here ('build: 999 (KOBOLDCPP) with KCPP for KCP...')" \
	"two runs in one file: exit 2" "$TBISECT" check "$REF" "$T/two.log"
sed 's/blk\.0\.attn_output\.weight/blk.0.attn_outptu.weight/' "$T/2026-clean.log" >"$T/typo.log"
expect_error_msg 2 "$T/typo.log" "'attn_out-0' MUL_MAT's operand 'blk.0.attn_outptu.weight' is no weight llama.cpp's GGUF files name" \
	"an operand that names no weight: exit 2" "$TBISECT" check "$REF" "$T/typo.log"
check_that "nothing was written beside the captures" sh -c "! ls '$C' | grep -v -e '\.log\.gz$' -e '\.npz$' -e '^2026-logits$' | grep -q ."

# --- llama-debug --save-logits: its files as written, against the reference's last row ---
mkdir "$T/pytorch"
"$PY" -c 'import sys, numpy as np; np.load(sys.argv[1])["lm_head"][0, -1].astype("<f4").tofile(sys.argv[2])' \
	"$REF" "$T/pytorch/pytorch-tiny.bin" || bail_out "cannot write the reference's logits"
expect_exit 0 "llama-debug's logits against the reference's, with --vocab 259: exit 0" \
	"$TBISECT" check --json --no-history --vocab 259 "$T/pytorch" "$C/2026-logits"
json_is "raw logits pair in the logits cell" cells.0.tap logits
json_is "raw logits: top-1 agrees" logits.top1_agree 1
check_that "raw logits: the KL of an f16 KV cache is tiny" \
	sh -c "'$JSONQ' '$TAP_OUT' logits.kl_mean | awk '{ exit !(\$1 < 1e-6) }'"
expect_exit 0 "ls reads the token ids llama-debug saves beside the logits" \
	"$TBISECT" ls --json --vocab 259 "$C/2026-logits"
check_that "the prompt file is no tensor" sh -c "'$JSONQ' '$TAP_OUT' notes | grep -q 'prompt.txt: not a tensor file'"
head -c 1000 "$T/pytorch/pytorch-tiny.bin" >"$T/pytorch-short.bin"
expect_error_msg 2 "$T/pytorch-short.bin" "its 1000 bytes are not rows of --vocab 259 float32 logits" \
	"a size that is no whole rows of --vocab: exit 2 naming the file" \
	"$TBISECT" check --vocab 259 "$T/pytorch-short.bin" "$C/2026-logits"
expect_error_msg 2 "$T/pytorch/pytorch-tiny.bin" "--vocab N reads raw float32 logits" \
	"a .bin without --vocab: exit 2 saying what reads it" \
	"$TBISECT" check "$T/pytorch/pytorch-tiny.bin" "$C/2026-logits"
tap_done
