#!/bin/sh
# Every position of a long strip is reachable: < and > page the detail's
# strip (the cursor keeps its column), :pos N and p go to a position, the
# title says which range is shown and '<' '>' at the strip's ends say that
# more lie beyond; on the heatmap < and > page the columns.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup

"$MKDEMO" --seq 512 --bug rope-theta "$TAP_TMP/ref" "$TAP_TMP/cand" >/dev/null || bail_out "mkdemo failed"

tui_start p 120 30 -- ref cand
wait_for p "DIVERGED" || bail_out "the heatmap did not come up"
keys p p
expect_screen p "p on the heatmap: positions are the detail's" "go to position: in the detail screen"
keys p f Enter
expect_screen p "120 columns: the first 111 of 512 positions" "per position  (shown 0-110 of 512;"
expect_line p "more follow: the rows end in '>'" '^rel_l2  \.~X{109}>$'
keys p '>'
expect_screen p "> shows the next page" "per position  (shown 111-221 of 512;"
expect_screen p "the cursor keeps its column: position 2 + 111" "pos 113: rel_l2"
expect_line p "positions before: the rows start with '<'" '^rel_l2 <X{111}>$'
keys p '<'
expect_screen p "< pages back" "pos 2: rel_l2"
keys p : "pos 500" Enter
expect_screen p ":pos 500 selects it" "pos 500: rel_l2"
expect_screen p "the strip's page follows" "per position  (shown 390-500 of 512;"
keys p '>'
expect_screen p "> at the end: the last page" "per position  (shown 401-511 of 512;"
expect_line p "the last page: no '>'" '^cosine <X{111}$'
keys p '>'
expect_screen p "> on the last page: the last position" "pos 511: rel_l2"
keys p p 7 Enter
expect_screen p "p opens the prompt at :pos; 7 Enter goes there" "pos 7: rel_l2"
expect_screen p "and the strip follows it back" "per position  (shown 7-117 of 512;"
keys p : "pos 512" Enter
expect_screen p ":pos past the end says which positions there are" "pos: '512' is not a position (0 to 511)"
keys p q q
expect_clean_exit p "q quits" 1

tui_start h 60 20 -- ref cand
wait_for h "DIVERGED" || bail_out "the heatmap did not come up"
expect_line h "60 columns: four of the five columns, more to the right" '^ +attn_norm +attn +mlp_norm +mlp +>$'
keys h j '>'
expect_line h "> on the heatmap: four columns on, to the last" '^ +< attn +mlp_norm +mlp +block *$'
expect_screen h "the cursor is on L0.block" "L0.block diverged"
keys h '<'
expect_line h "< pages the columns back" '^ +attn_norm +attn +mlp_norm +mlp +>$'
keys h q
expect_clean_exit h "q quits the heatmap" 1

tap_done
