#!/bin/sh
# A multimodal model's towers in the interactive view (tmux): the text
# decoder's grid first, t shows the next grid (the vision tower's, then
# the text decoder's again), :tower NAME and :tower text pick one, and a
# tower the trees do not hold is refused.  The trees are transformers v5
# dumps (tests/pymodel/layouts.py) whose vision tower diverges at block 1.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup
need_python numpy
"$PY" "$top_srcdir/tests/pymodel/model.py" --seed 3 --layers 2 --seq 16 --layout v5 --cand-layout v5-tower-bug \
	"$TAP_TMP/a" "$TAP_TMP/b" || bail_out "model.py failed"

tui_start main 100 30 -- a b
expect_screen main "the text decoder's grid first: it matches" "no cell diverged"
keys main t
expect_screen main "t: the vision tower's grid" "vision tower"
expect_screen main "the vision tower diverges at block 1's attention" "first divergence L1.attn"
keys main t
expect_gone main "t again: back to the text decoder's grid" "vision tower"
expect_screen main "the text grid matches again" "no cell diverged"
keys main : 'tower vision' Enter
expect_screen main ":tower vision" "first divergence L1.attn"
keys main : 'tower text' Enter
expect_gone main ":tower text" "vision tower"
keys main : 'tower audio' Enter
expect_screen main ":tower audio: not held" "tower audio: not held by both trees"
keys main q
expect_clean_exit main "quit on the text grid: exit 0" 0
tap_done
