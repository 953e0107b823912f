#!/bin/sh
# Replay in the interactive view (tmux): the causes pane says a cause was
# confirmed by replay, or which taps a replay needs; R on the detail screen
# replays the cell's op, on the first divergence (confirmed) and on a cell
# after it whose own op computes as the reference's (its inputs differ).
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup
MKDEMO=$(cd "$top_builddir" && pwd)/samples/mkdemo

"$MKDEMO" --replay --layers 2 --bug rope-style "$TAP_TMP/ref" "$TAP_TMP/cand" >/dev/null || bail_out "mkdemo failed"
mkdir "$TAP_TMP/nok"
cp "$TAP_TMP/cand"/*.npy "$TAP_TMP/nok/"
rm "$TAP_TMP/nok"/*attn.k_rope.npy

tui_start r 110 32 -- ref cand
wait_for r "DIVERGED" || bail_out "the heatmap did not come up"
keys r c
expect_screen r "causes pane: rope-style confirmed by replay" "confirmed by replay: interleaved pairs (2i, 2i+1) reproduces the candidate"
keys r Escape f Enter
expect_screen r "the first divergence's detail" "L0.attn.q_rope  diverged"
expect_screen r "the footer offers R" "R replay"
keys r R
expect_screen r "R: confirmed, with the cause" "confirmed: rope-style"
expect_screen r "R: the variant and what the reference computes" "reference computes RoPE rotate-half, theta 1e+04"
keys r Escape l l Enter
expect_screen r "attn.core, after the first divergence" "L0.attn.core  diverged"
keys r R
expect_screen r "R on attn.core: the op computes as the reference's" "the candidate computes it as the reference does"
expect_screen r "R on attn.core: the difference comes from its inputs" "its difference comes from its inputs"
keys r q q
expect_clean_exit r "quit: exit 1 (diverged)" 1

tui_start n 110 32 -- ref nok
wait_for n "DIVERGED" || bail_out "the heatmap did not come up"
keys n c
expect_screen n "causes pane: the taps a replay needs" "replaying RoPE needs attn.q and attn.k before RoPE"
keys n q q
expect_clean_exit n "quit: exit 1" 1
tap_done
