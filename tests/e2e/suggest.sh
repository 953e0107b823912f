#!/bin/sh
# tbisect suggest-map: map rules for the names that do not pair, from the
# trees' structure; what it prints pairs the trees, with confidence and
# evidence per rule; two trees with nothing in common exit 2.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

"$MKDEMO" --bug rope-style "$T/ref" "$T/cand" >/dev/null || bail_out "mkdemo failed"

# rename SRC DST PREFIX FIRST: SRC's HF names as PREFIX.blkN.{ln_a,sa,ln_b,ff},
# PREFIX.blkN, PREFIX.{tok,final,head}, layers numbered from FIRST.
rename() {
	mkdir "$2"
	for f in "$1"/*.npy; do
		b=$(basename "$f" .npy)
		case "$b" in
		tokens) continue ;;
		model.embed_tokens) n=$3.tok ;;
		model.norm) n=$3.final ;;
		lm_head) n=$3.head ;;
		model.layers.*)
			rest=${b#model.layers.}
			l=${rest%%.*}
			tap=${rest#"$l"}
			l=$((l + $4))
			case "$tap" in
			.input_layernorm) n=$3.blk$l.ln_a ;;
			.self_attn) n=$3.blk$l.sa ;;
			.post_attention_layernorm) n=$3.blk$l.ln_b ;;
			.mlp) n=$3.blk$l.ff ;;
			'') n=$3.blk$l ;;
			esac
			;;
		esac
		cp "$f" "$2/$n.npy"
	done
}
rename "$T/cand" "$T/net" net 0
rename "$T/cand" "$T/net1" net 1
rename "$T/ref" "$T/refnet" ref 0

# suggested DESC REF CAND: suggest-map's output pairs REF and CAND whole,
# and the first divergence is the port's, L0.attn.
suggested() {
	TAP_RC=0
	"$TBISECT" suggest-map "$2" "$3" >"$T/map.json" 2>"$TAP_ERR" || TAP_RC=$?
	check_that "$1: suggest-map exits 0 ($TAP_RC)" test "$TAP_RC" -eq 0
	expect_exit 1 "$1: the map pairs the trees" "$TBISECT" check --json --no-history --map "$T/map.json" "$2" "$3"
	json_is "$1: 23 tensors paired" coverage.paired 23
	json_is "$1: none unpaired in the candidate" 'unpaired.cand.#' 0
	json_is "$1: the first divergence L0.attn" first_divergence.cell L0.attn
}

suggested "a candidate under its own names" "$T/ref" "$T/net"
check_that "every rule has a confidence in [0, 1]" \
	sh -c "n=\$('$JSONQ' '$T/map.json' 'rules.#'); i=0; while [ \$i -lt \$n ]; do c=\$('$JSONQ' '$T/map.json' rules.\$i.confidence); awk -v c=\"\$c\" 'BEGIN { exit !(c >= 0 && c <= 1) }' || exit 1; i=\$((i + 1)); done"
check_that "the attention rule's evidence gives the cosine against the other tree" \
	sh -c "grep -q 'net.blk#.sa: 4 of their layers have the element count of the other tree.s attn there, cosine' '$T/map.json'"
check_that "the layer comes from the name" grep -q '"layer":	"\\\\1"' "$T/map.json"

TAP_RC=0
"$TBISECT" suggest-map "$T/ref" "$T/net" 2>/dev/null | "$TBISECT" check --no-history --map - "$T/ref" "$T/net" >"$TAP_OUT" 2>"$TAP_ERR" || TAP_RC=$?
check_that "suggest-map | check --map -: exit 1, diverged ($TAP_RC)" test "$TAP_RC" -eq 1
check_that "suggest-map | check --map -: first divergence L0.attn" grep -q '^first divergence: L0.attn$' "$TAP_OUT"

suggested "layers numbered from 1" "$T/ref" "$T/net1"
check_that "numbered from 1: one rule per layer" grep -F -q 'blk1\\.sa$' "$T/map.json"
check_that "numbered from 1: net.blk1.sa is layer 0" \
	sh -c "grep -F -A1 'blk1\\\\.sa\$' '$T/map.json' | grep -q '\"layer\":	0,'"

suggested "neither tree's names known (the trees' own structure)" "$T/refnet" "$T/net"
check_that "structure: the evidence names the residual identity" grep -q 'block = previous block + two others' "$T/map.json"

# In the interactive view: M shows the suggestion, y pairs the trees again
# with it (the view starts on the partial pairing under --allow-partial).
printf 'M\n:save-display %s\ny\n:save-display %s\n:export %s\nq\n' "$T/shown.txt" "$T/applied.txt" "$T/applied.json" \
	>"$T/suggest.script"
expect_exit 1 "the view: M, then y" env TERM=xterm LINES=30 COLUMNS=100 TBISECT_SCRIPT="$T/suggest.script" \
	"$TBISECT" --no-history --allow-partial "$T/ref" "$T/net"
check_that "M: the suggested map, with how to apply it" grep -q '^  8 rules; y pairs the trees again with them' "$T/shown.txt"
check_that "M: each rule with its cell and confidence" grep -q '^  \^net\\.blk(\[0-9\]+)\\.sa\$  ->  layer from the name, attn   confidence 0\.88$' "$T/shown.txt"
check_that "y: the view is paired whole again" grep -q 'first divergence L0.attn pos 1  paired 23  unpaired 0/0' "$T/applied.txt"
TAP_OUT=$T/applied.json
json_is "y: the exported report covers every tensor" coverage.paired 23
TAP_OUT=$T/.stdout
check_that "y: the dump trees were not written" test "$(find "$T/net" -newer "$T/suggest.script" | wc -l)" -eq 0

# Nothing to pair the names with.
mkdir "$T/other"
for k in x y z; do cp "$T/ref/tokens.npy" "$T/other/unrelated_$k.npy"; done
expect_error_msg 2 "$T/other" "have nothing in common" "two trees with nothing in common: exit 2" \
	"$TBISECT" suggest-map "$T/ref" "$T/other"
# ... so check does not send the user there
expect_exit 2 "check of them: exit 2" "$TBISECT" check "$T/ref" "$T/other"
check_that "... without the suggest-map hint" sh -c "! grep -q 'suggest-map $T' '$TAP_ERR'"
check_that "... saying no rule would pair more" grep -q "suggest-map finds no rule that would pair more" "$TAP_ERR"

# Everything pairs already: an empty map, said so.
TAP_RC=0
"$TBISECT" suggest-map "$T/ref" "$T/cand" >"$TAP_OUT" 2>"$TAP_ERR" || TAP_RC=$?
check_that "a full pairing: exit 0 ($TAP_RC)" test "$TAP_RC" -eq 0
json_is "a full pairing: no rule" 'rules.#' 0
check_that "a full pairing: stderr says there is nothing to suggest" grep -q 'nothing to suggest' "$TAP_ERR"

tap_done
