#!/bin/sh
# End to end: the layouts of the seeds' own dumpers pair with no map.
# tests/pymodel/layouts.py writes the numpy decoder's taps as each tool
# does (reconstructions: each writer cites the tool's source lines):
# modular's debug-model dumper (post_embed, layer_NN, post_final_norm,
# last_logits of the last position only, prompt_tokens), MaxText dumped
# with Flax capture_intermediates (npz of flatten_dict keys, an npy tree of
# __call__/0, and scan-stacked), transformers v5 with a vision tower, and
# transformers' model debugger (leaf modules only: attn and mlp are
# o_proj's and down_proj's outputs).
# Each is checked against the Hugging Face tree of the same model, clean
# and with a bug whose first divergence is known.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
need_python numpy
M=$top_srcdir/tests/pymodel/model.py
T=$TAP_TMP

# pair LAYOUT OUT [ARGS]: the HF tree in $T/ref-LAYOUT, LAYOUT's in OUT
pair() {
	_l=$1 _o=$2
	shift 2
	rm -rf "$T/ref-$_l" "$_o"
	"$PY" "$M" --seed 3 --layers 2 --seq 16 --cand-layout "$_l" "$@" "$T/ref-$_l" "$_o"
}

first_is() {
	_got="L$(json_get first_divergence.layer).$(json_get first_divergence.tap)"
	if [ "$_got" = "$2" ]; then ok "$1"; else not_ok "$1" "got $_got, expected $2"; fi
}

# --- modular's debug-model dumper ---
pair modular "$T/mod"
expect_exit 0 "modular: ls" "$TBISECT" ls "$T/mod"
check_that "modular: nothing unmapped" grep -q "^6 tensors, 0 unmapped$" "$TAP_OUT"
check_that "modular: layer_01 is L1.block" grep -q '^layer_01  *L1.block ' "$TAP_OUT"
check_that "modular: prompt_tokens are the token ids" grep -q '^prompt_tokens  *(token ids)' "$TAP_OUT"
expect_exit 0 "modular: clean against HF matches" "$TBISECT" check --json "$T/ref-modular" "$T/mod"
json_is "modular: every main cell of the smaller side paired" coverage.cells.paired 5
LAST=$(($(json_get 'cells.#') - 1))
json_is "modular: last_logits read at HF's last position" "cells.$LAST.status" match
json_is "modular: the logits cell is partial" "cells.$LAST.partial" true
pair modular "$T/tok" --bug tokenizer
expect_exit 1 "modular: a changed token diverges" "$TBISECT" check --json "$T/ref-modular" "$T/tok"
json_is "modular: prompt_tokens feed the token check" warnings.0.id tokenizer
pair modular-max "$T/max" --bug lm-head
expect_exit 1 "modular (MAX side, no prompt_tokens): lm-head bug diverges" \
	"$TBISECT" check --json "$T/ref-modular-max" "$T/max"
json_is "modular: first divergence at the logits" first_divergence.tap logits
expect_exit 1 "modular on both sides: lm-head bug" "$TBISECT" check "$T/mod" "$T/max"
check_that "modular on both sides: the last position only, said" grep -q 'partial: the last position only (512 values)' "$TAP_OUT"
check_that "modular on both sides: KL of the one position" grep -q 'logits: KL mean' "$TAP_OUT"

# --- MaxText dumped with Flax capture_intermediates ---
for L in flax flax-tree flax-scan; do
	O=$T/$L
	[ "$L" = flax-tree ] || O=$T/$L.npz
	pair "$L" "$O" --replay
	expect_exit 0 "$L: clean against HF (replay taps) matches" "$TBISECT" check --json "$T/ref-$L" "$O"
	json_is "$L: 13 main cells paired" coverage.cells.paired 13
	json_is "$L: nothing of it unpaired (Dropout, the model's own output ignored)" 'unpaired.cand.#' 0
	json_is "$L: [S, heads, d] queries read in HF's layout" cells.2.status match
done
expect_exit 0 "flax: ls" "$TBISECT" ls "$T/flax.npz"
check_that "flax: self_attention/out is the output projection" \
	grep -q '^intermediates/decoder/layers_0/self_attention/out/__call__  *L0.attn.o ' "$TAP_OUT"
check_that "flax: Dropout is no cell" grep -q '^intermediates/decoder/layers_1/Dropout_0/__call__  *(input)' "$TAP_OUT"
pair flax "$T/rope.npz" --replay --bug rope-style
expect_exit 1 "flax: rope-style diverges" "$TBISECT" check --json "$T/ref-flax" "$T/rope.npz"
first_is "flax: first divergence at the rotated queries" L0.attn.q_rope
json_is "flax: the cell is L0.attn.q_rope" cells.5.tap attn.q_rope
json_is "flax: its layout said" cells.5.layout "[S, heads, d] read as [heads, S, d]"
pair flax-scan "$T/eps.npz" --bug norm-epsilon
expect_exit 1 "flax-scan: norm-epsilon diverges" "$TBISECT" check --json "$T/ref-flax-scan" "$T/eps.npz"
first_is "flax-scan: first divergence at layer 0's input norm" L0.attn_norm

# --- transformers' model debugger: leaf modules only ---
pair hfdebug "$T/hfd" --subtaps
expect_exit 0 "model debugger: clean against HF matches" "$TBISECT" check --json "$T/ref-hfdebug" "$T/hfd"
json_is "model debugger: every reference tensor pairs" 'unpaired.ref.#' 0
json_is "model debugger: cell 6 is L0.attn" cells.6.tap attn
json_is "model debugger: ... o_proj's output" cells.6.cand_name LlamaForCausalLM.model.layers.0.self_attn.o_proj_outputs
json_is "model debugger: cell 11 is L0.mlp" cells.11.tap mlp
json_is "model debugger: ... down_proj's output" cells.11.cand_name LlamaForCausalLM.model.layers.0.mlp.down_proj_outputs
json_is "model debugger: ... and matches" cells.11.status match

# --- transformers v5, a vision tower beside the text model ---
pair v5 "$T/v5"
expect_exit 0 "v5: clean against HF matches" "$TBISECT" check --json "$T/ref-v5" "$T/v5"
json_is "v5: the text grid pairs whole" coverage.cells.paired 13
json_is "v5: the tower's 12 tensors are set apart" 'unpaired.cand.#' 12
json_is "v5: no tower compared: the reference has none" 'towers.#' 0
expect_exit 0 "v5: text report" "$TBISECT" check "$T/ref-v5" "$T/v5"
check_that "v5: the tower's tensors told as one line" \
	grep -q "^  12 tensors of towers (no cells of the text decoder: --tower NAME compares a tower)" "$TAP_OUT"
expect_exit 0 "ls: a tower's tensors in its grid" "$TBISECT" ls "$T/v5"
check_that "ls: model.visual.blocks.1.attn is vision:L1.attn" grep -q '^model.visual.blocks.1.attn  *vision:L1.attn ' "$TAP_OUT"
check_that "ls: the merger is the vision tower's logits" grep -q '^model.visual.merger  *vision:logits ' "$TAP_OUT"
pair v5 "$T/v5b" --bug mlp-activation
expect_exit 1 "v5: mlp-activation diverges" "$TBISECT" check --json "$T/ref-v5" "$T/v5b"
first_is "v5: first divergence at layer 0's MLP" L0.mlp
expect_exit 0 "v5 against itself: towers never pair into text cells" "$TBISECT" check --json "$T/v5" "$T/v5"
json_is "v5 against itself: 13 cells" "cells.#" 13

# --- a tower compared on its own ---
rm -rf "$T/va" "$T/vb"
"$PY" "$M" --seed 3 --layers 2 --seq 16 --layout v5 --cand-layout v5-tower-bug "$T/va" "$T/vb"
expect_exit 0 "towers: the text grid matches, its exit code" "$TBISECT" check --json "$T/va" "$T/vb"
json_is "towers: the grid reported is the text decoder's" tower null
json_is "towers: the vision tower compared beside it" towers.0.tower vision
json_is "towers: its verdict" towers.0.verdict diverged
json_is "towers: its first divergence" towers.0.first_divergence L1.attn
json_is "towers: its 12 cells" towers.0.cells 12
json_is "towers: said as a warning" warnings.0.id tower
expect_exit 1 "--tower vision: the tower's grid diverges" "$TBISECT" check --tower vision --json "$T/va" "$T/vb"
json_is "--tower vision: the grid reported" tower vision
first_is "--tower vision: first divergence at block 1's attention" L1.attn
json_is "--tower vision: the patch embedding is its embed" cells.0.status match
json_is "--tower vision: 12 cells, nothing unpaired" 'unpaired.cand.#' 0
expect_exit 1 "--tower vision: text report" "$TBISECT" check --tower vision "$T/va" "$T/vb"
check_that "--tower vision: says the grid" grep -q '^grid: the vision tower$' "$TAP_OUT"
check_that "--tower vision: per patch, 9 of them" grep -q 'first bad position: 0 of 9' "$TAP_OUT"
expect_error_msg 2 "$T/ref-v5" "no tensor of a vision tower" "--tower vision on a tree without one" \
	"$TBISECT" check --tower vision "$T/ref-v5" "$T/v5"
expect_exit 2 "--tower with an unknown name" "$TBISECT" check --tower retina "$T/va" "$T/vb"
check_that "--tower: names the towers there are" grep -q "'retina' is not a tower (vision, audio)" "$TAP_ERR"

# --- bad input: a Flax key of an unknown module is listed, never paired ---
"$PY" -c "import numpy as np; np.savez('$T/odd.npz', **{'intermediates/decoder/layers_0/frobnicate/__call__': np.ones((1, 4, 8), np.float32), 'intermediates/decoder/layers_0/__call__': np.ones((1, 4, 8), np.float32)})"
expect_exit 0 "unknown Flax module: ls lists it" "$TBISECT" ls "$T/odd.npz"
check_that "unknown Flax module: unmapped" grep -q 'frobnicate/__call__  *(unmapped)' "$TAP_OUT"
tap_done
