#!/bin/sh
# replaysweep.sh BUILD_DIR [WORK_DIR]: how often the replay confirms the
# right cause, and how often a wrong one, per dtype (doc/testing.md).
#
# Every bug a replay can prove, on two implementations of the model:
# mkdemo (f32, bf16, f16, an f32 reference against a bf16 candidate and the
# reverse, and against a candidate of bf16 values in float32 files; seeds 1-3; 16, 64 and 256 positions) and tests/pymodel/model.py
# (f32 and bf16 dumps, seeds 0-1, 32 and 160 positions); the MoE bugs on
# mkdemo's families only (--moe, BUG@FAMILY: --moe-router FAMILY).  Controls are bugs
# whose first divergence lands on a replayed op that no variant models, and
# ports with no bug.  A line per case goes to WORK_DIR/cases.tsv; the summary
# to standard output.  About three minutes on two cores, and five more for
# the MoE rows.
set -eu
build=$(cd "${1:?usage: replaysweep.sh BUILD_DIR [WORK_DIR]}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
work=${2:-$(mktemp -d)}
mkdir -p "$work"
tb=$build/tbisect mk=$build/samples/mkdemo py=${PYTHON:-/usr/bin/python3}
replayable="embedding-scale norm-formulation norm-epsilon rope-style rope-theta rotate-half-sign partial-rope qk-norm
attention-layout gqa-repeat softmax-scale attention-mask sliding-window scale-multiplier mlp-activation mlp-gating mlp-bias
residual-wiring final-norm decode-position
sinks-dropped softcap-missing oai-plus-one oai-clamp
rope-scaling-missing rope-scaling-all rope-llama3 rope-dynamic yarn-mscale yarn-mscale-twice yarn-ramp nope-inverted
kv-cache
moe-softmax moe-renorm moe-scaling moe-shared moe-bias-weights moe-group moe-shared-gate moe-topk-k moe-renorm@mixtral
moe-topk-k@mixtral moe-shared@qwen2"
# bugs only model.py has
pyonly="sinks-wrong softcap-wrong"
# the bugs whose cause id is not their name: BUG=CAUSE, from mkdemo's table and model.py's
causes="$("$mk" --list | awk '$2 != "-" && $1 != $2 { print $1 "=" $2 }')
$("$py" -c 'import sys; sys.path.insert(0, sys.argv[1]); import model
print(" ".join("%s=%s" % kv for kv in model.CAUSE.items()))' "$src/tests/pymodel")"
controls="none dtype-precision weight-mapping dump-offset dump-duplicate tokenizer embedding-weights nan-overflow
dump-aliasing moe-expert-order none@deepseek dtype-precision@deepseek none@mixtral dtype-precision@qwen2"
# BUG@FAMILY: the bug on that MoE family (mkdemo --moe-router); a moe-* bug alone: --moe

# bf16v: a candidate computed in bf16 and cast to float32 before it was dumped
round_bf16='
import glob, sys
import numpy as np
for f in glob.glob(sys.argv[1] + "/*.npy"):
    a = np.load(f)
    if a.dtype == np.float32:
        u = a.view(np.uint32).astype(np.uint64)
        np.save(f, (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32))
'

# one IMPL DTYPE SEED SEQ BUG DIR: check the pair in DIR, one line of cases.tsv
one() {
	"$tb" check --no-history "$6/ref" "$6/cand" >"$6/out.txt" 2>&1 || :
	top=$(sed -n 's/^  1\. \([a-z-]*\) .*/\1/p' "$6/out.txt" | head -n 1)
	if grep -q "confirmed by replay" "$6/out.txt"; then conf=$top; else conf=-; fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$conf"
}

: >"$work/cases.tsv"
for bug in $replayable $controls $pyonly; do
	case " $pyonly " in *" $bug "*) dts= ;; *) dts="f32 bf16 f16 f32/bf16 bf16/f32 f32/bf16v" ;; esac
	for dt in $dts; do
		for seed in 1 2 3; do
			for seq in 16 64 256; do
				d=$work/mkdemo/$bug-$(echo "$dt" | tr / -)-$seed-$seq
				mkdir -p "$d"
				set -- --replay --seed "$seed" --seq "$seq"
				case $bug in
				*@*) set -- "$@" --moe-router "${bug#*@}" ;;
				moe-*) set -- "$@" --moe ;;
				esac
				b=${bug%@*}
				# --bug: the model options a bug implies (sinks, a soft-cap, SwiGLU-OAI, RoPE scaling, NoPE) are the reference's too
				"$mk" "$@" --dtype "${dt%/*}" --bug "$b" --ref-only "$d/ref" >/dev/null
				if [ "$dt" = f32/bf16v ]; then
					"$mk" "$@" --dtype f32 --bug "$b" --cand-only "$d/cand" >/dev/null
					"$py" -c "$round_bf16" "$d/cand"
				else
					"$mk" "$@" --dtype "${dt#*/}" --bug "$b" --cand-only "$d/cand" >/dev/null
				fi
				one mkdemo "$dt" "$seed" "$seq" "$bug" "$d" >>"$work/cases.tsv"
				rm -rf "$d/ref" "$d/cand" # the report stays: the pairs would take gigabytes
			done
		done
	done
	case $bug in *@* | moe-*) continue ;; esac # the MoE families are mkdemo's
	for fmt in npy bf16; do
		for seed in 0 1; do
			for seq in 32 160; do
				d=$work/pymodel/$bug-$fmt-$seed-$seq
				mkdir -p "$d"
				"$py" "$src/tests/pymodel/model.py" --replay --bug "$bug" --format "$fmt" --seed "$seed" \
					--seq "$seq" "$d/ref" "$d/cand" >/dev/null 2>&1 || continue
				[ "$fmt" = npy ] && dt=f32 || dt=bf16
				one pymodel "$dt" "$seed" "$seq" "$bug" "$d" >>"$work/cases.tsv"
				rm -rf "$d/ref" "$d/cand"
			done
		done
	done
done

# decode-position needs positions past its table of 100, rope-dynamic past original_max_position_embeddings
# (16): shorter pairs are not replayable
awk -F'\t' -v rep="$(echo $replayable $pyonly)" -v cs="$(echo $causes)" '
BEGIN {
	n = split(rep, r, " "); for (i = 1; i <= n; i++) R[r[i]] = 1
	n = split(cs, c, " "); for (i = 1; i <= n; i++) { split(c[i], kv, "="); C[kv[1]] = kv[2] }
}
{
	k = $1 " " $2
	b = $5; sub(/@.*/, "", b)
	want = b in C ? C[b] : b
	short = ($5 == "decode-position" && $4 < 100) || ($5 == "rope-dynamic" && $4 <= 16)
	if ($5 in R && !short) { tot[k]++; if ($6 == want) ok[k]++ }
	else ctl[k]++
	if ($6 != "-" && $6 != want) wrong[k]++
}
END {
	for (k in tot) { split(k, a, " "); printf "%-8s %-9s %5d of %-4d %8d of %-4d\n", a[1], a[2], ok[k], tot[k], wrong[k], tot[k] + ctl[k] }
}' "$work/cases.tsv" | sort | sed '1i model    dtype        confirmed    wrong confirmed'
