#!/bin/sh
# The diagnosis on the tiny-model catalogue: for each injected bug, the
# cause id that must rank first (or within the top N), and causes that must
# not appear.  One table, below; mkdemo makes the pairs.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

# rank_of ID: 1-based rank of cause ID in $TAP_OUT, 0 when absent.
rank_of() {
	_n=$(json_get 'causes.#')
	_n=${_n:-0}
	_i=0
	while [ "$_i" -lt "$_n" ]; do
		[ "$(json_get "causes.$_i.id")" = "$1" ] && { echo $((_i + 1)); return; }
		_i=$((_i + 1))
	done
	echo 0
}

# bug | mkdemo options | cause | within rank (1: first)
while IFS='|' read -r bug opts cause within; do
	case $bug in '' | '#'*) continue ;; esac
	dir=$T/$bug$(echo "$opts" | tr -d ' -')
	# shellcheck disable=SC2086
	"$MKDEMO" $opts --bug "$bug" "$dir/ref" "$dir/cand" >/dev/null || bail_out "mkdemo --bug $bug failed"
	run_cmd "$TBISECT" check --json --no-history "$dir/ref" "$dir/cand"
	r=$(rank_of "$cause")
	top=$(json_get causes.0.id)
	if [ "$r" -ge 1 ] && [ "$r" -le "$within" ]; then
		ok "$bug${opts:+ ($opts)}: $cause ranked $r (<= $within)"
	else
		not_ok "$bug${opts:+ ($opts)}: $cause within top $within" "rank $r, top cause '$top'"
	fi
done <<'TABLE'
tokenizer||tokenizer|1
tokenizer-bos||tokenizer|1
embedding-weights||embedding-weights|1
embedding-scale||embedding-scale|1
norm-formulation||norm-formulation|1
norm-epsilon||norm-epsilon|1
rope-style||rope-style|1
rope-style|--seq 64|rope-style|1
rope-style|--sub|rope-style|1
rope-theta||rope-theta|1
rope-theta|--seq 128|rope-theta|1
rope-theta|--sub|rope-theta|1
rotate-half-sign||rotate-half-sign|3
partial-rope||partial-rope|3
decode-position|--seq 128|decode-position|1
qk-norm||qk-norm|1
qk-norm|--sub|qk-norm|1
attention-layout||attention-layout|1
attention-layout|--sub|attention-layout|1
gqa-repeat||gqa-repeat|1
softmax-scale||softmax-scale|1
softmax-scale|--seq 64|softmax-scale|1
attention-mask||attention-mask|1
sliding-window||sliding-window|1
scale-multiplier||scale-multiplier|1
mlp-activation||mlp-activation|1
mlp-gating||mlp-gating|1
mlp-bias||mlp-bias|1
oai-clamp||mlp-activation|1
moe-group|--moe|moe-routing|1
moe-bias-weights|--moe --seq 64|moe-routing|1
residual-wiring||residual-wiring|1
weight-mapping||weight-mapping|1
nan-overflow||nan-overflow|1
dtype-precision||dtype-precision|1
final-norm||final-norm|1
lm-head||lm-head|1
tied-embeddings||tied-embeddings|1
dump-offset||dump-offset|1
dump-duplicate||dump-duplicate|1
rope-style|--format safetensors --dtype bf16|rope-style|1
mlp-gating|--format safetensors --dtype bf16|mlp-gating|1
rope-style|--seq 128|rope-style|1
rope-style|--seed 3 --seq 32|rope-style|1
rope-theta|--seed 5 --format safetensors --dtype bf16|rope-theta|1
rotate-half-sign|--seed 4 --seq 24|rotate-half-sign|3
partial-rope|--seed 6 --seq 48|partial-rope|3
attention-layout|--seed 3 --seq 32|attention-layout|1
attention-layout|--seq 128|attention-layout|1
attention-layout|--seed 4 --seq 512|attention-layout|1
qk-norm|--seed 6 --seq 48|qk-norm|1
qk-norm|--seq 512|qk-norm|1
qk-norm|--seed 7 --seq 512|qk-norm|1
qk-norm|--seed 2 --seq 512 --format safetensors --dtype bf16|qk-norm|1
rotate-half-sign|--sub|rotate-half-sign|1
rotate-half-sign|--sub --seed 3 --seq 64 --dtype bf16|rotate-half-sign|1
partial-rope|--sub|partial-rope|1
partial-rope|--sub --seed 2 --seq 256 --dtype bf16|partial-rope|1
rope-style|--sub --seed 4 --seq 512|rope-style|1
sinks-dropped|--sub --seed 3 --seq 64 --dtype bf16|attention-sink|1
mlp-gating|--sub|mlp-gating|1
mlp-bias|--sub|mlp-bias|1
weight-mapping|--sub|weight-mapping|1
scale-multiplier|--sub|scale-multiplier|1
TABLE

# A float32 reference against a bfloat16 candidate: every cell carries
# rounding error, so nothing upstream is exact and no position is.
for bug in sliding-window weight-mapping rope-style mlp-gating; do
	dir=$T/mixed-$bug
	"$MKDEMO" --seed 5 --ref-only --bug "$bug" "$dir/ref" >/dev/null || bail_out "mkdemo --ref-only failed"
	"$MKDEMO" --seed 5 --cand-only --bug "$bug" --format safetensors --dtype bf16 "$dir/cand" >/dev/null ||
		bail_out "mkdemo --cand-only failed"
	run_cmd "$TBISECT" check --json --no-history "$dir/ref" "$dir/cand"
	check_that "f32 reference, bf16 candidate: $bug ranked first" test "$(rank_of "$bug")" = 1
done

# Head counts given: o_proj has mixed the heads of the attention output, so
# per-head evidence applies to q/k/v only and must not sink these.
for bug in attention-layout gqa-repeat rope-style; do
	"$MKDEMO" --seed 3 --bug "$bug" "$T/heads-$bug/ref" "$T/heads-$bug/cand" >/dev/null || bail_out "mkdemo failed"
	run_cmd "$TBISECT" check --json --no-history --heads 8 --kv-heads 2 "$T/heads-$bug/ref" "$T/heads-$bug/cand"
	check_that "--heads 8 --kv-heads 2: $bug ranked first" test "$(rank_of "$bug")" = 1
done

# An output projection (o_proj, down_proj) is dumped before its group and is
# the first divergence, as the contract orders it; the diagnosis reads the
# group's cell, the same tensor.
"$MKDEMO" --sub --bug weight-mapping "$T/wmsub/ref" "$T/wmsub/cand" >/dev/null
run_cmd "$TBISECT" check --json --no-history "$T/wmsub/ref" "$T/wmsub/cand"
check_that "o_proj dumped: first divergence is L2.attn.o" test "$(json_get first_divergence.tap)" = attn.o
check_that "o_proj dumped: weight-mapping first" test "$(json_get causes.0.id)" = weight-mapping
"$MKDEMO" --sub --bug mlp-activation "$T/masub/ref" "$T/masub/cand" >/dev/null
run_cmd "$TBISECT" check --json --no-history "$T/masub/ref" "$T/masub/cand"
check_that "down_proj dumped: first divergence is L0.mlp.down" test "$(json_get first_divergence.tap)" = mlp.down
check_that "down_proj dumped: mlp-activation first" test "$(json_get causes.0.id)" = mlp-activation
check_that "down_proj dumped: qk-norm not offered" test "$(rank_of qk-norm)" = 0

# Causes that must not be offered.
"$MKDEMO" --bug none "$T/none/ref" "$T/none/cand" >/dev/null
expect_exit 0 "clean pair: exit 0" "$TBISECT" check --json --no-history "$T/none/ref" "$T/none/cand"
check_that "clean pair: no cause at all" test "$(json_get 'causes.#')" = 0
"$MKDEMO" --bug dtype-precision "$T/prec/ref" "$T/prec/cand" >/dev/null
run_cmd "$TBISECT" check --json --no-history "$T/prec/ref" "$T/prec/cand"
check_that "precision only: no origin blamed" test "$(json_get origin)" = null
check_that "precision only: only dtype-precision offered" test "$(json_get 'causes.#')" = 1
"$MKDEMO" --bug rope-style "$T/rs/ref" "$T/rs/cand" >/dev/null
run_cmd "$TBISECT" check --json --no-history "$T/rs/ref" "$T/rs/cand"
for id in mlp-activation norm-formulation tokenizer dtype-precision weight-mapping attention-mask; do
	check_that "rope-style: $id not offered" test "$(rank_of "$id")" = 0
done
"$MKDEMO" --bug mlp-activation "$T/ma/ref" "$T/ma/cand" >/dev/null
run_cmd "$TBISECT" check --json --no-history "$T/ma/ref" "$T/ma/cand"
for id in rope-style softmax-scale gqa-repeat residual-wiring; do
	check_that "mlp-activation: $id not offered" test "$(rank_of "$id")" = 0
done
check_that "why names the measured numbers" sh -c "'$JSONQ' '$TAP_OUT' causes.0.why | grep -q 'rel_l2 0\.[0-9]*, cosine 0\.9'"
check_that "look_at says what to check" sh -c "'$JSONQ' '$TAP_OUT' causes.0.look_at | grep -q 'hidden_act'"
run_cmd "$TBISECT" check --no-history "$T/ma/ref" "$T/ma/cand"
check_that "text report lists the causes" grep -q '^  1\. mlp-activation (score 0\.[0-9]*)$' "$TAP_OUT"
check_that "origin is the MLP" grep -q '^origin: error is born at L0.mlp' "$TAP_OUT"

tap_done
