#!/bin/sh
# Prove the cause: where the first divergence is an op whose inputs are
# dumped too (mkdemo --replay: mlp.gate, mlp.up and mlp.act), the op is
# recomputed under each hypothesis.  A variant that reproduces the
# candidate confirms its cause, which ranks first with the variant and its
# residual (JSON causes[].confirmed); nothing is confirmed on a clean port,
# a precision-only port, a bug in another op, non-finite values, or when
# the inputs were not dumped (the report says which taps to dump).
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

demo() {
	"$MKDEMO" --replay --layers 3 --bug "$1" "$T/ref" "$T/$1" >/dev/null || bail_out "mkdemo --bug $1 failed"
}
for bug in none mlp-activation mlp-gating dtype-precision nan-overflow; do
	demo "$bug"
done

expect_exit 1 "an activation bug" "$TBISECT" check --json --no-history "$T/ref" "$T/mlp-activation"
json_is "activation: first divergence L0.mlp.act" first_divergence.cell L0.mlp.act
json_is "activation: mlp-activation first" causes.0.id mlp-activation
json_is "activation: confirmed by gelu (tanh)" causes.0.confirmed.variant "gelu (tanh)"
check_that "activation: the residual is rounding" sh -c '"$1" "$2" causes.0.confirmed.rel_l2 | awk "{ exit !(\$1 < 1e-6) }"' x "$JSONQ" "$TAP_OUT"
expect_exit 1 "the text report" "$TBISECT" check --no-history "$T/ref" "$T/mlp-activation"
check_that "text: confirmed by replay, with the variant" grep -q "^     confirmed by replay: gelu (tanh) reproduces the candidate (rel_l2 " "$TAP_OUT"

expect_exit 1 "gate and up swapped" "$TBISECT" check --json --no-history "$T/ref" "$T/mlp-gating"
json_is "gating: mlp-gating first" causes.0.id mlp-gating
json_is "gating: confirmed by the swap" causes.0.confirmed.variant "gate and up swapped"
json_is "gating: the rules' own suggestion stays, unconfirmed" causes.1.confirmed null

printf 'c\n:save-display %s\nq\n' "$T/causes.txt" >"$T/script"
expect_exit 1 "the interactive view's causes pane (script mode)" env TERM=xterm-256color LINES=30 COLUMNS=100 \
	TBISECT_SCRIPT="$T/script" "$TBISECT" "$T/ref" "$T/mlp-gating"
check_that "causes pane: confirmed by replay" grep -q "confirmed by replay: gate and up swapped reproduces the candidate" "$T/causes.txt"

expect_exit 0 "a clean port" "$TBISECT" check --json --no-history "$T/ref" "$T/none"
json_is "clean: no cause" 'causes.#' 0
for bug in dtype-precision nan-overflow; do
	run_cmd "$TBISECT" check --json --no-history "$T/ref" "$T/$bug"
	json_is "$bug: nothing confirmed" causes.0.confirmed null
done
expect_exit 1 "non-finite values: the text report" "$TBISECT" check --no-history "$T/ref" "$T/nan-overflow"
check_that "non-finite: says it does not replay them" grep -q "no replay from non-finite values" "$TAP_OUT"

# the taps a replay needs, missing: the report says which to dump
mkdir "$T/nogate"
cp "$T/mlp-activation"/*.npy "$T/nogate/"
rm "$T/nogate"/*gate_proj.npy
expect_exit 1 "mlp.act without mlp.gate" "$TBISECT" check --json --no-history "$T/ref" "$T/nogate"
json_is "without mlp.gate: nothing confirmed" causes.0.confirmed null
expect_exit 1 "without mlp.gate: the text report" "$TBISECT" check --no-history "$T/ref" "$T/nogate"
check_that "without mlp.gate: it names the taps to dump" grep -q "replaying mlp.act needs mlp.gate and mlp.up dumped on both sides" "$TAP_OUT"
tap_done
