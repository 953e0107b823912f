#!/bin/sh
# Small terminals: at 80 columns the causes pane wraps a prefixed line at
# its words and loses none, and the unpaired screen marks a cut name with
# '>'; at 45x10 (too small) Ctrl-L repaints the whole screen and no stale
# key hints stay in the footer.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup

"$MKDEMO" --replay --bug rope-theta "$TAP_TMP/ref" "$TAP_TMP/cand" >/dev/null || bail_out "mkdemo failed"
# A tensor no naming rule knows, with a name longer than half the screen.
cp "$TAP_TMP/cand/model.layers.0.mlp.npy" "$TAP_TMP/cand/transformer.encoder.extra_adapter_block.residual_projection_output.npy"

tui_start n 80 24 -- ref cand
wait_for n "DIVERGED" || bail_out "the heatmap did not come up"
keys n c
expect_line n "causes pane: the origin line is cut at a word" '^  origin: error is born at L0\.attn\.q_rope: rel_l2 [0-9.]+ from inputs at 0$'
expect_line n "causes pane: its last word goes on the next line" '^    \(x[0-9.e+]+\)$'
check_that "causes pane: no line runs past the edge" sh -c '! printf "%s" "$1" | grep -q ">\$"' x "$TUI_SCREEN"
keys n q u
expect_screen n "u: the unpaired screen" "ref (unpaired)                          cand (unpaired)"
expect_line n "a long name is cut to its half, ending in '>'" '^ {40}\? transformer\.encoder\.extra_adapter_bl>$'
keys n q
tm resize-window -t tb:n -x 45 -y 10
expect_screen n "45x10: too small" "terminal too small: 45x10"
expect_gone n "45x10: no key hints of the heatmap, whose keys do nothing now" "? help"
# Something else writes on the terminal: Ctrl-L must repaint all of it.
printf '\033[10;1HSTALE-FOOTER\033[7;1HSTALE-LINE' >"$(tm display -p -t tb:n '#{pane_tty}')"
wait_for n "STALE-FOOTER" || bail_out "could not write on the terminal"
keys n C-l
expect_gone n "45x10: Ctrl-L clears the footer" "STALE-FOOTER"
expect_gone n "45x10: Ctrl-L clears every line" "STALE-LINE"
expect_screen n "45x10: the message is drawn again" "terminal too small: 45x10"
keys n q
expect_clean_exit n "q quits when too small" 1

tap_done
