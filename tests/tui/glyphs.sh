#!/bin/sh
# What the glyphs and the cursor say: the detail's cosine strip reads a
# cosine on its own marks (a cosine of 0.99975 is no 'X'), and its legend
# says them; on the "added" metric the cells' glyphs follow the legend's
# thresholds; the cursor stays readable on 8 colors and without color.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup

"$MKDEMO" --bug rope-theta "$TAP_TMP/ref" "$TAP_TMP/cand" >/dev/null || bail_out "mkdemo failed"

tui_start g 80 24 -- ref cand
wait_for g "DIVERGED" || bail_out "the heatmap did not come up"
keys g f Enter
expect_screen g "the detail of the first divergence" "per position  (shown 0-15 of 16"
expect_line g "rel_l2 strip: position 1 close, 2 on diverged" '^rel_l2  \.~XXXXXXXXXXXXXX$'
# Position 2 has rel_l2 0.023 (diverged) and cosine 0.99975: the same
# direction, close, not the 'X' of its rel_l2.
expect_line g "cosine strip: its own marks, positions 1-3 are no 'X'" '^cosine  \.\.~~XXXXXXXXXXXX$'
expect_screen g "the strip's legend gives each row's marks" \
	"glyphs  rel_l2 .<=1e-04 ~ X>1e-02   cosine .>=0.9999 ~ X<0.999"
keys g q m
expect_screen g "metric cosine: the legend on the cosine marks" ".match<=1e-04 ~close Xdiverged>1e-03"
keys g m m m m
expect_screen g "metric added: the legend marks X above 10" "X>1e+01"
# no_x_below_ten: no cell reads X with an amplification under 10 (the
# legend's threshold), and some cell under 1 reads '.'.
no_x_below_ten() {
	has_line '^L1 .*\. [0-9]\.[0-9]e-01' && ! has_line 'X [0-9]\.[0-9]e(-[0-9]+|\+00)'
}
expect_on g "metric added: cell glyphs on the legend's thresholds" "a cell's glyph disagrees with the legend" \
	no_x_below_ten
expect_line g "metric added: the cell the error is born in is X" '^L0 .*X 6\.5e\+02'
keys g q
expect_clean_exit g "q quits" 1

ESC=$(printf '\033')
# cursor_readable: the cursor on the embed cell (a match), and no foreground
# and background of the same color where it is drawn.
cursor_readable() {
	has_line '>\. 0\.0e\+00' && ! has_line "3([0-7])m${ESC}\[4\1m>"
}
tui_start c8 80 24 TERM=xterm -- ref cand
wait_for c8 "DIVERGED" || bail_out "the heatmap did not come up"
expect_escapes c8 "8 colors: the cursor on a match cell is readable" "the cursor is one color on itself" \
	cursor_readable
keys c8 f Enter
# strip_cursor_readable: the strip drawn, its cursor not one color on itself.
strip_cursor_readable() {
	has_line 'cosine  ' && ! has_line "3([0-7])m${ESC}\[4\1m[.~X]"
}
expect_escapes c8 "8 colors: the strip's cursor is readable" "the cursor is one color on itself" \
	strip_cursor_readable
keys c8 q q
expect_clean_exit c8 "8 colors: q quits" 1

tui_start mono 80 24 TERM=xterm NO_COLOR=1 -- ref cand
wait_for mono "DIVERGED" || bail_out "the heatmap did not come up"
expect_escapes mono "no color: the cursor is drawn in reverse" "no reverse cursor" has_line "7m>\. 0\.0e\+00"
keys mono q
expect_clean_exit mono "no color: q quits" 1

tap_done
