#!/bin/sh
# Attention sinks, final logit soft-capping and gpt-oss's SwiGLU: each bug
# (sinks-dropped, softcap-missing, oai-plus-one, oai-clamp) on mkdemo and on
# tests/pymodel/model.py, an implementation written apart, without the
# replay taps (located, the right cause first from the rules) and with them
# (the first divergence in the op, confirmed by its replay variant); ports
# of the same models without a bug, or with an older bug, confirm nothing
# of these.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

# pair GEN NAME ARGS...: mkdemo or pymodel writes $T/NAME/{ref,cand}
pair() {
	_g=$1 _n=$2
	shift 2
	if [ "$_g" = mkdemo ]; then
		"$MKDEMO" "$@" "$T/$_n/ref" "$T/$_n/cand" >/dev/null || bail_out "mkdemo $* failed"
	else
		"$PYNP" "$top_srcdir/tests/pymodel/model.py" "$@" "$T/$_n/ref" "$T/$_n/cand" >/dev/null ||
			bail_out "model.py $* failed"
	fi
}

# bug GEN BUG CAUSE CELL RCELL VARIANT [ARGS...]: without replay taps the
# first divergence is CELL and CAUSE ranks first; with them it is RCELL,
# confirmed by VARIANT
bug() {
	_g=$1 _b=$2 _c=$3 _cell=$4 _rcell=$5 _v=$6
	shift 6
	pair "$_g" "$_g-$_b" --bug "$_b" "$@"
	expect_exit 1 "$_g $_b" "$TBISECT" check --json --no-history "$T/$_g-$_b/ref" "$T/$_g-$_b/cand"
	json_is "$_g $_b: first divergence $_cell" first_divergence.cell "$_cell"
	json_is "$_g $_b: $_c first" causes.0.id "$_c"
	pair "$_g" "$_g-$_b-r" --bug "$_b" --replay "$@"
	expect_exit 1 "$_g $_b --replay" "$TBISECT" check --json --no-history "$T/$_g-$_b-r/ref" "$T/$_g-$_b-r/cand"
	json_is "$_g $_b --replay: first divergence $_rcell" first_divergence.cell "$_rcell"
	json_is "$_g $_b --replay: $_c first" causes.0.id "$_c"
	_got=$(json_get causes.0.confirmed.variant)
	check_that "$_g $_b --replay: confirmed by $_v" sh -c 'case "$1" in "$2"*) ;; *) echo "# got: $1"; exit 1 ;; esac' x \
		"$_got" "$_v"
}

# clean GEN NAME ARGS...: no divergence, nothing confirmed
clean() {
	_g=$1 _n=$2
	shift 2
	pair "$_g" "$_n" "$@"
	expect_exit 0 "$_g $_n: a clean port" "$TBISECT" check --json --no-history "$T/$_n/ref" "$T/$_n/cand"
	json_is "$_g $_n: match" verdict match
	json_is "$_g $_n: no cause" 'causes.#' 0
}

# other GEN NAME CAUSE ARGS...: an older bug on the new models, its own cause
# first, no other confirmed
other() {
	_g=$1 _n=$2 _c=$3
	shift 3
	pair "$_g" "$_n" "$@"
	run_cmd "$TBISECT" check --json --no-history "$T/$_n/ref" "$T/$_n/cand"
	json_is "$_g $_n: $_c first (what a replay confirms ranks first)" causes.0.id "$_c"
	_c1=$(json_get causes.1.confirmed)
	check_that "$_g $_n: one cause at most confirmed" test -z "$_c1" -o "$_c1" = null
}

bug mkdemo sinks-dropped attention-sink L0.attn L0.attn.core "no attention sinks (the reference: learned, fitted per head)"
bug mkdemo softcap-missing final-softcap logits logits "final soft-cap 10 dropped" --dtype bf16 --seq 64
bug mkdemo oai-plus-one mlp-activation L0.mlp L0.mlp.act "swiglu-oai without the +1 on up"
bug mkdemo oai-clamp mlp-activation L0.mlp L0.mlp.act "swiglu-oai without the clamps (swiglu_limit)" --seq 128
clean mkdemo clean-all --sinks --softcap 10 --mlp-act oai --replay --dtype bf16
other mkdemo gqa-sinks gqa-repeat --sinks --replay --bug gqa-repeat
other mkdemo lm-head-capped lm-head --softcap 10 --bug lm-head
other mkdemo silu-on-oai mlp-activation --mlp-act oai --replay --bug mlp-activation
other mkdemo gating-on-oai mlp-gating --mlp-act oai --replay --bug mlp-gating
expect_exit 2 "mkdemo: nan-overflow on SwiGLU-OAI refused" "$MKDEMO" --bug oai-clamp,nan-overflow "$T/x/ref" "$T/x/cand"
check_that "... in one line" test "$(wc -l <"$TAP_ERR")" -eq 1

if PYNP=$(find_python numpy); then
	bug pymodel sinks-dropped attention-sink L0.attn L0.attn.core "no attention sinks (the reference: learned, fitted per head)" --format bf16 --seq 160
	bug pymodel softcap-missing final-softcap logits logits "final soft-cap 3 dropped"
	bug pymodel sinks-wrong attention-sink L0.attn L0.attn.core "attention sinks of other values" --seq 64
	bug pymodel softcap-wrong final-softcap logits logits "final soft-cap 6 instead of 3"
	bug pymodel oai-plus-one mlp-activation L0.mlp L0.mlp.act "swiglu-oai without the +1 on up" --format bf16
	bug pymodel oai-clamp mlp-activation L0.mlp L0.mlp.act "swiglu-oai without the clamps (swiglu_limit)"
	clean pymodel py-clean-all --sinks --softcap 3 --mlp-act oai --replay
	other pymodel py-scale-sinks softmax-scale --sinks --replay --bug softmax-scale
else
	echo "# pymodel skipped: no python3 with numpy"
fi
tap_done
