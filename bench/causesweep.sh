#!/bin/sh
# causesweep.sh BUILD_DIR [WORK_DIR]: how often the diagnosis finds the
# right place and the right cause, per implementation, tap set and length
# (doc/testing.md).
#
# Every bug of two implementations of the model: mkdemo (16, 64, 256 and
# 512 positions; f32, bf16 and an f32 reference against a bf16 candidate)
# and tests/pymodel/model.py (32, 160 and 512 positions; the same dtypes;
# five shapes of hidden/heads/head_dim/kv-heads, one with a real config's
# head_dim 128 and original_max_position_embeddings), each with three tap sets:
# the outputs only, the sub-taps (mkdemo --sub, model.py --subtaps) and the
# replay taps (--replay).  Dtypes, seeds and shapes are taken in turn
# rather than crossed, to keep it to a few minutes on two cores.  The place is right
# when the first divergence is the one the generator expects (mkdemo
# --expect; for model.py the one tests/pymodel/check.py computes from the
# dumps).  A bug that leaves no divergence (decode-position below its table
# of 100, a correct port, precision) is right when no cause but
# dtype-precision is offered.  A line per case goes to WORK_DIR/cases.tsv;
# the summary to standard output.
set -eu
build=$(cd "${1:?usage: causesweep.sh BUILD_DIR [WORK_DIR]}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
work=${2:-$(mktemp -d)}
mkdir -p "$work"
tb=$build/tbisect mk=$build/samples/mkdemo py=${PYTHON:-/usr/bin/python3}
taps="out sub replay"

# one line of cases.tsv from a report: IMPL DTYPE SEED SEQ TAPS CAUSE EXPECTED REPORT
# (CAUSE: the bug's cause id, mkdemo --list's second column or model.py's cause())
line='
import json, sys
impl, dt, seed, seq, taps, cause, want, path = sys.argv[1:9]
try:
    rep = json.load(open(path))
except ValueError:
    rep = {}
fd = rep.get("first_divergence")
got = "-" if not fd else (fd["tap"] if fd["layer"] is None else "L%d.%s" % (fd["layer"], fd["tap"]))
ids = [c["id"] for c in rep.get("causes", [])]
conf = ",".join(c["id"] for c in rep.get("causes", []) if c.get("confirmed")) or "-"
if want in ("-", "match", "close"):
    want, loc = "-", got == "-"
    first = top3 = not ids or ids[0] == "dtype-precision"
else:
    loc = got == want
    first, top3 = ids[:1] == [cause], cause in ids[:3]
print("\t".join([impl, dt, seed, seq, taps, cause, want, got, "%d" % loc, "%d" % first, "%d" % top3,
                 ids[0] if ids else "-", conf]))
'

# mkdemo DTYPE SEED SEQ TAPS BUG: one mkdemo case
mkcase() {
	d=$work/mkdemo/$5-$(echo "$1" | tr / -)-$2-$3-$4
	mkdir -p "$d"
	set -- "$@" --seed "$2" --seq "$3"
	case $4 in sub) set -- "$@" --sub ;; replay) set -- "$@" --replay ;; esac
	case $5 in moe-*) set -- "$@" --moe ;; esac
	dt=$1 seed=$2 seq=$3 tp=$4 bug=$5
	shift 5
	"$mk" "$@" --dtype "${dt%/*}" --bug "$bug" --ref-only "$d/ref" >/dev/null
	"$mk" "$@" --dtype "${dt#*/}" --bug "$bug" --cand-only "$d/cand" >/dev/null
	want=$("$mk" "$@" --expect "$bug")
	cause=$("$mk" --list | awk -v b="$bug" '$1 == b { print $2 }')
	"$tb" check --json --no-history "$d/ref" "$d/cand" >"$d/out.json" 2>/dev/null || :
	"$py" -c "$line" mkdemo "$dt" "$seed" "$seq" "$tp" "$cause" "$want" "$d/out.json"
	rm -rf "$d/ref" "$d/cand"
}

# the model.py cases of one half (0 or 1) of the list, in one process
pycases='
import os, shutil, subprocess, sys
sys.path.insert(0, sys.argv[1] + "/tests/pymodel")
import check, model
tb, work, half, line = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
SHAPES = [dict(hidden=128, heads=4, head_dim=32, kv_heads=2, mlp=256),
          dict(hidden=96, heads=6, head_dim=16, kv_heads=3, mlp=256),
          dict(hidden=256, heads=8, head_dim=32, kv_heads=4, mlp=512),
          dict(hidden=256, heads=8, head_dim=64, kv_heads=2, mlp=512, theta=1e6),
          # RoPE as a real config has it: Llama head_dim 128, original_max_position_embeddings 8192
          dict(hidden=256, heads=2, head_dim=128, kv_heads=1, mlp=512, rope_orig=8192)]
DTYPES = {"f32": ("npy", "npy"), "bf16": ("bf16", "bf16"), "f32/bf16": ("npy", "bf16")}
n = 0
# the MoE bugs need --moe and a family: tests/pymodel/moecheck.py sweeps them
for bug in [b for b in model.BUGS if not b.startswith("moe-")]:
    for seq in (32, 160, 512):
        for taps in ("out", "sub", "replay"):
            n += 1
            if n % 2 != half:
                continue
            dt = list(DTYPES)[(n // 3 + n // 9) % 3]
            shape = dict(SHAPES[n % len(SHAPES)], seq=seq, layers=3)
            if taps != "out":
                shape["subtaps" if taps == "sub" else "replay"] = True
            seed = (n + n // len(SHAPES)) % 5
            fmts = DTYPES[dt]
            d, ref, cand, layers = check.make_case(bug, fmts, seed, shape, os.path.join(work, "%d" % n))
            read = [check.read_safetensors if f != "npy" else (lambda p: check.read_npy_tree(p, layers))
                    for f in fmts]
            want = check.first_divergence(read[0](ref), read[1](cand), layers)
            out = os.path.join(work, "%d.json" % n)
            with open(out, "w") as f:
                subprocess.run([tb, "check", "--json", "--no-history", ref, cand], stdout=f,
                               stderr=subprocess.DEVNULL)
            sys.stdout.flush()
            subprocess.run([sys.executable, "-c", line, "pymodel", dt, str(seed), str(seq), taps,
                            "dtype-precision" if bug == "none" and fmts[0] != fmts[1] else model.cause(bug), want, out])
            shutil.rmtree(os.path.join(work, "%d" % n))
'

mkhalf() {
	n=0 half=$1
	for bug in $("$mk" --list | cut -d' ' -f1); do
		for seq in 16 64 256 512; do
			for tp in $taps; do
				n=$((n + 1))
				[ $((n % 2)) = "$half" ] || continue
				set -- f32 bf16 f32/bf16
				shift $(((n / 3 + n / 12) % 3))
				mkcase "$1" $(((n + n / 12) % 3 + 1)) "$seq" "$tp" "$bug"
			done
		done
	done
}

mkdir -p "$work/mkdemo" "$work/pymodel"
{
	mkhalf 0 >"$work/mk0.tsv" &
	mkhalf 1 >"$work/mk1.tsv" &
	wait
	"$py" -c "$pycases" "$src" "$tb" "$work/pymodel" 0 "$line" >"$work/py0.tsv" &
	"$py" -c "$pycases" "$src" "$tb" "$work/pymodel" 1 "$line" >"$work/py1.tsv" &
	wait
}
cat "$work/mk0.tsv" "$work/mk1.tsv" "$work/py0.tsv" "$work/py1.tsv" >"$work/cases.tsv"

# columns: impl dtype seed seq taps bug want got loc first top3 top confirmed
awk -F'\t' '
function add(k) { n[k]++; loc[k] += $9; one[k] += $10; three[k] += $11; if ($5 == "replay" && $7 != "-") { rp[k]++; cf[k] += $13 == $6 } if ($13 != "-" && $13 != $6) wr[k]++ }
{ add($1 " " $5 " " sprintf("%4d", $4)); add($1 " " $5 "  all") }
END {
	for (k in n) { split(k, a, " "); printf "%-8s %-7s %4s %5d %6.1f%% %6.1f%% %6.1f%% %9s %5d\n", a[1], a[2], a[3], n[k],
		100 * loc[k] / n[k], 100 * one[k] / n[k], 100 * three[k] / n[k], rp[k] ? cf[k] "/" rp[k] : "-", wr[k] }
}' "$work/cases.tsv" | sort | sed '1i model    taps     seq cases  place    first    top 3 confirmed wrong'
