#!/bin/sh
# A sketch in place of the reference in the interactive view (tmux): the
# heatmap finds the first divergence from the estimates, the detail screen
# says its numbers are estimated with their bound, and R says a sketch
# cannot be replayed.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup
MKDEMO=$(cd "$top_builddir" && pwd)/samples/mkdemo

"$MKDEMO" --layers 2 --seq 32 --bug rope-style "$TAP_TMP/ref" "$TAP_TMP/cand" >/dev/null || bail_out "mkdemo failed"
"$TBISECT" sketch "$TAP_TMP/ref" -o "$TAP_TMP/ref.tbsk" 2>/dev/null || bail_out "tbisect sketch failed"

tui_start s 110 32 -- ref.tbsk cand
wait_for s "DIVERGED" || bail_out "the heatmap did not come up"
expect_screen s "the first divergence from the sketch" "first divergence L0.attn pos 1"
keys s f Enter
expect_screen s "detail: the estimate's reason" "estimated from a sketch, within ["
expect_screen s "detail: what needs the values" "the worst element, max_abs and allclose need the values"
keys s R
expect_screen s "R: no replay from a sketch" "no replay from a sketch"
keys s q q
expect_clean_exit s "quit: exit 1 (diverged)" 1
tap_done
