#!/bin/sh
# Multi-step dumps in the interactive view (tmux): the header says which
# forward step is compared, ] and [ move to the next and previous step
# (the trees are opened again at it), the ends say there is no further
# step, and a dump stitched against a one-pass reference says its steps
# are stitched.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup
GEN=$(cd "$top_builddir" && pwd)/tests/layoutgen
MKDEMO=$(cd "$top_builddir" && pwd)/samples/mkdemo

"$MKDEMO" --sub --layers 2 --seq 8 "$TAP_TMP/ref" "$TAP_TMP/ok" >/dev/null || bail_out "mkdemo failed"
"$GEN" npy "$TAP_TMP/ok" "$TAP_TMP/a" 2 5,1,1,1 || bail_out "layoutgen failed"
"$GEN" sglang "$TAP_TMP/ok" "$TAP_TMP/b" 1 5,1,1,1 2 || bail_out "layoutgen failed"

tui_start main 100 30 -- a b
expect_screen main "header: the first step by default" "step 0 of 0..3"
expect_screen main "step 0 matches" "no cell diverged"
keys main ']'
expect_screen main "]: the next step" "step 1 of 0..3"
keys main ']'
expect_screen main "]: step 2, whose decode buffers are stale in b" "step 2 of 0..3"
expect_screen main "step 2 diverges (b holds step 1's tensors)" "DIVERGED"
keys main '[' '['
expect_screen main "[ [: back to step 0" "step 0 of 0..3"
keys main '['
expect_screen main "[ at step 0: no step before" "no step -1: the dump has steps 0..3"
keys main q
expect_clean_exit main "quit at step 0: exit 0" 0

tui_start stitched 100 30 -- ref a
expect_screen stitched "against a one-pass reference the steps are stitched" "steps stitched"
expect_screen stitched "stitched: the correct port matches" "no cell diverged"
keys stitched ']'
expect_screen stitched "]: no single step to move to" "no single step to move to"
keys stitched q
expect_clean_exit stitched "quit: exit 0" 0
tap_done
