#!/bin/sh
# The replay of attn.o without o_proj's input (tbisect-rules(5), attn.o):
# tests/pymodel/model.py --subtaps dumps q, k and v before RoPE and attn.o,
# as Hugging Face's q_proj, k_proj, v_proj and o_proj hooks do.  Each RoPE
# bug, a llama3 or YaRN reference's, the softmax scale, the kv heads'
# mapping, a sliding window (the reference's own too) and learned sinks are confirmed by
# their own variant through o_proj fitted to the reference (160 positions
# against o_proj's 128 inputs), in f32 and bf16; a transposed o_proj, an
# fp8 KV cache, no causal mask and a short RoPE table are confirmed as
# nothing; with too few
# positions the report says how many the replay needs.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
need_python numpy
T=$TAP_TMP

# pair BUG FORMAT [MODEL.PY OPTIONS]: the dumps of one bug into $T/p
pair() {
	rm -rf "$T/p"
	_bug=$1 _fmt=$2
	shift 2
	"$PY" "$top_srcdir/tests/pymodel/model.py" --subtaps --seq 160 --seed 1 --bug "$_bug" --format "$_fmt" "$@" \
		"$T/p/ref" "$T/p/cand" >/dev/null || bail_out "model.py --bug $_bug failed"
}

while IFS='|' read -r bug fmt cell cause variant; do
	pair "$bug" "$fmt"
	run_cmd "$TBISECT" check --json --no-history "$T/p/ref" "$T/p/cand"
	got="$(json_get first_divergence.cell) $(json_get causes.0.id)"
	check_that "$bug ($fmt): $cell, $cause first" test "$got" = "$cell $cause"
	v=$(json_get causes.0.confirmed.variant)
	case $v in
	*"$variant"*) ok "$bug ($fmt): confirmed by '$v'" ;;
	*) not_ok "$bug ($fmt): confirmed by '$variant'" "got '$v'" ;;
	esac
done <<'TABLE'
rope-style|npy|L0.attn.o|rope-style|interleaved pairs
rotate-half-sign|bf16|L0.attn.o|rotate-half-sign|rotation by -theta
partial-rope|npy|L0.attn.o|partial-rope|rotary on 16 of 32 channels
nope-inverted|bf16|L0.attn.o|nope-layers|no rotation
rope-theta|bf16|L0.attn.o|rope-theta|theta 5e+05 (the reference: 1e+04)
softmax-scale|npy|L0.attn.o|softmax-scale|scores x5.657
rope-scaling-missing|bf16|L1.attn.o|rope-scaling|no RoPE scaling (the reference: linear x8)
rope-scaling-all|npy|L0.attn.o|rope-scaling|theta 1e+06, linear scaling x8
rope-llama3|bf16|L0.attn.o|rope-scaling|llama3 low_freq_factor and high_freq_factor swapped
yarn-mscale|npy|L0.attn.o|yarn-scaling|attention factor 1.139 applied 0 times
yarn-mscale-twice|bf16|L0.attn.o|yarn-scaling|attention factor 1.139 applied 2 times
yarn-ramp|npy|L0.attn.o|yarn-scaling|YaRN without its ramp
gqa-repeat|npy|L0.attn.o|gqa-repeat|kv heads tiled (h % kv_heads), not repeated
sliding-window|bf16|L0.attn.o|sliding-window|a sliding window of 8 positions
sinks-dropped|npy|L0.attn.o|attention-sink|attention sinks dropped
sinks-wrong|bf16|L0.attn.o|attention-sink|attention sinks of other values
TABLE

# --heads gives the head dim: the same variant, found without trying others
pair rope-style bf16
run_cmd "$TBISECT" check --json --no-history --heads 4 "$T/p/ref" "$T/p/cand"
check_that "rope-style with --heads 4: confirmed" \
	test "$(json_get causes.0.confirmed.variant)" = "interleaved pairs (2i, 2i+1)"

# Gemma 3's sliding layers keep the last 8 keys (--layer-types): the
# reference's own window is found, and the candidate's against it
pair rope-scaling-all npy
run_cmd "$TBISECT" check --json --no-history "$T/p/ref" "$T/p/cand"
case $(json_get causes.0.why) in
*"the reference computes RoPE rotate-half theta 1e+04, window 8 "*) ok "rope-scaling-all: the reference's window 8 found" ;;
*) not_ok "rope-scaling-all: the reference's window 8 found" "$(json_get causes.0.why)" ;;
esac
pair sliding-window bf16 --layer-types
run_cmd "$TBISECT" check --json --no-history "$T/p/ref" "$T/p/cand"
check_that "sliding-window with layer types: at the first global layer, confirmed" \
	test "$(json_get first_divergence.cell) $(json_get causes.0.confirmed.variant)" = \
	"L1.attn.o a sliding window of 8 positions"
rm -rf "$T/p"
"$MKDEMO" --sub --seq 128 --layer-types --ref-only "$T/p/ref" >/dev/null
"$MKDEMO" --sub --seq 128 --cand-only "$T/p/cand" >/dev/null
run_cmd "$TBISECT" check --json --no-history "$T/p/ref" "$T/p/cand"
check_that "mkdemo: a sliding layer without its window (q and k after RoPE)" \
	test "$(json_get first_divergence.cell) $(json_get causes.0.confirmed.variant)" = \
	"L0.attn.o no sliding window (the reference: 8)"

# what no variant models, nothing confirmed (a RoPE table of 100 positions changes the rows past it, as a
# window would)
for case in "weight-mapping npy" "kv-cache bf16" "attention-mask npy" "decode-position npy"; do
	# shellcheck disable=SC2086
	pair $case
	run_cmd "$TBISECT" check --json --no-history "$T/p/ref" "$T/p/cand"
	check_that "${case% *}: nothing confirmed" test -z "$(json_get causes.0.confirmed.variant)"
done

# 64 positions: fewer than half of o_proj's 128 inputs and their spare
rm -rf "$T/p"
"$PY" "$top_srcdir/tests/pymodel/model.py" --subtaps --seq 64 --bug rope-style "$T/p/ref" "$T/p/cand" >/dev/null
run_cmd "$TBISECT" check --no-history "$T/p/ref" "$T/p/cand"
check_that "64 positions: the report says the replay needs 80" \
	grep -q "fits o_proj to both sides, which needs 80 positions" "$TAP_OUT"
tap_done
