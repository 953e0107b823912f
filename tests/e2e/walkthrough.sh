#!/bin/sh
# End to end: the dumps the build generates (Makefile.am, samples/.stamp):
# the quick start's pair and the walkthrough chain, where each pass of the
# port must move the first divergence later until pass 4 matches.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
S=$top_builddir/samples
W=$S/walkthrough

[ -f "$S/.stamp" ] || bail_out "$S/.stamp missing: the build did not generate the samples"

# json_is_status PATH WANT: the last check's JSON has WANT at PATH (for check_that).
json_is_status() {
	test "$(json_get "$1")" = "$2"
}

# step DESC CAND EXIT WANT: check the walkthrough reference against CAND.
step() {
	expect_exit "$3" "$1: exit $3" "$TBISECT" check --json "$W/ref" "$2"
	last_ok || return 0
	_l=$(json_get first_divergence.layer)
	_t=$(json_get first_divergence.tap)
	if [ -z "$_t" ]; then _got=$(json_get verdict); elif [ "$_l" = null ]; then _got=$_t; else _got=L$_l.$_t; fi
	if [ "$_got" = "$4" ]; then ok "$1: $4"; else not_ok "$1: $4" "got $_got"; fi
	_u=$(json_get unpaired)
	if [ "$_u" = '{"ref":[],"cand":[]}' ]; then ok "$1: HF npy and canonical safetensors pair"; else not_ok "$1: pairing" "unpaired $_u"; fi
}

expect_exit 1 "sample pair: exit 1" "$TBISECT" check --json "$S/pair/ref" "$S/pair/cand"
check_that "sample pair: first divergence L0.attn" test "$(json_get first_divergence.tap)" = attn
check_that "sample pair: position 0 is fine, position 1 is not" \
	test "$(json_get first_divergence.first_bad_position)" = 1
expect_exit 1 "sample pair: the demo target's text report" "$TBISECT" check "$S/pair/ref" "$S/pair/cand"
check_that "text report names the first divergence" grep -q '^first divergence: L0.attn$' "$TAP_OUT"

step "pass 1" "$W/pass1" 1 L0.attn
step "pass 2" "$W/pass2" 1 L0.mlp
check_that "pass 2: L0.attn fixed" json_is_status cells.2.status match
step "pass 3" "$W/pass3" 1 logits
check_that "pass 3: final_norm matches" json_is_status cells.21.status match
step "pass 4" "$W/pass4" 0 match
check_that "pass 4: no causes" json_is_status 'causes.#' 0
check_that "pass 4 is a safetensors file" test -f "$W/pass4/activations.safetensors"

tap_done
