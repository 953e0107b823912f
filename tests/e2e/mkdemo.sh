#!/bin/sh
# End to end: every bug of samples/mkdemo's catalogue, run through the real
# `tbisect check --json`, must show where `mkdemo --expect` says (the one
# table of expectations, shared with the docs): none matches, dtype-precision
# is close (exit 0), every other bug exits 1 with its first divergence at
# the expected cell.  Then formats, dtypes, re-dumping one side, errors.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP


# first_cell: the first divergence of the last check as "L0.attn" / "embed" / "none".
first_cell() {
	_l=$(json_get first_divergence.layer)
	_t=$(json_get first_divergence.tap)
	if [ -z "$_t" ]; then echo none; elif [ "$_l" = null ]; then echo "$_t"; else echo "L$_l.$_t"; fi
}

# judge DESC WANT REF CAND [CHECK-OPTS...]: check REF CAND against WANT (match, close or a cell).
judge() {
	_d=$1 _want=$2 _r=$3 _c=$4
	shift 4
	case $_want in
	match | close)
		expect_exit 0 "$_d: exit 0" "$TBISECT" check --json "$@" "$_r" "$_c"
		last_ok || return 0
		json_is "$_d: verdict $_want" verdict "$_want"
		;;
	*)
		expect_exit 1 "$_d: exit 1" "$TBISECT" check --json "$@" "$_r" "$_c"
		last_ok || return 0
		_got=$(first_cell)
		if [ "$_got" = "$_want" ]; then ok "$_d: first divergence $_want"; else not_ok "$_d: first divergence" "got $_got, expected $_want"; fi
		;;
	esac
}

# demo NAME MKDEMO-ARGS...: write pair $T/NAME/{ref,cand}.
demo() {
	_n=$1
	shift
	"$MKDEMO" "$@" "$T/$_n/ref" "$T/$_n/cand" || bail_out "mkdemo $* failed"
}

# --- the catalogue ---
"$MKDEMO" --list >"$T/list" || bail_out "mkdemo --list failed"
bugs=$(awk '{print $1}' "$T/list")
for want in none tokenizer embedding-scale norm-formulation norm-epsilon rope-style rope-theta \
	rotate-half-sign partial-rope qk-norm attention-layout gqa-repeat softmax-scale attention-mask \
	sliding-window mlp-activation mlp-gating mlp-bias residual-wiring weight-mapping dtype-precision \
	nan-overflow final-norm lm-head tied-embeddings dump-offset dump-duplicate; do
	check_that "--list has $want" grep -q "^$want  *[a-z-][a-z-]*  *[a-zA-Z]" "$T/list"
done
check_that "--list: one line per bug, each with a cause and a description" \
	test "$(awk 'NF >= 4' "$T/list" | wc -l)" -eq "$(wc -l <"$T/list")"
check_that "--list: the cause of a bug named after another" grep -q "^yarn-ramp  *yarn-scaling  *YaRN" "$T/list"

for variant in "" "--sub" "--replay" "--seq 128"; do
	for bug in $bugs; do
		# shellcheck disable=SC2086
		want=$("$MKDEMO" --expect "$bug" $variant) || bail_out "mkdemo --expect $bug failed"
		# shellcheck disable=SC2086
		demo "$bug$variant" --bug "$bug" $variant
		judge "$bug${variant:+ ($variant)}" "$want" "$T/$bug$variant/ref" "$T/$bug$variant/cand"
	done
done

# the MoE model: its bugs, the dense MLP's (which it does not have), attention
moe_bugs="moe-softmax moe-renorm moe-scaling moe-expert-order moe-shared moe-bias-weights moe-group moe-shared-gate moe-topk-k"
for variant in "--moe" "--moe --sub" "--moe-router mixtral --sub" "--moe-router qwen2 --sub"; do
	case $variant in
	*mixtral*) list="none moe-renorm moe-expert-order moe-topk-k" ;;
	*qwen2*) list="none moe-shared moe-shared-gate moe-topk-k" ;;
	*) list="none rope-style mlp-activation $moe_bugs" ;;
	esac
	for bug in $list; do
		# shellcheck disable=SC2086
		want=$("$MKDEMO" --expect "$bug" $variant) || bail_out "mkdemo --expect $bug failed"
		# shellcheck disable=SC2086
		demo "$bug$variant" --bug "$bug" $variant
		judge "$bug ($variant)" "$want" "$T/$bug$variant/ref" "$T/$bug$variant/cand"
	done
done
expect_exit 2 "a bug of a part the family lacks: refused" "$MKDEMO" --moe-router mixtral --bug moe-shared "$T/x/ref" "$T/x/cand"
check_that "refused in one line naming the families that have it" grep -qx \
	"mkdemo: --bug: moe-shared: the mixtral router has nothing it changes (use --moe-router deepseek or qwen2)" "$TAP_ERR"
# a bf16 hidden state flips experts at near ties, and only there: close;
# DeepSeek's ties are of the biased scores within the chosen groups; a
# position flipped upstream leaves the weights of later layers too
for fam in deepseek:8 mixtral:1 qwen2:1; do
	demo "moe-flips-$fam" --moe-router "${fam%:*}" --sub --seq 256 --seed "${fam#*:}" --bug dtype-precision
	judge "MoE near-tie flips ($fam)" close "$T/moe-flips-$fam/ref" "$T/moe-flips-$fam/cand"
	flips=0
	for l in 0 1 2 3; do
		json_is "MoE near-tie flips ($fam): nothing else differs in layer $l" "routing.$l.disagree.#" 0
		flips=$((flips + $("$JSONQ" "$TAP_OUT" "routing.$l.flipped.#")))
	done
	check_that "MoE near-tie flips ($fam): some ($flips)" test "$flips" -gt 0
done
# at seed 3 a later position attends to a flipped one and diverges: named as rounding
demo moe-leak --moe --sub --seed 3 --bug dtype-precision
expect_exit 1 "MoE flip leaking through attention" "$TBISECT" check --json "$T/moe-leak/ref" "$T/moe-leak/cand"
json_is "MoE flip leak: dtype-precision first" causes.0.id dtype-precision
# at seed 1 the first bad position, 151, comes right after the flip at 150:
# a leak, not a position table of 100 entries
demo moe-leak-late --moe --sub --seq 256 --seed 1 --bug dtype-precision
expect_exit 1 "MoE flip leaking late" "$TBISECT" check --json "$T/moe-leak-late/ref" "$T/moe-leak-late/cand"
json_is "MoE flip leaking late: dtype-precision first" causes.0.id dtype-precision
check_that "MoE flip leaking late: not a position table" sh -c '! grep -q "\"decode-position\"" "$1"' x "$TAP_OUT"

# --- expectations that do not depend on the table's own logic ---
expect_exit 0 "--expect prints" "$MKDEMO" --expect rope-style
check_that "rope-style first shows in L0.attn" grep -qx L0.attn "$TAP_OUT"
run_cmd "$MKDEMO" --expect rope-style --sub
check_that "... and in L0.attn.q with sub-taps" grep -qx L0.attn.q "$TAP_OUT"
run_cmd "$MKDEMO" --expect decode-position
check_that "decode-position is invisible at 16 positions" grep -qx match "$TAP_OUT"
run_cmd "$MKDEMO" --expect weight-mapping --layers 6
check_that "weight-mapping sits in the middle layer" grep -qx L3.attn "$TAP_OUT"

# --- what the signatures rest on ---
expect_exit 1 "sliding-window: check" "$TBISECT" check --json "$T/sliding-window/ref" "$T/sliding-window/cand"
json_is "sliding-window: first bad position is the window" first_divergence.first_bad_position 8
demo win5 --bug sliding-window --window 5
expect_exit 1 "--window 5: check" "$TBISECT" check --json "$T/win5/ref" "$T/win5/cand"
json_is "--window 5: first bad position 5" first_divergence.first_bad_position 5
expect_exit 1 "decode-position at 128: check" "$TBISECT" check --json "$T/decode-position--seq 128/ref" "$T/decode-position--seq 128/cand"
json_is "decode-position: first bad position 100" first_divergence.first_bad_position 100
expect_exit 1 "tokenizer: check" "$TBISECT" check --json "$T/tokenizer/ref" "$T/tokenizer/cand"
json_is "tokenizer: first bad position 5" first_divergence.first_bad_position 5
expect_exit 1 "embedding-scale: check" "$TBISECT" check --json "$T/embedding-scale/ref" "$T/embedding-scale/cand"
json_is "embedding-scale: norm ratio sqrt(64)" cells.0.norm_ratio 8
json_is "embedding-scale: cosine 1" cells.0.cosine 1
expect_exit 1 "tied-embeddings: check" "$TBISECT" check --json "$T/tied-embeddings/ref" "$T/tied-embeddings/cand"
json_is "tied-embeddings: final_norm matches" cells.21.status match
json_is "tied-embeddings: logits diverged" cells.22.status diverged
expect_exit 1 "nan-overflow: check" "$TBISECT" check --json "$T/nan-overflow/ref" "$T/nan-overflow/cand"
json_is "nan-overflow: no NaN in the reference" cells.9.nan.0 0
check_that "nan-overflow: NaN or Inf in the candidate" \
	test "$(json_get cells.9.nan.1)" -gt 0 -o "$(json_get cells.9.inf.1)" -gt 0
expect_exit 0 "dtype-precision: check" "$TBISECT" check --json "$T/dtype-precision/ref" "$T/dtype-precision/cand"
json_is "dtype-precision: embed exact" cells.0.status match
json_is "dtype-precision: logits close" cells.22.status close
json_is "every demo pair: nothing unpaired (ref)" unpaired.ref '[]'
json_is "every demo pair: nothing unpaired (cand)" unpaired.cand '[]'

# --- several bugs at once: the earliest shows first ---
demo multi --bug tied-embeddings,mlp-activation,rope-style
judge "three bugs" L0.attn "$T/multi/ref" "$T/multi/cand"
run_cmd "$MKDEMO" --expect tied-embeddings,mlp-activation,rope-style
check_that "--expect of three bugs agrees" grep -qx L0.attn "$TAP_OUT"

# --- formats, naming, dtypes ---
demo st --format safetensors --bug mlp-gating
check_that "safetensors: one file" test -f "$T/st/cand/activations.safetensors"
judge "safetensors, canonical names" L0.mlp "$T/st/ref" "$T/st/cand"
expect_exit 0 "ls the safetensors dump" "$TBISECT" ls "$T/st/cand"
check_that "canonical names in the file" grep -q '^layers.0.mlp  *L0.mlp  *f32  *\[1, 16, 64\]' "$TAP_OUT"
check_that "tokens stored as int64" grep -q '^tokens  *(token ids)  *i64  *\[1, 16\]' "$TAP_OUT"
demo stbf --format safetensors --dtype bf16 --bug none
judge "bf16 safetensors, no bug" match "$T/stbf/ref" "$T/stbf/cand"
expect_exit 0 "ls bf16 safetensors" "$TBISECT" ls "$T/stbf/ref"
check_that "bf16 dtype" grep -q '^layers.0.attn  *L0.attn  *bf16' "$TAP_OUT"
demo npbf --dtype bf16 --bug rope-style
check_that "bf16 npy tree has a dtypes.json manifest" grep -q bfloat16 "$T/npbf/ref/dtypes.json"
judge "bf16 npy through the manifest" L0.attn "$T/npbf/ref" "$T/npbf/cand"
demo f16 --dtype f16 --bug mlp-bias
judge "f16 npy" L0.mlp "$T/f16/ref" "$T/f16/cand"
expect_exit 0 "ls the npy dump" "$TBISECT" ls "$T/f16/ref"
check_that "HF names in the npy tree" grep -q '^model.layers.3.post_attention_layernorm  *L3.mlp_norm  *f16' "$TAP_OUT"
demo subs --sub --naming canonical
expect_exit 0 "ls canonical sub-taps" "$TBISECT" ls "$T/subs/ref"
check_that "attn.k sub-tap of [1, 16, 16]" grep -q '^layers.1.attn.k  *L1.attn.k  *f32  *\[1, 16, 16\]' "$TAP_OUT"
check_that "4*12+3 cells and tokens" grep -q '^52 tensors, 0 unmapped$' "$TAP_OUT"

# --- one side at a time: the reference stays, the candidate is re-dumped ---
"$MKDEMO" --ref-only "$T/mix/ref" || bail_out "mkdemo --ref-only failed"
check_that "--ref-only writes no candidate" test ! -e "$T/mix/cand"
"$MKDEMO" --cand-only --format safetensors --bug lm-head "$T/mix/cand" || bail_out "mkdemo --cand-only failed"
judge "npy/HF reference vs safetensors/canonical candidate" logits "$T/mix/ref" "$T/mix/cand"
json_is "mixed conventions: every cell paired" 'cells.#' 23
cksum "$T/mix/ref"/*.npy >"$T/ref.sum"
"$MKDEMO" --cand-only --format safetensors "$T/mix/cand" || bail_out "mkdemo --cand-only failed"
judge "candidate fixed and re-dumped" match "$T/mix/ref" "$T/mix/cand"
cksum "$T/mix/ref"/*.npy >"$T/ref2.sum"
check_that "--cand-only leaves the reference alone" cmp -s "$T/ref.sum" "$T/ref2.sum"

# --- reproducible, seeded ---
demo again --bug rope-style
check_that "same arguments, same bytes" cmp -s "$T/rope-style/cand/model.layers.2.mlp.npy" "$T/again/cand/model.layers.2.mlp.npy"
"$MKDEMO" --seed 2 --ref-only "$T/seed2" || bail_out "mkdemo --seed 2 failed"
judge "another seed is another model" embed "$T/again/ref" "$T/seed2"
"$MKDEMO" --seq 128 --ref-only "$T/long" || bail_out "mkdemo --seq 128 failed"
check_that "tokens of 16 positions are a prefix of 128" \
	cmp -s -i 128 -n 128 "$T/rope-style/ref/tokens.npy" "$T/long/tokens.npy"

# --- usage errors: exit 2, one line ---
expect_exit 2 "unknown bug" "$MKDEMO" --bug rope "$T/e/ref" "$T/e/cand"
check_that "unknown bug: one line naming it" \
	test "$(cat "$TAP_ERR")" = "mkdemo: --bug: unknown bug 'rope' (mkdemo --list shows them)"
expect_exit 2 "--seq below 8" "$MKDEMO" --seq 4 "$T/e/ref" "$T/e/cand"
check_that "--seq: says the range" grep -q "not an integer in 8..2048" "$TAP_ERR"
expect_exit 2 "--layers 1" "$MKDEMO" --layers 1 "$T/e/ref" "$T/e/cand"
expect_exit 2 "--format zip" "$MKDEMO" --format zip "$T/e/ref" "$T/e/cand"
expect_exit 2 "--ref-only with two directories" "$MKDEMO" --ref-only "$T/e/ref" "$T/e/cand"
expect_exit 2 "--ref-only and --cand-only" "$MKDEMO" --ref-only --cand-only "$T/e/ref"
expect_exit 2 "unknown option" "$MKDEMO" --bogus "$T/e/ref" "$T/e/cand"
expect_exit 2 "--expect of an unknown bug" "$MKDEMO" --expect nope
check_that "nothing written on errors" test ! -e "$T/e"
: >"$T/file"
# --- the taps a replay needs (--replay): each bug first shows in the op it is in ---
for case in rope-style:L0.attn.q_rope mlp-activation:L0.mlp.act attention-mask:L0.attn.core \
	softmax-scale:L0.attn.core norm-formulation:L0.attn_norm; do
	bug=${case%%:*} want=${case#*:}
	expect_exit 0 "--replay --bug $bug" "$MKDEMO" --replay --layers 2 --bug "$bug" "$T/replay-$bug/ref" "$T/replay-$bug/cand"
	expect_exit 1 "--replay --bug $bug: check" "$TBISECT" check --json "$T/replay-$bug/ref" "$T/replay-$bug/cand"
	json_is "--replay --bug $bug: first divergence $want" first_divergence.cell "$want"
done
expect_exit 0 "--replay: ls" "$TBISECT" ls "$T/replay-rope-style/ref"
for tap in attn.q attn.k attn.v attn.q_rope attn.k_rope attn.core attn.o mlp.gate mlp.up mlp.act mlp.down; do
	check_that "--replay writes L1.$tap" grep -q " L1\.$tap  *f32 " "$TAP_OUT"
done
expect_exit 1 "--replay --bug rope-style: check again" "$TBISECT" check --json "$T/replay-rope-style/ref" "$T/replay-rope-style/cand"
json_is "--replay: the third cell is L0.attn.q" cells.2.tap attn.q
json_is "--replay: q before RoPE matches under a RoPE bug" cells.2.status match
run_cmd "$MKDEMO" --expect rope-style --replay
check_that "--expect --replay: a RoPE bug shows in attn.q_rope" test "$(cat "$TAP_OUT")" = L0.attn.q_rope
expect_exit 2 "output under a regular file" "$MKDEMO" "$T/file/ref" "$T/file/cand"
expect_exit 0 "--help" "$MKDEMO" --help
check_that "--help shows usage" grep -q '^usage: mkdemo' "$TAP_OUT"

tap_done
