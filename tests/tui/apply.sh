#!/bin/sh
# Settings changed in the view without a restart: :heads N gives the head
# count --heads would (the per-head view appears, the trees are paired and
# diagnosed again).
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup
T=$TAP_TMP

"$MKDEMO" --sub --bug rope-theta "$T/sref" "$T/scand" >/dev/null || bail_out "mkdemo failed"

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

tap_done
