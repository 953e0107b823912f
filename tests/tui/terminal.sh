#!/bin/sh
# The terminal side of the TUI in tmux: resizing relayouts (100x30 and
# back, too small), mono rendering with NO_COLOR, 8 and 256 colors, and a
# restored terminal after q, Ctrl-C, SIGTERM and a crash signal; a clear
# message when there is no terminal at all; --watch reloads a changed tree.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup

"$TBGEN" --bug scale@L1.attn "$TAP_TMP/ref" "$TAP_TMP/cand" || bail_out "tbgen failed"
"$TBGEN" --sub --bug noise@L2.mlp.up "$TAP_TMP/sref" "$TAP_TMP/scand" || bail_out "tbgen failed"

expect_error_msg 2 "tbisect check" "the interactive view needs a terminal on stdin and stdout" \
	"no terminal: one line pointing to 'tbisect check', exit 2" "$TBISECT" "$TAP_TMP/ref" "$TAP_TMP/cand"
expect_error_msg 2 "nosuch" "" "a bad tree fails before the screen opens" "$TBISECT" "$TAP_TMP/nosuch" "$TAP_TMP/cand"

# A terminal without cursor addressing, or one curses does not know, is
# refused as no terminal is (not a blank screen that takes keys).
tui_start dumb 80 24 TERM=dumb -- ref cand
expect_clean_exit dumb "TERM=dumb: exit 2" 2
check_that "TERM=dumb: one line pointing to 'tbisect check'" \
	grep -q "the terminal 'dumb' cannot move the cursor.*use 'tbisect check REF CAND'" "$TAP_TMP/stderr-dumb"
tui_start unknown 80 24 TERM=no-such-terminal -- ref cand
expect_clean_exit unknown "an unknown TERM: exit 2" 2
check_that "an unknown TERM: named, with the pointer to check" \
	grep -q "the terminal 'no-such-terminal' is unknown to curses; .*tbisect check" "$TAP_TMP/stderr-unknown"

# Ctrl-Z in a shell with job control: the job stops, the shell's prompt is
# back, and fg redraws the view.
tm new-window -d -n job -c "$TAP_TMP" "env PS1='job\$ ' bash --norc --noprofile -i"
wait_for job 'job$' || bail_out "no interactive shell for the Ctrl-Z test"
keys job "'$TBISECT' ref cand" Enter
wait_for job "DIVERGED" || bail_out "the heatmap did not come up in the shell"
keys job C-z
expect_screen job "Ctrl-Z: the job stops and the shell says so" "Stopped"
keys job "fg; echo TBISECT_EXIT=\$?" Enter
expect_screen job "fg: the heatmap is drawn again" "DIVERGED  first divergence L1.attn"
keys job q
expect_line job "after Ctrl-Z and fg, q quits with the batch status" '^TBISECT_EXIT=1$'

tui_start r 80 24 -- sref scand
wait_for r "DIVERGED" || bail_out "the heatmap did not come up"
expect_at r "80x24: the key hints on line 24" 24 '^\? help  Enter open'
expect_at r "80x24: six columns fit" 4 '^ +attn_norm +attn\.q +attn\.k +attn\.v +attn +mlp_norm +>$'
tm resize-window -t tb:r -x 100 -y 30
expect_at r "100x30: the key hints move to line 30" 30 '^\? help  Enter open'
expect_at r "100x30: eight columns fit" 4 '^ +attn_norm +attn\.q +attn\.k +attn\.v +attn +mlp_norm +mlp\.gate +mlp\.up +>$'
expect_at r "100x30: the status line follows" 28 '^embed match'
tm resize-window -t tb:r -x 80 -y 24
expect_at r "back to 80x24: hints on line 24" 24 '^\? help  Enter open'
expect_at r "back to 80x24: six columns again" 4 '^ +attn_norm +attn\.q +attn\.k +attn\.v +attn +mlp_norm +>$'
tm resize-window -t tb:r -x 40 -y 10
expect_screen r "40x10: a clear message instead of a broken screen" "terminal too small: 40x10"
expect_screen r "too small: it points to tbisect check" "or use 'tbisect check'."
# 60x15 and below: the grid has priority; the tolerance and legend lines,
# the banner and the causes line give way, one status line stays.
tm resize-window -t tb:r -x 60 -y 15
expect_at r "60x15: the header, cut at the edge, ends in a '>' saying so" 1 '^tbisect  DIVERGED  .*>$'
expect_at r "60x15: the column labels right under the header" 2 '^ +attn_norm +attn\.q +attn\.k +attn\.v +>$'
expect_at r "60x15: the grid starts on line 3" 3 '^embed '
expect_line r "60x15: every row fits, logits included" '^logits +X'
expect_gone r "60x15: no legend line" "rel_l2 1e-08"
expect_at r "60x15: the selected cell's status above the hints" 14 '^embed match'
expect_at r "60x15: the key hints on the last line" 15 '^\? help'
tm resize-window -t tb:r -x 80 -y 24
expect_at r "80x24 again: the heatmap is back" 4 '^ +attn_norm +attn\.q'
expect_line r "80x24 again: the legend is back" '^rel_l2 1e-08'
keys r f Enter
expect_screen r "the detail screen at 80x24" "per position"
tm resize-window -t tb:r -x 100 -y 30
expect_at r "the detail screen relayouts at 100x30, its own key hints" 30 "^Left/Right position  f first bad position"
tm resize-window -t tb:r -x 80 -y 24
keys r q q
expect_clean_exit r "q after resizing: terminal restored" 1

# drawn_without_color: the grid and the key hints (the last line) are on
# the screen (escapes and all), and not one color escape.
drawn_without_color() {
	has_line 'L1 .* X 5\.0e-01' && has_line '\?.* help' && ! has_line '\[(3[0-7]|4[0-7]|38;5;[0-9]+|48;5;[0-9]+)m'
}

tui_start mono 80 24 NO_COLOR=1 -- ref cand
wait_for mono "DIVERGED" || bail_out "the heatmap did not come up"
expect_escapes mono "NO_COLOR: no color escapes at all" "not drawn, or drawn with color escapes" drawn_without_color
expect_line mono "NO_COLOR: cells still read by glyph and number" '^L1 +\. 0\.0e\+00  X 5\.0e-01'
expect_screen mono "NO_COLOR: the legend glyphs" "rel_l2 1e-08 .....~~~XXXX 1e+01"
keys mono f
expect_line mono "NO_COLOR: the cursor is a visible marker" '^L1 +\. 0\.0e\+00 >X 5\.0e-01'
keys mono ? G
expect_screen mono "NO_COLOR: help says mono" "colors: mono"
keys mono q q
expect_clean_exit mono "mono: q restores the terminal" 1

tui_start c256 80 24 -- ref cand
wait_for c256 "DIVERGED" || bail_out "the heatmap did not come up"
expect_escapes c256 "xterm-256color: the heatmap uses the 256-color gradient" "no 256-color cell" \
	has_line '48;5;[0-9]*m X 5\.0e-01'
keys c256 C-c
expect_clean_exit c256 "Ctrl-C quits and restores the terminal" 1

tui_start c8 80 24 TERM=xterm -- ref cand
wait_for c8 "DIVERGED" || bail_out "the heatmap did not come up"
# eight_colors: a diverged cell on a red background, and no 256-color escape.
eight_colors() {
	has_line '41m X 5\.0e-01' && ! has_line '48;5;'
}
expect_escapes c8 "8 colors: status colors, no 256-color escapes" "no 8-color cell, or 256-color escapes" eight_colors
kill -TERM "$(tui_pid c8)"
expect_clean_exit c8 "SIGTERM restores the terminal" 143

tui_start crash 80 24 -- ref cand
wait_for crash "DIVERGED" || bail_out "the heatmap did not come up"
kill -SEGV "$(tui_pid crash)"
expect_clean_exit crash "a crash signal restores the terminal, then kills" 139

"$TBGEN" --bug scale@L1.attn "$TAP_TMP/wref" "$TAP_TMP/wcand" || bail_out "tbgen failed"
tui_start w 80 24 -- --watch wref wcand
expect_screen w "--watch: the first comparison" "first divergence L1.attn"
"$TBGEN" --bug scale@L2.mlp "$TAP_TMP/wref2" "$TAP_TMP/wcand2" >/dev/null 2>&1
rm -rf "$TAP_TMP/wcand" && mv "$TAP_TMP/wcand2" "$TAP_TMP/wcand"
expect_screen w "--watch: replacing the candidate tree reloads it" "first divergence L2.mlp"
expect_screen w "--watch: the reload is announced" "reloaded: 23 cells"
"$TBGEN" --bug scale@L3.block "$TAP_TMP/wref3" "$TAP_TMP/wcand3" >/dev/null 2>&1
for f in "$TAP_TMP"/wcand3/*.npy; do
	rewrite "$TAP_TMP/wcand/${f##*/}" <"$f"
done
expect_screen w "--watch: rewriting files inside it reloads again" "first divergence L3.block"
keys w q
expect_clean_exit w "quit after watching" 1

tap_done
