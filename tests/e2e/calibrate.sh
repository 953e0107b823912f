#!/bin/sh
# tbisect calibrate: two runs of the reference that differ harmlessly
# (f32 and bf16 of one model) give per-cell tolerances in the --tol
# format, the noise between them times a safety factor; with that file the
# same two runs match, a real bug still diverges, and every cell says how
# many times the reference's own noise its error is (JSON noise_ratio).
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

"$MKDEMO" "$T/ref" "$T/same" >/dev/null || bail_out "mkdemo failed"
"$MKDEMO" --dtype bf16 --ref-only "$T/ref2" >/dev/null || bail_out "mkdemo failed"
"$MKDEMO" --cand-only --bug norm-epsilon "$T/bug" >/dev/null || bail_out "mkdemo failed"
before=$(snapshot "$T/ref"; snapshot "$T/ref2")

expect_exit 0 "calibrate f32 against bf16 of one model" "$TBISECT" calibrate "$T/ref" "$T/ref2" -o "$T/tol.json"
check_that "calibrate says what it wrote" grep -q "^tbisect: wrote $T/tol.json: 23 cells, 4 times the noise" "$TAP_ERR"
check_that "the dump trees are not written to" test "$before" = "$(snapshot "$T/ref"; snapshot "$T/ref2")"
check_that "no temporary file is left" sh -c '! ls "$1" | grep -q "\.tmp"' x "$T"
run_cmd cat "$T/tol.json"
json_is "one entry per cell" 'tolerances.#' 23
json_is "the factor is recorded" calibrated.factor 4
json_is "an entry matches its cell alone" tolerances.1.match 'L0\.attn_norm'
check_that "the tolerance is the noise times the factor" sh -c '
	r=$("$1" "$2" tolerances.1.noise.rel_l2); d=$("$1" "$2" tolerances.1.diverge)
	awk -v r="$r" -v d="$d" "BEGIN { exit !(r > 0 && d > 3.999 * r && d < 4.001 * r) }"' x "$JSONQ" "$T/tol.json"

expect_exit 0 "without the file the two runs are merely close" "$TBISECT" check --json --no-history "$T/ref" "$T/ref2"
json_is "uncalibrated: verdict close" verdict close
expect_exit 0 "with it they match" "$TBISECT" check --json --no-history --tol "$T/tol.json" "$T/ref" "$T/ref2"
json_is "calibrated: verdict match" verdict match
json_is "calibrated: noise_ratio 1 at the noise itself" cells.1.noise_ratio 1
expect_exit 1 "a real bug still diverges" "$TBISECT" check --json --no-history --tol "$T/tol.json" "$T/ref" "$T/bug"
json_is "the bug: first divergence" first_divergence.cell L0.attn_norm
check_that "the bug: many times the noise" sh -c '"$1" "$2" cells.1.noise_ratio | awk "{ exit !(\$1 > 10) }"' x "$JSONQ" "$TAP_OUT"
expect_exit 1 "the text report states it" "$TBISECT" check --no-history --tol "$T/tol.json" "$T/ref" "$T/bug"
check_that "the text report: times the reference's own noise" grep -q "^  noise: rel_l2 is [0-9.]* times the reference's own between its two runs" "$TAP_OUT"
expect_exit 0 "--factor 10" "$TBISECT" calibrate --factor 10 "$T/ref" "$T/ref2" -o "$T/tol10.json"
run_cmd cat "$T/tol10.json"
json_is "--factor is recorded" calibrated.factor 10

printf 'f\nEnter\n:save-display %s\nq\n' "$T/detail.txt" >"$T/script"
expect_exit 1 "the interactive view (script mode) opens the first divergence" env TERM=xterm-256color LINES=30 \
	COLUMNS=100 TBISECT_SCRIPT="$T/script" "$TBISECT" --tol "$T/tol.json" "$T/ref" "$T/bug"
check_that "the detail screen gives the noise ratio" grep -q "^noise: rel_l2 is [0-9.]* times the reference's own" "$T/detail.txt"

# --- refusals ---
expect_exit 2 "calibrate without -o" "$TBISECT" calibrate "$T/ref" "$T/ref2"
check_that "without -o: says so" grep -q "calibrate needs -o FILE" "$TAP_ERR"
expect_exit 2 "--factor below 1" "$TBISECT" calibrate --factor 0.5 "$T/ref" "$T/ref2" -o "$T/x.json"
expect_error 2 "$T/nowhere/tol.json" "a file in a missing folder" "$TBISECT" calibrate "$T/ref" "$T/ref2" -o "$T/nowhere/tol.json"
mkdir "$T/broken"
printf 'not a tensor' >"$T/broken/x.npy"
expect_error 2 "$T/broken/x.npy" "a broken reference run" "$TBISECT" calibrate "$T/ref" "$T/broken" -o "$T/y.json"
check_that "nothing is written for a broken run" test ! -e "$T/y.json"
printf '[{"match": "L0\\\\.attn", "noise": {"rel_l2": -1}}]' >"$T/badnoise.json"
expect_error_msg 2 "$T/badnoise.json" "noise" "a tolerance file with a bad noise" "$TBISECT" check --tol "$T/badnoise.json" "$T/ref" "$T/ref2"
tap_done
