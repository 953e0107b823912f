#!/bin/sh
# An audit of what the reports say, not of one case (tests/e2e/audit.py):
# on every bug mkdemo injects, with and without replay taps, in f32 and
# f16 (whose MLP overflows on both sides), the MoE model's bugs and its
# near-tie flips, and on a second model's bf16 port whose o_proj output
# carries the bug and its Hugging Face hooks' dump whose attn.o replay
# confirms a cause no rule offers, every number a why-text quotes
# is the feature its rule names, measured at the cell the text names, and
# every cell's status follows from the metrics the report shows for it.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
need_python json
T=$TAP_TMP
n=0

# report NAME REF CAND: the JSON report of a pair with its features, in $T/NAME.json
report() {
	"$TBISECT" check --json --features --no-history "$2" "$3" >"$T/$1.json" 2>"$T/$1.err" || [ $? -eq 1 ] ||
		bail_out "check $1 failed: $(cat "$T/$1.err")"
	n=$((n + 1))
}
for mode in plain replay f16 moe; do
	case $mode in
	plain) opt= ;;
	replay) opt=--replay ;;
	f16) opt="--replay --dtype f16" ;;
	moe) opt="--moe --sub" ;;
	esac
	# shellcheck disable=SC2086
	"$MKDEMO" $opt --ref-only "$T/ref-$mode" >/dev/null || bail_out "mkdemo failed"
	for bug in $("$MKDEMO" --list | awk '{ print $1 }'); do
		[ "$mode" = f16 ] && case $bug in tokenizer | softmax-scale | mlp-activation) ;; *) continue ;; esac
		[ "$mode" = moe ] && case $bug in moe-* | dtype-precision | rope-style) ;; *) continue ;; esac
		# shellcheck disable=SC2086
		"$MKDEMO" $opt --bug "$bug" --cand-only "$T/$bug-$mode" >/dev/null || bail_out "mkdemo --bug $bug failed"
		report "$bug-$mode" "$T/ref-$mode" "$T/$bug-$mode"
	done
done
if PYNP=$(find_python numpy); then
	"$PYNP" "$top_srcdir/tests/pymodel/model.py" --replay --bug scale-multiplier --format bf16 --seq 32 \
		"$T/py-ref" "$T/py-cand" >/dev/null || bail_out "model.py failed"
	report py-scale-multiplier "$T/py-ref" "$T/py-cand"
	# Hugging Face hooks: the replay of attn.o names a cause no rule offers there
	"$PYNP" "$top_srcdir/tests/pymodel/model.py" --subtaps --bug rope-scaling-all --seq 160 \
		"$T/hf-ref" "$T/hf-cand" >/dev/null || bail_out "model.py failed"
	report hf-rope-scaling-all "$T/hf-ref" "$T/hf-cand"
fi
check_that "the causes and cells of $n reports hold what they quote" \
	"$PY" "$top_srcdir/tests/e2e/audit.py" "$top_srcdir/data/rules.json" "$T"/*.json
tap_done
