#!/bin/sh
# Settings changed in the view without a restart: :heads N gives the head
# count --heads would (the per-head view appears, the trees are paired and
# diagnosed again), and :save-map FILE writes the map M and y applied, as
# `check --map FILE` takes it.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup
T=$TAP_TMP

"$MKDEMO" --sub --bug rope-theta "$T/sref" "$T/scand" >/dev/null || bail_out "mkdemo failed"
"$MKDEMO" --bug rope-theta "$T/ref" "$T/cand" >/dev/null || bail_out "mkdemo failed"

tui_start h 100 40 -- sref scand
wait_for h "DIVERGED" || bail_out "the heatmap did not come up"
keys h : "goto L1.attn.q" Enter Enter C-f
expect_screen h "no --heads: no per-head view" "head count unknown: give --heads N"
keys h : "heads x" Enter
expect_screen h ":heads with no count says so" "heads: 'x' is not a head count (1 to 65536)"
keys h : "heads 8" Enter
expect_screen h ":heads 8: the per-head view, as with --heads 8" "per head  (8 heads of 8, --heads)"
expect_line h "one row per head" '^  X 7 +[0-9.]+ +[0-9.]+ +[0-9.]+$'
keys h : heads Enter
expect_screen h ":heads alone: the count shown" "heads: 8 (heads N sets another)"
keys h q q
expect_clean_exit h "q quits" 1

# The candidate under names no rule knows: net.blkN.{ln_a,sa,ln_b,ff}.
mkdir "$T/net"
for f in "$T"/cand/*.npy; do
	b=$(basename "$f" .npy)
	case "$b" in
	model.embed_tokens) n=net.tok ;;
	model.norm) n=net.final ;;
	lm_head) n=net.head ;;
	model.layers.*)
		rest=${b#model.layers.}
		l=${rest%%.*}
		case "${rest#"$l"}" in
		.input_layernorm) n=net.blk$l.ln_a ;;
		.self_attn) n=net.blk$l.sa ;;
		.post_attention_layernorm) n=net.blk$l.ln_b ;;
		.mlp) n=net.blk$l.ff ;;
		'') n=net.blk$l ;;
		*) continue ;;
		esac
		;;
	*) continue ;;
	esac
	cp "$f" "$T/net/$n.npy"
done

tui_start m 100 30 -- --allow-partial ref net
wait_for m "unpaired tensors" || bail_out "the unpaired screen did not come up"
keys m : "save-map map.json" Enter
expect_screen m ":save-map before a map is applied says how to get one" "save-map: no map applied (M suggests one, y applies it)"
keys m M
expect_screen m "M: the suggested map" "rules; y pairs the trees again with them"
keys m y
expect_screen m "y: the view is paired whole" "paired 23  unpaired 0/0"
keys m : "save-map map.json" Enter
expect_screen m ":save-map writes the map" "wrote map.json: check --map map.json pairs the trees as the view does"
keys m q
expect_clean_exit m "q quits" 1
check_that ":save-map: written whole, no temporary left" sh -c 'test -s "$1/map.json" && ! ls "$1" | grep -q tmp' x "$T"
expect_exit 1 "check --map with the saved map pairs the trees: exit 1, diverged" \
	"$TBISECT" check --json --no-history --map "$T/map.json" "$T/ref" "$T/net"
json_is "the saved map: 23 tensors paired" coverage.paired 23
json_is "the saved map: the first divergence, as in the view" first_divergence.cell L0.attn

tap_done
