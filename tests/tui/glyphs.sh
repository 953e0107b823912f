#!/bin/sh
# What the glyphs and the cursor say: the cursor stays readable on 8
# colors and without color.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup

"$MKDEMO" --bug rope-theta "$TAP_TMP/ref" "$TAP_TMP/cand" >/dev/null || bail_out "mkdemo failed"

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
