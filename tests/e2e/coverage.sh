#!/bin/sh
# Coverage before conclusions (tbisect-dumps(5) Coverage): a pairing under half the
# smaller tree, or with layer tensors on both sides and none paired, stops
# every mode with exit 2 and the counts; --allow-partial goes on with a
# warning, the coverage in the JSON, and no cause or origin named.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

"$MKDEMO" --bug rope-style "$T/ref" "$T/cand" >/dev/null || bail_out "mkdemo failed"

# The candidate under a framework's own module names that no convention
# knows: only lm_head -> logits pairs.
mkdir "$T/maxtext"
for f in "$T"/cand/*.npy; do
	b=$(basename "$f" .npy)
	n=$(echo "$b" | sed -e 's/^model\.layers\.\([0-9]*\)\.input_layernorm$/net.blk\1.ln_a/' \
		-e 's/^model\.layers\.\([0-9]*\)\.self_attn$/net.blk\1.sa/' \
		-e 's/^model\.layers\.\([0-9]*\)\.post_attention_layernorm$/net.blk\1.ln_b/' \
		-e 's/^model\.layers\.\([0-9]*\)\.mlp$/net.blk\1.ff/' \
		-e 's/^model\.layers\.\([0-9]*\)$/net.blk\1/' -e 's/^model\.embed_tokens$/net.tok/' \
		-e 's/^model\.norm$/net.final/' -e 's/^lm_head$/logits/')
	cp "$f" "$T/maxtext/$n.npy"
done

expect_error_msg 2 "$T/maxtext" "no layer cell paired, 1 main cell in all (ref 23, cand 1; unmapped tensors: ref 0, cand 22)" \
	"check: 1 of 23 paired is refused with the counts" "$TBISECT" check "$T/ref" "$T/maxtext"
check_that "the message names the way out" grep -q -- "--map FILE (tbisect suggest-map $T/ref $T/maxtext writes one) or --allow-partial" "$TAP_ERR"
check_that "the message names the reference too" grep -q -- "$T/ref vs " "$TAP_ERR"
check_that "no report on stdout" test ! -s "$TAP_OUT"
expect_error_msg 2 "$T/maxtext" "no layer cell paired, 1 main cell in all" "check --json: refused the same way" \
	"$TBISECT" check --json "$T/ref" "$T/maxtext"
check_that "check --json: no report on stdout" test ! -s "$TAP_OUT"
expect_error_msg 2 "$T/maxtext" "no layer cell paired, 1 main cell in all" "the interactive view: refused before the terminal" \
	"$TBISECT" "$T/ref" "$T/maxtext"
check_that "no history was recorded for a refused pairing" test ! -d "$T/state/tbisect"

# --allow-partial: the report goes on, says so, and concludes nothing.
expect_exit 1 "--allow-partial: the report goes on (logits diverged)" \
	"$TBISECT" check --json --allow-partial "$T/ref" "$T/maxtext"
cp "$TAP_OUT" "$T/partial.json"
json_is "--allow-partial: coverage.paired" coverage.paired 1
json_is "--allow-partial: coverage.ref_tensors" coverage.ref_tensors 23
json_is "--allow-partial: coverage.cand_tensors" coverage.cand_tensors 23
json_is "--allow-partial: the first warning is the coverage" warnings.0.id coverage
json_is "--allow-partial: no cause is named" 'causes.#' 0
json_is "--allow-partial: no origin is named" origin null
json_is "--allow-partial: the first divergence is the one compared cell" first_divergence.cell logits
check_that "--allow-partial: the warning gives the counts" \
	sh -c "'$JSONQ' '$T/partial.json' warnings.0.text | grep -q 'no layer cell paired, 1 main cell in all'"
expect_exit 1 "--allow-partial, text report" "$TBISECT" check --no-history --allow-partial "$T/ref" "$T/maxtext"
check_that "text: the coverage warning comes first" grep -q '^warning (coverage): no layer cell paired, 1 main cell in all' "$TAP_OUT"
check_that "text: no cause named" grep -q '^likely causes: none named on a partial pairing' "$TAP_OUT"
check_that "text: no origin located" grep -q '^origin: not located: no layer cell paired, 1 main cell in all' "$TAP_OUT"
check_that "text: no 'everything matches' claim" sh -c "! grep -q 'everything matches' '$TAP_OUT'"
check_that "text: no tied-embeddings verdict" sh -c "! grep -q 'tied-embeddings' '$TAP_OUT'"

# The view under --allow-partial opens on the unpaired tensors, side by side.
printf ':save-display %s\nq\n:save-display %s\nq\n' "$T/unpaired.txt" "$T/heatmap.txt" >"$T/partial.script"
expect_exit 1 "the view under --allow-partial runs its script" env TERM=xterm LINES=24 COLUMNS=80 \
	TBISECT_SCRIPT="$T/partial.script" "$TBISECT" --no-history --allow-partial "$T/ref" "$T/maxtext"
check_that "the view opens on the unpaired tensors" grep -q '^unpaired tensors: ref 22, cand 22' "$T/unpaired.txt"
check_that "the unpaired screen gives the coverage" grep -q 'no layer cell paired, 1 main cell in all' "$T/unpaired.txt"
check_that "both trees side by side, each tensor with why" \
	grep -q '^- model\.embed_tokens  *? net\.blk0$' "$T/unpaired.txt"
check_that "the heatmap's banner gives the coverage" sh -c "tr '\\n' ' ' <'$T/heatmap.txt' | grep -q 'no layer cell paired, 1 main cell in all .*no cause is named'"
check_that "the heatmap names no cause" grep -q 'none named on a partial pairing' "$T/heatmap.txt"
printf 'u\n:save-display %s\nq\nq\n' "$T/full.txt" >"$T/full.script"
expect_exit 1 "u on a full pairing" env TERM=xterm LINES=24 COLUMNS=80 TBISECT_SCRIPT="$T/full.script" \
	"$TBISECT" --no-history "$T/ref" "$T/cand"
check_that "u: nothing unpaired" grep -q 'none: every tensor paired' "$T/full.txt"

# Half the tensors pair, but no layer tensor does: still refused.
mkdir "$T/few-ref" "$T/few-cand"
for b in model.embed_tokens model.norm lm_head model.layers.0 model.layers.1; do
	cp "$T/ref/$b.npy" "$T/few-ref/"
done
for b in model.embed_tokens model.norm lm_head; do
	cp "$T/cand/$b.npy" "$T/few-cand/"
done
cp "$T/cand/model.layers.0.npy" "$T/few-cand/blk_0.npy"
cp "$T/cand/model.layers.1.npy" "$T/few-cand/blk_1.npy"
expect_error_msg 2 "$T/few-cand" "no layer cell paired, 3 main cells in all (ref 5, cand 3; unmapped tensors: ref 0, cand 2)" \
	"3 of 5 paired but no layer tensor: refused" "$TBISECT" check "$T/few-ref" "$T/few-cand"

# --allow-partial goes on with little, never with nothing (tbisect(1) --allow-partial):
# a candidate none of whose names map gives no verdict at all.
mkdir "$T/nothing"
for f in "$T"/maxtext/*.npy; do [ "$(basename "$f")" = tokens.npy ] || cp "$f" "$T/nothing/x_$(basename "$f")"; done
expect_error_msg 2 "$T/nothing" "no cell paired (ref 23 tensors, cand 23; unmapped tensors: ref 0, cand 23)" \
	"--allow-partial with no cell paired: exit 2, not a match" \
	"$TBISECT" check --json --allow-partial --no-history "$T/ref" "$T/nothing"
check_that "no report on nothing" test ! -s "$TAP_OUT"
check_that "the message says why --allow-partial does not help" \
	grep -q -- "--allow-partial gives no verdict over nothing" "$TAP_ERR"
printf 'q\n:save-display %s\nq\n' "$T/nothing.txt" >"$T/nothing.script"
expect_exit 2 "the view on nothing paired: it opens (to pair with M, y), exit 2 on quitting" \
	env XDG_STATE_HOME="$T/nothing-state" TERM=xterm LINES=24 COLUMNS=80 TBISECT_SCRIPT="$T/nothing.script" \
	"$TBISECT" --allow-partial "$T/ref" "$T/nothing"
check_that "the view on nothing paired: no verdict, not MATCH" \
	sh -c "head -n 1 '$T/nothing.txt' | grep -q 'NO VERDICT' && ! grep -q MATCH '$T/nothing.txt'"
check_that "the view on nothing paired: no pass recorded" \
	sh -c "! ls '$T/nothing-state/tbisect' 2>/dev/null | grep -q ."

# Coverage counts main cells: sub-taps one side dumped and the other did
# not never lower it; they are listed as unpaired, with one note.
"$MKDEMO" --sub --bug rope-style "$T/sub-ref" "$T/sub-cand" >/dev/null || bail_out "mkdemo failed"
expect_exit 1 "sub-taps on one side only: no refusal" \
	"$TBISECT" check --json --no-history "$T/sub-ref" "$T/cand"
cp "$TAP_OUT" "$T/sub.json"
json_is "sub-taps: coverage.cells.paired" coverage.cells.paired 23
json_is "sub-taps: coverage.cells.ref" coverage.cells.ref 23
json_is "sub-taps: coverage.cells.cand" coverage.cells.cand 23
json_is "sub-taps: the ref's 7 sub-taps are unpaired" 'unpaired.ref.#' 28
check_that "sub-taps: the note counts them" sh -c "'$JSONQ' '$T/sub.json' coverage.note | grep -q '^28 sub-tap cells on one side only (ref 28, cand 0): listed as unpaired, not counted in the coverage$'"
json_is "sub-taps: no coverage warning" 'warnings.#' 0
expect_exit 1 "sub-taps, text report" "$TBISECT" check --no-history "$T/sub-ref" "$T/cand"
check_that "text: the note on sub-taps" grep -q '^note: 28 sub-tap cells on one side only' "$TAP_OUT"

# What is fine: a full pairing, one model-level tensor against another,
# and a smaller candidate that pairs whole.
expect_exit 1 "a full pairing is checked" "$TBISECT" check --json --no-history "$T/ref" "$T/cand"
json_is "a full pairing: coverage 23 of 23" coverage.paired 23
json_is "a full pairing: coverage.cells.paired" coverage.cells.paired 23
check_that "a full pairing: no note on sub-taps" sh -c "! grep -q '\"note\"' '$TAP_OUT'"
json_is "a full pairing: first_divergence.cell" first_divergence.cell L0.attn
json_is "a full pairing: no coverage warning" 'warnings.#' 0
mkdir "$T/lg-ref" "$T/lg-cand"
cp "$T/ref/lm_head.npy" "$T/lg-ref/"
cp "$T/cand/lm_head.npy" "$T/lg-cand/logits.npy"
expect_exit 1 "logits against logits: no layer tensor on either side is fine" \
	"$TBISECT" check --no-history "$T/lg-ref" "$T/lg-cand"
mkdir "$T/blocks"
for l in 0 1 2 3; do cp "$T/cand/model.layers.$l.npy" "$T/blocks/"; done
cp "$T/cand/lm_head.npy" "$T/blocks/"
expect_exit 1 "5 block and logits tensors against 23: the smaller side pairs whole" \
	"$TBISECT" check --json --no-history "$T/ref" "$T/blocks"
json_is "the smaller side: coverage.paired 5" coverage.paired 5

# A why-text states no fact about a cell that was not compared.
"$MKDEMO" --bug tied-embeddings "$T/tied-ref" "$T/tied-cand" >/dev/null || bail_out "mkdemo failed"
rm "$T/tied-cand/model.norm.npy"
expect_exit 1 "logits diverged, final_norm not dumped by the candidate" \
	"$TBISECT" check --json --no-history "$T/tied-ref" "$T/tied-cand"
cp "$TAP_OUT" "$T/tied.json"
check_that "no cause claims final_norm matches" sh -c "! grep -q 'final_norm matches' '$T/tied.json'"
check_that "no cause claims everything matches" sh -c "! grep -q 'everything matches' '$T/tied.json'"
check_that "lm-head says final_norm was not compared" grep -q 'final_norm was not dumped on both sides' "$T/tied.json"
"$MKDEMO" --bug mlp-activation "$T/act-ref" "$T/act-cand" >/dev/null || bail_out "mkdemo failed"
rm "$T"/act-cand/model.layers.0.post_attention_layernorm.npy
expect_exit 1 "mlp diverged, its input norm not dumped by the candidate" \
	"$TBISECT" check --json --no-history "$T/act-ref" "$T/act-cand"
json_is "the first divergence is L0.mlp" first_divergence.cell L0.mlp
check_that "no cause claims the MLP's input norm is intact" sh -c "! grep -q 'input norm intact\|input norm matches\|input norm within' '$TAP_OUT'"
check_that "mlp-activation says the input norm was not compared" \
	sh -c "'$JSONQ' '$TAP_OUT' causes.0.why | grep -q 'its input norm was not dumped on both sides'"

tap_done
