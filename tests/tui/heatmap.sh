#!/bin/sh
# The heatmap screen in a real terminal (tmux): labels, legend, header,
# cursor movement, first divergence, next/previous diverged, metric cycling,
# sub-tap folding, scrolling a 200-layer model.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup

"$TBGEN" --naming hf --bug scale@L1.attn "$TAP_TMP/ref" "$TAP_TMP/cand" || bail_out "tbgen failed"
"$TBGEN" --sub --bug noise@L2.mlp.up "$TAP_TMP/sref" "$TAP_TMP/scand" || bail_out "tbgen failed"
"$TBGEN" --layers 200 --seq 4 --hidden 8 --vocab 16 --bug pos@L150.mlp:1 "$TAP_TMP/bref" "$TAP_TMP/bcand" ||
	bail_out "tbgen failed"

tui_start main 80 24 -- ref cand
expect_screen main "header: verdict and first divergence" "DIVERGED  first divergence L1.attn pos 0"
expect_screen main "header: pair counts" "paired 23  unpaired 0/0"
expect_screen main "header: tolerance and paths" "atol 0.0001 rtol 0.0001 diverge 0.01  ref ref  cand cand"
expect_line main "column labels in forward order" '^ +attn_norm +attn +mlp_norm +mlp +block$'
expect_line main "row labels embed, L0..L3, final_norm, logits" '^embed '
# every_row_labelled: each row of the model has its label on the screen.
every_row_labelled() {
	for _r in L0 L1 L2 L3 final_norm logits; do
		has_line "^$_r " || return 1
	done
}
expect_on main "every layer row is labelled" "a row label is missing" every_row_labelled
expect_screen main "legend marks match and diverged thresholds" "rel_l2 1e-08 .....~~~XXXX 1e+01  .match<=1e-04 ~close Xdiverged>1e-02 -missing"
expect_line main "cells carry glyph and value" '^L1 +\. 0\.0e\+00  X 5\.0e-01  X 2\.'
expect_screen main "the cursor starts on embed" "embed match: every element within allclose"

keys main f
expect_screen main "f: status line names the first divergence" "L1.attn diverged: rel_l2 0.5 > diverge 0.01"
expect_line main "f: the cursor marker sits on L1.attn" '^L1 +\. 0\.0e\+00 >X 5\.0e-01'
keys main n
expect_screen main "n: next diverged cell" "L1.mlp_norm diverged"
keys main N
expect_screen main "N: previous diverged cell" "L1.attn diverged"
keys main j l
expect_screen main "j l: move down and right" "L2.mlp_norm diverged"
keys main G
expect_screen main "G: last row" "logits diverged"
keys main g
expect_screen main "g: first row" "embed match"
keys main m
expect_screen main "m: metric cosine, legend on 1-cosine" "1-cosine 1e-12"
expect_line main "m: cells show the cosine" '^L0 +\.  1\.0000'
keys main m m
expect_line main "m: a long scale name keeps the whole legend in 80 columns" '^\|norm_ratio-1\| 1e-08 .* \.<=1e-04 ~close X>1e-02 -missing$'
keys main m m
expect_screen main "m: metric added, legend on amplification" "amplification 1e-02"
keys main m
expect_screen main "m cycles back to rel_l2" "rel_l2 1e-08"
# An SGR mouse report (xterm-256color's kmous): press and release at column 25, line 8.
tm send-keys -t tb:main -l "$(printf '\033[<0;25;8M')"
tm send-keys -t tb:main -l "$(printf '\033[<0;25;8m')"
expect_screen main "a mouse click selects the cell under it" "L2.attn diverged: rel_l2"
# The wheel (SGR buttons 64 and 65) moves as Up and Down do, a few rows a notch.
tm send-keys -t tb:main -l "$(printf '\033[<65;25;8M')"
expect_gone main "the wheel down moves the cursor down" "L2.attn diverged: rel_l2"
tm send-keys -t tb:main -l "$(printf '\033[<64;25;8M')"
expect_screen main "the wheel up moves it back" "L2.attn diverged: rel_l2"
tm resize-window -t tb:main -x 80 -y 16
keys main Enter
expect_screen main "the detail of L2.attn, on a screen too short for it" "statistic          ref"
tm send-keys -t tb:main -l "$(printf '\033[<65;25;8M')"
expect_gone main "the wheel scrolls the detail screen too" "(Esc/q back, Up/Down scroll)"
keys main Escape
tm resize-window -t tb:main -x 80 -y 24
keys main q
expect_clean_exit main "q quits with exit 1 (diverged), terminal restored" 1

# --no-mouse: the terminal keeps the mouse; a click selects nothing.
tui_start nomouse 80 24 -- --no-mouse ref cand
wait_for nomouse "DIVERGED" || bail_out "the heatmap did not come up"
# mouse_any NAME: the pane of window NAME has asked tmux for mouse reports.
mouse_any() {
	test "$(tm display -p -t "tb:$1" '#{mouse_any_flag}')" = 1
}
check_that "--no-mouse: the view asks the terminal for no mouse reports" \
	test "$(tm display -p -t tb:nomouse '#{mouse_any_flag}')" = 0
keys nomouse : "set mouse" Enter
if wait_until mouse_any nomouse; then ok ":set mouse turns the reports on"; else not_ok ":set mouse turns the reports on" "no mouse reports"; fi
keys nomouse q
expect_clean_exit nomouse "--no-mouse: q quits" 1

tui_start sub 80 24 -- sref scand
wait_for sub "DIVERGED" || bail_out "the heatmap did not come up"
expect_line sub "sub-taps are columns in forward order" '^ +attn_norm +attn\.q +attn\.k +attn\.v +attn +mlp_norm +>$'
keys sub f
expect_screen sub "first divergence in a sub-tap" "L2.mlp.up diverged"
expect_line sub "the column scrolls to show the sub-tap, labels stay" '^ +< ?.*mlp\.up'
# The model-level rows' one cell is in the first column: scrolled past it,
# they point left instead of sitting under another tap; on them, it shows.
expect_line sub "scrolled: embed points left to its cell" '^embed +<$'
expect_line sub "scrolled: final_norm points left too" '^final_norm<$'
keys sub G
expect_line sub "the cursor on logits: its cell in the first column" '^ +attn_norm +attn\.q'
expect_line sub "the cursor on logits: drawn there" '^logits +>X '
keys sub f
keys sub z
expect_line sub "z folds the sub-taps" '^ +attn_norm +attn +mlp_norm +mlp +block$'
expect_screen sub "folded: the cursor moves to a shown column" "sub-taps folded"
expect_screen sub "folding moves the cursor to the parent tap" "L2.mlp diverged"
keys sub z
expect_line sub "z unfolds, the cursor stays on mlp" '^ +<.* mlp\.gate +mlp\.up +mlp +>$'

keys sub q
expect_clean_exit sub "quit from the sub-tap view" 1

tui_start big 80 24 -- bref bcand
wait_for big "DIVERGED" || bail_out "the heatmap did not come up"
expect_screen big "200 layers: the first rows and a row counter (one line for the banner)" "1-15/203"
keys big f
expect_screen big "200 layers: f scrolls to the first divergence" "L150.mlp diverged"
expect_line big "200 layers: the row label of L150 stays beside its cells" '^L150 .*>X'
expect_line big "200 layers: the column labels stay on top" '^1[0-4][0-9]-1[5-9][0-9]/203 +attn_norm +attn +mlp_norm +mlp +block$'
keys big G
expect_line big "200 layers: G reaches logits" '^logits '
keys big PageUp
expect_screen big "PgUp scrolls back a page" "L186.mlp diverged"
keys big q
expect_clean_exit big "quit from the 200-layer view" 1

tap_done
