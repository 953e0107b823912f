#!/bin/sh
# Every number shown belongs to its cell and was measured (issue "trust"):
# tensors whose values are too small for float squares still get their
# rel_l2; a cell whose shapes differ shows no metric (nothing is read
# against its counterpart) and is where the error is born; an embedding
# one position short of the reference's with the rest equal is a missing
# BOS, named tokenizer.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
need_python numpy
T=$TAP_TMP

"$PY" - "$T" <<'PY'
import os, sys
import numpy as np
t = sys.argv[1]
g = np.random.default_rng(0)
def save(side, name, a):
    os.makedirs(os.path.join(t, side), exist_ok=True)
    np.save(os.path.join(t, side, name + ".npy"), a.astype(np.float32))
# a 100% difference between tiny (subnormal) values
tiny = np.full((1, 4, 8), 2.0 ** -133)
save("tiny-a", "embed", tiny)
save("tiny-b", "embed", 2 * tiny)
# a reference with a BOS row the candidate lacks
e = g.standard_normal((1, 9, 16))
save("bos-a", "embed", e)
save("bos-b", "embed", e[:, 1:])
save("bos-a", "logits", g.standard_normal((1, 9, 5)))
save("bos-b", "logits", g.standard_normal((1, 8, 5)))
# lengths that differ by more than the BOS
save("short-a", "embed", e)
save("short-b", "embed", e[:, :4])
PY

expect_exit 1 "subnormal values: a 100% difference diverges" "$TBISECT" check --json --no-history "$T/tiny-a" "$T/tiny-b"
json_is "subnormal values: rel_l2 1, not 0" cells.0.rel_l2 1
json_is "subnormal values: norm_ratio 2" cells.0.norm_ratio 2

expect_exit 1 "shapes that differ diverge" "$TBISECT" check --json --no-history "$T/short-a" "$T/short-b"
json_is "shapes that differ: no rel_l2" cells.0.rel_l2 null
json_is "shapes that differ: no cosine" cells.0.cosine null
json_is "shapes that differ: no allclose" cells.0.allclose_frac null
json_is "shapes that differ: where the error is born" origin.cell embed
expect_exit 1 "shapes that differ: text report" "$TBISECT" check --no-history "$T/short-a" "$T/short-b"
check_that "shapes that differ: says no difference was measured" \
	grep -q "^  no difference measured: with shapes that differ no element is read against its counterpart" "$TAP_OUT"
check_that "shapes that differ: no perfect metrics shown" sh -c '! grep -q "rel_l2 0.000e+00" "$1"' sh "$TAP_OUT"
check_that "shapes that differ: the origin says why" grep -q "^origin: error is born at embed: shapes differ" "$TAP_OUT"

expect_exit 1 "a missing BOS diverges at embed" "$TBISECT" check --json --no-history "$T/bos-a" "$T/bos-b"
json_is "a missing BOS: named tokenizer" causes.0.id tokenizer
expect_exit 1 "an extra BOS (the sides swapped)" "$TBISECT" check --json --no-history "$T/bos-b" "$T/bos-a"
json_is "an extra BOS: named tokenizer" causes.0.id tokenizer
expect_exit 1 "four positions short is no BOS" "$TBISECT" check --json --no-history "$T/short-a" "$T/short-b"
check_that "four positions short: not named tokenizer" test "$(json_get causes.0.id)" != tokenizer

# Why-texts quote the cell and tap they are about.
"$MKDEMO" --bug dump-duplicate "$T/dd-r" "$T/dd-c" >/dev/null || bail_out "mkdemo failed"
expect_exit 1 "dump-duplicate" "$TBISECT" check --json --no-history "$T/dd-r" "$T/dd-c"
json_is "dump-duplicate: named" causes.0.id dump-duplicate
check_that "dump-duplicate: the why names the repeated tap (mlp), as the warning does" \
	sh -c 'test "$1" = "4 layers of one side hold identical mlp tensors"' sh "$(json_get causes.0.why)"
"$MKDEMO" --bug nan-overflow "$T/no-r" "$T/no-c" >/dev/null || bail_out "mkdemo failed"
expect_exit 1 "nan-overflow" "$TBISECT" check --json --no-history "$T/no-r" "$T/no-c"
json_is "nan-overflow: named" causes.0.id nan-overflow
# the first cell with NaN/Inf on one side is where the origin puts it
first=$(json_get origin.cell)
check_that "nan-overflow: the why quotes the first cell with NaN/Inf on one side ($first)" \
	sh -c 'case "$1" in "NaN/Inf appear on one side only ("[1-9]*" elements at $2, the first cell that has any)") ;; *) exit 1 ;; esac' \
	sh "$(json_get causes.0.why)" "$first"

# Causes measured at the attention a sub-tap belongs to say so.
"$MKDEMO" --replay --bug rope-style "$T/rs-r" "$T/rs-c" >/dev/null || bail_out "mkdemo failed"
expect_exit 1 "rope-style with replay taps" "$TBISECT" check --json --no-history "$T/rs-r" "$T/rs-c"
json_is "rope-style: first divergence at the rotated queries" first_divergence.cell L0.attn.q_rope
json_is "rope-style: the causes' numbers are L0.attn's, said" causes_measured_at.cell L0.attn
expect_exit 1 "rope-style: text report" "$TBISECT" check --no-history "$T/rs-r" "$T/rs-c"
check_that "rope-style: the causes say where they were measured" \
	grep -q "^likely causes (measured at L0.attn, the attention that L0.attn.q_rope is part of and that diverges as a whole):" "$TAP_OUT"
expect_exit 1 "dump-duplicate: measured at its own cell" "$TBISECT" check --json --no-history "$T/dd-r" "$T/dd-c"
json_is "dump-duplicate: nothing measured elsewhere" causes_measured_at null
# A close pair names its causes in every report, not "none".
"$MKDEMO" --bug dtype-precision "$T/dp-r" "$T/dp-c" >/dev/null || bail_out "mkdemo failed"
expect_exit 0 "a close pair: Markdown" "$TBISECT" check --markdown --no-history "$T/dp-r" "$T/dp-c"
check_that "close pair: Markdown names its causes" grep -q '^### Likely causes (no cell diverged)' "$TAP_OUT"
check_that "close pair: Markdown's first is dtype-precision" grep -q '^1\. \*\*dtype-precision\*\*' "$TAP_OUT"
expect_exit 0 "a close pair: HTML" "$TBISECT" check --html "$T/dp.html" --no-history "$T/dp-r" "$T/dp-c"
check_that "close pair: HTML names its causes" grep -q 'data-cause="dtype-precision"' "$T/dp.html"
printf ':save-display %s\nq\n' "$T/dp.txt" >"$T/dp.script"
expect_exit 0 "a close pair: the heatmap (script mode)" env TERM=xterm-256color LINES=30 COLUMNS=100 \
	TBISECT_SCRIPT="$T/dp.script" "$TBISECT" --no-history "$T/dp-r" "$T/dp-c"
check_that "close pair: the heatmap's causes line names dtype-precision" \
	grep -q '^causes (no cell diverged): dtype-precision 0\.[0-9]*  (c: causes pane)' "$T/dp.txt"
tap_done
