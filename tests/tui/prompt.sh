#!/bin/sh
# The ':' prompt (readline inside curses) and '/' search in tmux: every
# command, Tab completion, history, errors, and the help screen generated
# from the keymap.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup

"$TBGEN" --bug scale@L1.attn "$TAP_TMP/ref" "$TAP_TMP/cand" || bail_out "tbgen failed"
JSONQ=$top_builddir/tests/jsonq

tui_start p 80 24 -- ref cand
wait_for p "DIVERGED" || bail_out "the heatmap did not come up"

keys p :
expect_line p "':' opens the prompt on the last line" '^:$'
keys p "goto L2.mlp" Enter
expect_screen p "goto CELL selects it" "L2.mlp diverged: rel_l2"
keys p : "goto 3" Enter
expect_screen p "goto LAYER keeps the column" "L3.mlp diverged"
keys p : "goto L1" Enter
expect_screen p "goto L1, as the row label reads" "L1.mlp diverged"
keys p : "goto model.layers.0.self_attn" Enter
expect_screen p "goto TENSOR-NAME" "L0.attn match"
keys p : "goto L9.attn" Enter
expect_screen p "goto an unknown cell says so" "goto: no cell 'L9.attn'"

keys p : "metric cosine" Enter
expect_screen p "metric NAME recolors by it" "1-cosine 1e-12 ........~XXX 1e+00"
expect_screen p "metric: the message" "metric: cosine"
keys p : "metric bogus" Enter
expect_screen p "metric with a bad name lists the good ones" "metric: 'bogus' is not one of rel_l2 cosine max_abs norm_ratio allclose_frac"
keys p : "metric rel_l2" Enter

keys p : "filter mlp" Enter
expect_line p "filter REGEX shows the matching taps only" '^ +mlp_norm +mlp$'
expect_screen p "filter: the message counts rows and columns" "filter 'mlp': 4 rows, 2 columns shown"
keys p : "filter" Enter
expect_line p "filter with no REGEX shows everything again" '^ +attn_norm +attn +mlp_norm +mlp +block$'
keys p : "filter (" Enter
expect_screen p "filter with a bad regex says so" "filter: bad regular expression '('"

keys p : "tol diverge=1 max_kl=100" Enter
expect_screen p "tol recompares with the new tolerance" "CLOSE  no cell diverged"
expect_screen p "tol: the header shows it" "atol 0.0001 rtol 0.0001 diverge 1  ref ref"
expect_screen p "tol: the banner says where the first divergence is now" "diverge=1 max_kl=100: first divergence none"
expect_screen p "tol: the status line says the comparison is done" "compared at the new tolerance"
keys p : "tol atol=1 rtol=0 diverge=0.01 max_kl=0.015" Enter
expect_screen p "tol with several keys" "atol 1 rtol 0 diverge 0.01"
expect_screen p "tol: statuses follow the new tolerance" "DIVERGED  first divergence L1.attn"
keys p : "tol atol=-1" Enter
expect_screen p "tol refuses a negative value" "tol: atol: '-1' is not a non-negative number"
keys p : "tol atol=1e-4 rtol=1e-4" Enter
# compared_at_default: the header has the tolerance back and the new result.
compared_at_default() {
	shows "atol 0.0001 rtol 0.0001 diverge 0.01  ref ref" && shows "DIVERGED  first divergence L1.attn"
}
wait_until on_screen screen p compared_at_default || bail_out "no result after tol"

keys p : "export out.json" Enter
expect_screen p "export writes the report" "wrote out.json (json, 23 cells, verdict diverged)"
check_that "the exported report is the JSON report" test "$("$JSONQ" "$TAP_TMP/out.json" first_divergence.tap 2>/dev/null)" = attn
keys p : "export md summary.txt" Enter
expect_screen p "export md writes the Markdown summary" "wrote summary.txt (md, 23 cells, verdict diverged)"
check_that "the Markdown summary, as check --markdown writes it" \
	sh -c 'cd "$2" && "$1" check --markdown --no-history ref cand | cmp -s - summary.txt' x "$TBISECT" "$TAP_TMP"
keys p : "export out.md" Enter
expect_screen p "export of a .md file: the Markdown summary" "wrote out.md (md, 23 cells, verdict diverged)"
check_that "a .md file holds the Markdown heading" grep -q '^## tbisect: DIVERGED' "$TAP_TMP/out.md"
keys p : "export md" Enter
expect_screen p "export md without a file: the usage" "usage: export [json|md|html] FILE"
keys p : "export html page.out" Enter
expect_screen p "export html writes the HTML report" "wrote page.out (html, 23 cells, verdict diverged)"
check_that "the HTML report names the first divergence" grep -q 'id="first-divergence" data-cell="L1.attn"' "$TAP_TMP/page.out"
keys p : "export /nonexistent/dir/x.json" Enter
expect_screen p "export to a bad path says why" "export: /nonexistent/dir/x.json: No such file or directory"

"$TBGEN" --bug scale@L2.mlp "$TAP_TMP/ref" "$TAP_TMP/cand2" >/dev/null 2>&1
rm -rf "$TAP_TMP/cand" && mv "$TAP_TMP/cand2" "$TAP_TMP/cand"
keys p : "reload" Enter
expect_screen p "reload reads the trees again" "first divergence L2.mlp"

keys p : "go" Tab
expect_line p "Tab completes a command name" '^:goto$'
keys p "L2.ml" Tab
expect_screen p "Tab lists ambiguous cell names" "2 matches: L2.mlp L2.mlp_norm"
keys p "_" Tab Enter
expect_screen p "Tab completes a cell name" "L2.mlp_norm match"
keys p : Up
expect_line p "Up recalls the last command" '^:goto L2\.mlp_norm$'
keys p Up
expect_line p "Up again goes further back" '^:reload$'
keys p Escape
expect_screen p "Esc leaves the prompt" "? help"
keys p : "frobnicate" Enter
expect_screen p "an unknown command says so" "unknown command 'frobnicate' (try :help)"
keys p : "first-div" Tab
expect_line p "Tab completes a key's action name too" '^:first-divergence$'
keys p Enter
expect_screen p "a key's action typed by its name does what its key does" "L2.mlp diverged"
keys p : "causes" Enter
expect_screen p ":causes opens the causes pane, as c" "causes  (of the first divergence: L2.mlp)"
keys p Escape
keys p : "select" Enter
expect_screen p "the mouse's action is no command" "unknown command 'select' (try :help)"

keys p / "mlp_norm" Enter
expect_screen p "/ searches names after the cursor" "L3.mlp_norm"
keys p / Enter
expect_screen p "/ with no pattern repeats the search, past the end to the top" "L0.mlp_norm match"
keys p / "nosuchtensor" Enter
expect_screen p "/ says when nothing matches" "search: nothing matches 'nosuchtensor'"
keys p / "[" Enter
expect_screen p "/ says when the pattern is no regex, as :filter does" "search: bad regular expression '['"

# n and N follow the last / search, as in vi and less; Esc on the heatmap ends it.
keys p : "goto L0.attn" Enter
keys p / "mlp_norm" Enter
expect_screen p "/ mlp_norm from L0.attn: L0.mlp_norm" "L0.mlp_norm match"
keys p n
expect_screen p "n after a search: the next match" "/mlp_norm: L1.mlp_norm (n next, N previous, Esc ends the search)"
keys p n N
expect_screen p "N after a search: the previous match" "/mlp_norm: L1.mlp_norm"
keys p Escape
expect_screen p "Esc on the heatmap ends the search" "search 'mlp_norm' cleared: n/N go to diverged cells again"
keys p : "goto L0.attn" Enter n
expect_screen p "after Esc, n goes to the next diverged cell again" "L2.mlp diverged: rel_l2"

# Commands by a unique prefix; an ambiguous one names the candidates.
keys p : "go L2.mlp" Enter
expect_screen p ":go is :goto" "L2.mlp diverged: rel_l2"
keys p : "h" Enter
expect_screen p ":h is ambiguous, and says between what" "'h' is ambiguous: heads, history, help"
keys p : "exp ~/report.json" Enter
expect_screen p ":exp is :export, and ~ is the home directory" "wrote $HOME/report.json"
check_that ":exp ~/report.json wrote the report under HOME" test -s "$HOME/report.json"
keys p : "exp ~nosuchuser_tb/r.json" Enter
expect_screen p "~user of no user says so" "export: cannot expand '~nosuchuser_tb/r.json'"
keys p : "set nomouse" Enter
expect_screen p ":set nomouse leaves the mouse to the terminal" "nomouse: the terminal selects text (:set mouse)"
tm send-keys -t tb:p -l "$(printf '\033[<0;25;8M')"
tm send-keys -t tb:p -l "$(printf '\033[<0;25;8m')"
keys p : "set mouse" Enter
expect_screen p ":set mouse takes it back" "mouse: on (clicks select, the wheel scrolls; :set nomouse)"
keys p : "set colour" Enter
expect_screen p ":set with an unknown setting says so" "set: unknown setting 'colour' (mouse, nomouse)"

keys p : "help" Enter
expect_screen p "help opens the help screen" "tbisect help"
expect_line p "help lists keys from the keymap" '^  f +first-divergence +jump to the first divergence'
keys p q
expect_screen p "q leaves the help for the heatmap" ".match<=1e-04"
keys p ?
expect_screen p "? opens the help screen too" "tbisect help"
keys p G
expect_line p "help lists the prompt commands" '^  history \[clear\] +show the passes of this pair'
expect_screen p "the help scrolls to the cell legend" ". match   ~ close   X diverged   - missing"
keys p Escape
expect_screen p "Esc leaves the help for the heatmap" ".match<=1e-04"

keys p : "quit" Enter
expect_clean_exit p "quit quits" 1

tui_start q 80 24 -- ref cand
wait_for q "DIVERGED" || bail_out "the second view did not come up"
keys q : "q!" Enter
expect_clean_exit q ":q! quits, as in vi" 1
tui_start q2 80 24 -- ref cand
wait_for q2 "DIVERGED" || bail_out "the third view did not come up"
keys q2 : q Enter
expect_clean_exit q2 ":q quits" 1

tap_done
