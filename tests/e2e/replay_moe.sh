#!/bin/sh
# Prove an MoE port's cause (tbisect-rules(5) CONFIRMED CAUSES): mkdemo's
# MoE families with their replay taps, each bug where it first shows, its
# cause first and confirmed by the replay of that cell (the router's
# weights, its chosen ids, the combine), with an f32 and a bf16 candidate;
# nothing confirmed on a clean port, a precision-only port, or a bug the
# replays have no variant for (experts converted in another order).
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

# case_ FAMILY BUG DTYPE CAUSE VARIANT: the pair, its first divergence, its
# cause first and the variant confirmed (a prefix; -: nothing confirmed)
case_() {
	d=$T/$1-$2-$3
	"$MKDEMO" --moe-router "$1" --replay --seq 64 --bug "$2" --ref-only "$d/ref" >/dev/null || bail_out "mkdemo $1 $2 failed"
	"$MKDEMO" --moe-router "$1" --replay --seq 64 --dtype "$3" --bug "$2" --cand-only "$d/cand" >/dev/null ||
		bail_out "mkdemo $1 $2 failed"
	want=$("$MKDEMO" --moe-router "$1" --replay --seq 64 --expect "$2")
	case $want in
	close | match) expect_exit 0 "$1 $2 ($3)" "$TBISECT" check --json --no-history "$d/ref" "$d/cand" ;;
	*)
		expect_exit 1 "$1 $2 ($3)" "$TBISECT" check --json --no-history "$d/ref" "$d/cand"
		json_is "$1 $2 ($3): first divergence" first_divergence.cell "$want"
		json_is "$1 $2 ($3): $4 first" causes.0.id "$4"
		;;
	esac
	got=$(json_get causes.0.confirmed.variant)
	[ -n "$got" ] || got=-
	case $got in
	"$5"*) ok "$1 $2 ($3): confirmed: $got" ;;
	*) not_ok "$1 $2 ($3): confirmed" "got '$got', expected '$5'" ;;
	esac
}
for dt in f32 bf16; do
	case_ deepseek moe-bias-weights $dt moe-routing "selection bias added into the weights"
	case_ deepseek moe-group $dt moe-routing "group-limited top-k ignored"
	case_ deepseek moe-softmax $dt moe-routing "softmax scores before the top-k"
	case_ deepseek moe-topk-k $dt moe-routing "top-3 experts (the reference: top-2)"
	case_ mixtral moe-topk-k $dt moe-routing "top-3 experts (the reference: top-2)"
	case_ deepseek moe-shared $dt shared-expert "shared expert left out"
	case_ qwen2 moe-shared-gate $dt shared-expert "shared expert's gate not applied"
	case_ mixtral moe-renorm $dt moe-routing "top-k weights not renormalised"
	case_ deepseek moe-expert-order $dt expert-mapping -
done
case_ qwen2 none f32 - -
case_ deepseek dtype-precision bf16 dtype-precision -
tap_done
