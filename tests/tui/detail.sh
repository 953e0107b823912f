#!/bin/sh
# The detail screen (Enter on a cell) in tmux: statistics of both sides, the
# metrics, the per-position strip with the first bad position marked and the
# selected position's worst channels, the per-head view, the worst elements,
# the |diff| histogram and the causes; Esc and q go back.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup

"$TBGEN" --bug pos@L2.mlp:3 "$TAP_TMP/ref" "$TAP_TMP/cand" || bail_out "tbgen failed"
"$TBGEN" --bug missing@L1.mlp "$TAP_TMP/mref" "$TAP_TMP/mcand" || bail_out "tbgen failed"
"$TBGEN" --sub --bug pos@L2.mlp:3 "$TAP_TMP/sref" "$TAP_TMP/scand" || bail_out "tbgen failed"

# 25 lines: the strip, its legend and the worst channels of the selected
# position are all on the first screen.
tui_start d 80 25 -- ref cand
wait_for d "DIVERGED" || bail_out "the heatmap did not come up"
keys d f Enter
expect_screen d "Enter opens the first divergence" "L2.mlp  diverged: rel_l2"
expect_screen d "the tap's label and both tensors" "MLP output (post-mlp)"
expect_line d "ref tensor with dtype and shape" '^ref +model\.layers\.2\.mlp  f32 \[1, 8, 64\]'
expect_line d "statistics side by side with the metrics" '^statistic +ref +cand \| metrics$'
expect_line d "NaN counts per side" '^NaN +0 +0 \| allclose_frac +0\.[0-9]+$'
expect_line d "Inf counts per side and the first bad position" '^Inf +0 +0 \| first_bad_position 3$'
expect_line d "mean per side and max_abs" '^mean +-?[0-9.]+ +-?[0-9.]+ \| max_abs +[0-9.]+$'
expect_line d "the strip: positions 0-2 match, 3-7 diverged" '^rel_l2  \.\.\.XXXXX$'
expect_line d "the first bad position is marked" '^           \^$'
expect_screen d "the first bad position in words" "^ first bad position 3 (rel_l2 > diverge 1e-02)"
expect_screen d "the selected position starts at the first bad one" "pos 3: rel_l2"
expect_line d "worst channels of position 3" '^ +\[0, 3, [0-9]+\] +-?[0-9.]+ +-?[0-9.]+ +[0-9.]+$'
keys d Right
expect_screen d "Right selects position 4" "pos 4: rel_l2"
expect_line d "the cursor mark moves with it" '^           \^\|$'
expect_line d "worst channels of position 4" '^ +\[0, 4, [0-9]+\] '
keys d Left Left Left
expect_screen d "Left goes back to a good position" "pos 1: rel_l2 0  cosine 1.000000"
keys d n
expect_screen d "n: next bad position" "pos 3: rel_l2"
keys d N
expect_screen d "N: no bad position before the first" "no bad position before 3"
keys d PageDown
expect_screen d "PgDn: the worst elements" "worst elements"
expect_line d "worst elements carry index, ref, cand, |diff|" '^ +1\. \[0, [3-7], [0-9]+\] +-?[0-9.]+ +-?[0-9.]+ +[0-9.]+$'
expect_screen d "the |diff| histogram" "|diff| histogram (log10 decades)"
expect_line d "the histogram counts the exact elements" '^  0 +192 #+$'
keys d G
# positions 3-7 off and 0-2 exact: routing ranks between the two
expect_screen d "the causes section ends with the third cause" "3. mlp-activation  score 0.86"
keys d Escape
expect_screen d "Esc goes back to the heatmap" ".match<=1e-04"
keys d Enter
expect_screen d "Enter again" "worst channels at pos 3"
keys d q
expect_screen d "q in the detail screen goes back, it does not quit" "L2.mlp diverged: rel_l2"
keys d c
expect_line d "c opens the causes pane" '^causes pane   \(Esc/q back'
expect_screen d "the causes pane names the first divergence" "causes  (of the first divergence: L2.mlp)"
expect_screen d "the causes pane shows why" "the first divergence is deep inside (layer 2)"
expect_screen d "the causes pane ranks weight-mapping first" "1. weight-mapping  score 0.90"
keys d q
keys d G Enter
expect_screen d "logits detail: the logit metrics" "logits: kl_mean"
# At 80 columns the logits line is longer than the screen: it wraps, and
# nothing is cut at the edge (it used to end "top5_over").
expect_line d "80 columns: the logits line wraps, top5_overlap whole on the next line" '^  top5_overlap [0-9.]+$'
check_that "80 columns: no line of the detail is cut at the edge" sh -c '! printf "%s" "$1" | grep -q "top5_over\$"' x "$TUI_SCREEN"
keys d q q
expect_clean_exit d "quit after the detail screens" 1

# Heads exist before o_proj mixes them: the per-head view is on attn.q/k/v,
# and the attention output says which taps to dump instead.
tui_start h 80 24 -- --heads 4 sref scand
wait_for h "DIVERGED" || bail_out "the heatmap did not come up"
keys h : "goto L2.attn.q" Enter Enter
expect_screen h "attn.q cell opens" "L2.attn.q  match"
keys h PageDown
expect_screen h "--heads 4: the per-head view of attn.q" "per head  (4 heads of 16, --heads)"
expect_line h "one row per head with rel_l2 and cosine" '^  \. 3 +0 +1\.000000 +0$'
keys h q : "goto L2.attn" Enter Enter
expect_screen h "attn cell opens" "L2.attn  match"
keys h PageDown
expect_screen h "the attention output: no per-head view, and which taps give one" \
	"no heads after o_proj, which mixes them; dump attn.q/attn.k/attn.v or"
expect_gone h "the attention output: no head rows" "heads of 16"
keys h q q
expect_clean_exit h "quit after the per-head view" 1

tui_start n 80 24 -- sref scand
wait_for n "DIVERGED" || bail_out "the heatmap did not come up"
keys n : "goto L2.attn.q" Enter Enter PageDown
expect_screen n "no head count: the view says what to pass" "head count unknown: give --heads N"
keys n q q
expect_clean_exit n "quit" 1

tui_start m 80 24 -- mref mcand
wait_for m "no cell diverged" || bail_out "the heatmap did not come up"
expect_screen m "the header counts only cells with both sides as paired" "paired 22  unpaired 1/0"
expect_line m "a missing cell is drawn apart from matching ones" '^L1 +\. 0\.0e\+00  \. 0\.0e\+00  \. 0\.0e\+00  - no cand  \. 0\.0e\+00$'
keys m : "goto L1.mlp" Enter
expect_screen m "status line of a missing cell" "L1.mlp missing: only in the reference"
keys m Enter
expect_screen m "detail of a missing cell" "cand  (not in this tree)"
keys m q q
expect_clean_exit m "missing is not diverged: exit 0" 0

# Home and End as tmux sends them under TERM=xterm-256color, whose terminfo
# entry has other sequences: they scroll the detail, they are not Esc.
tui_start x 100 30 TERM=xterm-256color -- ref cand
wait_for x "first divergence L2.mlp" || bail_out "the heatmap did not come up"
keys x f Enter End
expect_line x "End under xterm's entry scrolls to the bottom of the detail" '^  3\. mlp-activation  score'
expect_line x "... and stays in the detail" '^L2\.mlp  diverged'
keys x Home
expect_screen x "Home scrolls back to the top" "statistic "
keys x q q
expect_clean_exit x "quit after Home/End" 1

# The logits cell: the selected position's KL, top-1 of each side and logprobs.
tui_start g 100 40 -- ref cand
wait_for g "first divergence L2.mlp" || bail_out "the heatmap did not come up"
keys g G Enter
expect_line g "logits detail: the position's KL, top-1 ids and logprobs" \
	'^pos [0-9]+: KL [0-9.e+-]+  top-1 ref [0-9]+ cand [0-9]+ \((agree|differ)\)  logprob -?[0-9.e+-]+ / -?[0-9.e+-]+  top-5 common [0-5]/5$'
keys g q q
expect_clean_exit g "quit from the logits detail" 1

tap_done
