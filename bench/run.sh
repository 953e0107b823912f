#!/bin/sh
# make bench: time `tbisect check` against the numpy baseline (float64 sums,
# and --f32) and the bandwidth probe on generated dump pairs, interleaved in
# one run, and print median times, ratios, tbisect's peak RSS and the time to
# open the session (what the TUI waits for before its first frame).  Also
# checks that tbisect and numpy agree on every cell's metrics.
#
#   run.sh --bin BUILD_DIR --src SRC_DIR [--preset P] [--reps N] [--dir D] DTYPE:FORMAT...
#
# The pairs are generated once into D/P-DTYPE-FORMAT and kept (delete D to
# free the disk).  Each program runs once untimed to warm the page cache.
set -eu

bin=. src=. preset=medium reps=3 dir=bench/data
py=${BENCH_PYTHON:-/usr/bin/python3}
while [ $# -gt 0 ]; do
    case $1 in
    --bin) bin=$2; shift 2 ;;
    --src) src=$2; shift 2 ;;
    --preset) preset=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || set -- f32:npy bf16:npy
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "bench: $py has no numpy (set BENCH_PYTHON=/path/to/python3 with numpy)" >&2
    exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir -p "$dir"

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# pairwise F A G B: time F A and G B, $reps times each, taking turns at going first.
pairwise() {
    _i=0
    while [ $_i -lt "$reps" ]; do
        if [ $((_i % 2)) -eq 0 ]; then
            "$1" "$2" >/dev/null || true
            "$3" "$4" >/dev/null || true
        else
            "$3" "$4" >/dev/null || true
            "$1" "$2" >/dev/null || true
        fi
        _i=$((_i + 1))
    done
}

echo "bench: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores," \
    "$(awk '/MemTotal/ {printf "%.0f GB RAM", $2 / 1048576}' /proc/meminfo); preset $preset, median of $reps"
printf '%-17s %5s %8s %8s %8s %8s %8s %8s %8s %8s %8s %7s %7s\n' case GB tbisect numpy numpy32 probe1 probe \
    numpy/tb np32/tb tb/pr1 tb/probe "RSS MB" "open ms"
# gen DATA DTYPE FORMAT [OPTION...]: the pair in DATA, generated once.
gen() {
    if [ ! -f "$1/.stamp" ]; then
        d=$1 t=$2 f=$3
        shift 3
        rm -rf "$d"
        "$bin/bench/tbbench-gen" --preset "$preset" --dtype "$t" --format "$f" "$@" "$d" >&2
        touch "$d/.stamp"
    fi
}
tp_cases= replay_cases= sketch_cases= moe_cases=
for case in "$@"; do
    dtype=${case%%:*} format=${case#*:}
    data=$dir/$preset-$dtype-$format
    # tensor-parallel and replay cases are timed against tbisect itself, below
    case $format in
    npy-tp*) tp_cases="$tp_cases $case"; continue ;;
    npy-moe) moe_cases="$moe_cases $case"; continue ;;
    replay) replay_cases="$replay_cases $case"; continue ;;
    sketch) sketch_cases="$sketch_cases $case"; continue ;;
    esac
    gen "$data" "$dtype" "$format"
    gb=$(du -sb "$data/ref" "$data/cand" | awk '{s += $1} END {printf "%.2f", s / 1e9}')
    tb() { "$bin/bench/tbbench-time" "$tmp/$1" "$bin/tbisect" check --json "$data/ref" "$data/cand"; }
    np() { "$bin/bench/tbbench-time" "$tmp/$1" "$py" "$src/bench/baseline.py" ${2:+--json "$2"} "$data/ref" "$data/cand"; }
    np32() { "$bin/bench/tbbench-time" "$tmp/$1" "$py" "$src/bench/baseline.py" --f32 "$data/ref" "$data/cand"; }
    op() { "$bin/bench/tbbench-time" "$tmp/$1" "$bin/bench/tbbench-open" "$data/ref" "$data/cand"; }
    pr() { "$bin/bench/tbbench-time" "$tmp/$1" "$bin/bench/tbbench-probe" "$data/ref" "$data/cand"; }
    pr1() { "$bin/bench/tbbench-time" "$tmp/$1" "$bin/bench/tbbench-probe" --threads 1 "$data/ref" "$data/cand"; }
    # Warm-up round, which also checks that both tools agree.
    tb warm >"$tmp/tb.json" || [ $? -eq 1 ]
    np warm "$tmp/np.json" >/dev/null
    pr warm >/dev/null
    "$py" - "$tmp/tb.json" "$tmp/np.json" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
tb = {c["ref_name"]: c for c in report["cells"]}
np_ = json.load(open(sys.argv[2]))
B = 18 * 2**-24
bad, worst = [], {}
for name, m in np_.items():
    c = tb.get(name)
    if c is None:
        bad.append(f"{name}: not in tbisect's report")
        continue
    # The kernel's bounds (src/compare/metrics.h): sums within TB_ACC_BOUND
    # = 18 * 2^-24 of their terms' magnitudes, |c - r| rounded to float;
    # allclose decided on that, so a pair on the edge may go either way.
    for k, rel, ab in (("rel_l2", B, 0), ("cosine", 0, 2 * B), ("max_abs", 2**-24, 0), ("mean_abs", B, 0),
                       ("allclose_frac", 0, 1e-6)):
        a, b = c[k], m[k]
        if not abs(a - b) <= rel * max(abs(a), abs(b), 1e-300) + ab:
            bad.append(f"{name}: {k} tbisect {a!r} numpy {b!r}")
        worst[k] = max(worst.get(k, 0), abs(a - b) / max(abs(b), 1e-300))
    if c["first_bad_position"] != m["first_bad_position"]:
        bad.append(f"{name}: first_bad_position tbisect {c['first_bad_position']} numpy {m['first_bad_position']}")
    # The logit kernel's bound (src/compare/logits.h): KL within 2^-20 of
    # itself; numpy's float64 sum of p (log p - log q) adds its own rounding.
    if "kl_mean" in m:
        a, b = (report.get("logits") or {}).get("kl_mean"), m["kl_mean"]
        if a is None or not abs(a - b) <= 2**-20 * abs(b) + 1e-15:
            bad.append(f"{name}: kl_mean tbisect {a!r} numpy {b!r}")
        else:
            worst["kl_mean"] = max(worst.get("kl_mean", 0), abs(a - b) / max(abs(b), 1e-300))
if bad:
    sys.exit("bench: tbisect and numpy disagree:\n  " + "\n  ".join(bad[:20]))
print("  agree with numpy; largest relative differences: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()),
      file=sys.stderr)
EOF
    rm -f "$tmp/tb" "$tmp/np" "$tmp/np32" "$tmp/pr" "$tmp/pr1" "$tmp/op"
    i=0
    while [ $i -lt "$reps" ]; do
        # Rotate the order so no program always runs first.
        case $((i % 4)) in
        0) tb tb >/dev/null || true; np np >/dev/null; np32 np32 >/dev/null; pr pr >/dev/null ;;
        1) np np >/dev/null; np32 np32 >/dev/null; pr pr >/dev/null; tb tb >/dev/null || true ;;
        2) np32 np32 >/dev/null; pr pr >/dev/null; tb tb >/dev/null || true; np np >/dev/null ;;
        3) pr pr >/dev/null; tb tb >/dev/null || true; np np >/dev/null; np32 np32 >/dev/null ;;
        esac
        pr1 pr1 >/dev/null
        op op >/dev/null
        i=$((i + 1))
    done
    t_tb=$(cut -d' ' -f1 "$tmp/tb" | median)
    t_np=$(cut -d' ' -f1 "$tmp/np" | median)
    t_np32=$(cut -d' ' -f1 "$tmp/np32" | median)
    t_pr=$(cut -d' ' -f1 "$tmp/pr" | median)
    t_pr1=$(cut -d' ' -f1 "$tmp/pr1" | median)
    t_op=$(cut -d' ' -f1 "$tmp/op" | median)
    rss=$(cut -d' ' -f2 "$tmp/tb" | sort -n | tail -1)
    awk -v c="$case" -v gb="$gb" -v tb="$t_tb" -v np="$t_np" -v np32="$t_np32" -v pr="$t_pr" -v pr1="$t_pr1" \
        -v rss="$rss" -v op="$t_op" 'BEGIN {
        printf "%-17s %5.2f %7.3fs %7.3fs %7.3fs %7.3fs %7.3fs %7.1fx %7.1fx %7.0f%% %7.0f%% %7.0f %7.1f\n", c, gb, tb, np,
            np32, pr1, pr, np / tb, np32 / tb, 100 * pr1 / tb, 100 * pr / tb, rss / 1024, 1000 * op }'
done
# DTYPE:npy-tpN: the candidate in N rank folders, joined by tbisect on load
# (every tap split on its last axis), against the same pair unsharded.
for case in $tp_cases; do
    dtype=${case%%:*} ranks=${case#*:npy-tp}
    data=$dir/$preset-$dtype-npy-tp$ranks plain=$dir/$preset-$dtype-npy
    gen "$data" "$dtype" npy --ranks "$ranks"
    gen "$plain" "$dtype" npy
    tbtp() {
        "$bin/bench/tbbench-time" "$tmp/$1" "$bin/tbisect" check --json --no-history \
            --shard 'attn_norm=b s h[tp]' --shard 'attn=b s h[tp]' --shard 'mlp_norm=b s h[tp]' \
            --shard 'mlp=b s h[tp]' --shard 'block=b s h[tp]' --shard 'logits=b s v[tp]' "$data/ref" "$data/cand"
    }
    tb1() { "$bin/bench/tbbench-time" "$tmp/$1" "$bin/tbisect" check --json --no-history "$plain/ref" "$plain/cand"; }
    tbtp warm >"$tmp/tp.json" || [ $? -eq 1 ]
    tb1 warm >"$tmp/one.json" || [ $? -eq 1 ]
    "$py" - "$tmp/tp.json" "$tmp/one.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
bad = [f"{x['tap']} L{x['layer']}: {x['rel_l2']} vs {y['rel_l2']}" for x, y in zip(a["cells"], b["cells"])
       if x["rel_l2"] != y["rel_l2"] or x["status"] != y["status"]]
if len(a["cells"]) != len(b["cells"]) or bad or a["verdict"] != b["verdict"]:
    sys.exit("bench: the joined ranks do not compare as the unsharded pair:\n  " + "\n  ".join(bad[:20]))
PY
    rm -f "$tmp/tp" "$tmp/one"
    pairwise tbtp tp tb1 one
    gb=$(du -sb "$data/ref" "$data/cand" | awk '{s += $1} END {printf "%.2f", s / 1e9}')
    t_tp=$(cut -d' ' -f1 "$tmp/tp" | median)
    t_one=$(cut -d' ' -f1 "$tmp/one" | median)
    rss_tp=$(cut -d' ' -f2 "$tmp/tp" | sort -n | tail -1)
    rss_one=$(cut -d' ' -f2 "$tmp/one" | sort -n | tail -1)
    awk -v c="$case" -v gb="$gb" -v tp="$t_tp" -v one="$t_one" -v r="$rss_tp" -v r1="$rss_one" -v n="$ranks" 'BEGIN {
        printf "%-17s %5.2f %7.3fs joined from %s ranks; %7.3fs unsharded: %.2fx the time; RSS %.0f MB vs %.0f MB\n",
            c, gb, tp, n, one, tp / one, r / 1024, r1 / 1024 }'
done
# DTYPE:npy-moe: a mixture of 64 experts, 8 active, at 2048 positions (the
# router, the chosen experts, their weights and the experts' sum beside each
# MLP; near-tie flips every 64 positions) against the same pair without the
# MoE taps: the routing and the flipped positions left out of every later
# cell must cost no more than their share of the bytes.
for case in $moe_cases; do
    dtype=${case%%:*}
    data=$dir/$preset-$dtype-npy-moe dense=$dir/$preset-$dtype-npy-dense2k
    gen "$data" "$dtype" npy --seq 2048 --moe 64:8
    gen "$dense" "$dtype" npy --seq 2048
    tbm() { "$bin/bench/tbbench-time" "$tmp/$1" "$bin/tbisect" check --json --no-history "$data/ref" "$data/cand"; }
    tbd() { "$bin/bench/tbbench-time" "$tmp/$1" "$bin/tbisect" check --json --no-history "$dense/ref" "$dense/cand"; }
    tbm warm >"$tmp/moe.json" || [ $? -eq 1 ]
    tbd warm >/dev/null || [ $? -eq 1 ]
    "$py" - "$tmp/moe.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rt = r.get("routing") or []
if not rt or [p for p, _ in rt[0]["flipped"]][:3] != [0, 64, 128]:
    sys.exit("bench: the MoE pair's routing is not the generated one: %s" % (rt[:1],))
PY
    rm -f "$tmp/m" "$tmp/d"
    pairwise tbm m tbd d
    gb=$(du -sb "$data/ref" "$data/cand" | awk '{s += $1} END {printf "%.2f", s / 1e9}')
    gbd=$(du -sb "$dense/ref" "$dense/cand" | awk '{s += $1} END {printf "%.2f", s / 1e9}')
    awk -v c="$case" -v gb="$gb" -v gbd="$gbd" -v m="$(cut -d' ' -f1 "$tmp/m" | median)" \
        -v d="$(cut -d' ' -f1 "$tmp/d" | median)" -v rm="$(cut -d' ' -f2 "$tmp/m" | sort -n | tail -1)" \
        -v rd="$(cut -d' ' -f2 "$tmp/d" | sort -n | tail -1)" 'BEGIN {
        printf "%-17s %5.2f %7.3fs with 64-expert MoE taps; %7.3fs without (%.2f GB): %.2fx the time for %.2fx the bytes; RSS %.0f MB vs %.0f MB\n",
            c, gb, m, d, gbd, m / d, gb / gbd, rm / 1024, rd / 1024 }'
done
# f32:replay: the replay of the first divergence's op (tbbench-replay, best of
# BENCH_REPS) on one attention layer: 2048 positions of 32 heads of 128
# (8 kv heads), or 512 of 8 heads with the small preset; then attn.o from
# module hooks alone (o_proj fitted) on 1024 positions of 4 heads of 64,
# 512 of 4 heads of 32 with the small preset.
for case in $replay_cases; do
    for kind in replay oproj; do
        data=$dir/$preset-$kind
        if [ ! -f "$data/.stamp" ]; then
            rm -rf "$data"
            case $preset-$kind in
            small-replay) shape="--seq 512 --heads 8 --kv-heads 2 --head-dim 128" ;;
            *-replay) shape="--seq 2048 --heads 32 --kv-heads 8 --head-dim 128" ;;
            small-oproj) shape="--seq 512 --heads 4 --kv-heads 2 --head-dim 32 --oproj" ;;
            *) shape="--seq 1024 --heads 4 --kv-heads 2 --head-dim 64 --oproj" ;;
            esac
            # shellcheck disable=SC2086 # the shape is words
            "$py" "$src/bench/replaygen.py" $shape "$data" >&2
            touch "$data/.stamp"
        fi
        for bug in softmax-scale rope-theta; do
            out=$("$bin/bench/tbbench-replay" "$data/ref" "$data/$bug" "$reps") || {
                echo "bench: the replay did not confirm $bug: $out" >&2
                exit 1
            }
            printf '%-17s replay of %s (%s): %ss, confirmed\n' "$case" "$(echo "$out" | cut -d' ' -f2)" "$bug" \
                "$(echo "$out" | cut -d' ' -f1)"
        done
    done
done
# DTYPE:sketch: `tbisect sketch` of the DTYPE:npy pair's reference alone,
# against the probe reading that tree on one thread and on all cores, and
# the sketch's size against the tree's; then sketch against tree, which
# must find what the full comparison finds.
for case in $sketch_cases; do
    dtype=${case%%:*}
    data=$dir/$preset-$dtype-npy
    gen "$data" "$dtype" npy
    sk() { "$bin/bench/tbbench-time" "$tmp/$1" "$bin/tbisect" sketch "$data/ref" -o "$tmp/ref.tbsk" 2>/dev/null; }
    skp() { "$bin/bench/tbbench-time" "$tmp/$1" "$bin/bench/tbbench-probe" ${2:+--threads "$2"} "$data/ref"; }
    sk warm >/dev/null
    "$bin/tbisect" check --json --no-history "$data/ref" "$data/cand" >"$tmp/full.json" || [ $? -eq 1 ]
    "$bin/tbisect" check --json --no-history "$tmp/ref.tbsk" "$data/cand" >"$tmp/est.json" || [ $? -eq 1 ]
    "$py" - "$tmp/full.json" "$tmp/est.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
fa, fb = a["first_divergence"], b["first_divergence"]
if a["verdict"] != b["verdict"] or (fa or {}).get("cell") != (fb or {}).get("cell"):
    sys.exit("bench: the sketch and the full comparison disagree: %s %s, %s %s" % (
        a["verdict"], fa and fa["cell"], b["verdict"], fb and fb["cell"]))
out = [c["ref_name"] for c, d in zip(a["cells"], b["cells"])
       if d.get("rel_l2_bound") and c["nan"][0] == c["nan"][1] and c["rel_l2"] is not None
       and not (d["rel_l2_bound"][0] <= c["rel_l2"] * (1 + 1e-9)
                and (d["rel_l2_bound"][1] is None or c["rel_l2"] <= d["rel_l2_bound"][1] * (1 + 1e-9)))]
if out:
    sys.exit("bench: rel_l2 outside the sketch's bound: " + ", ".join(out[:10]))
PY
    rm -f "$tmp/sk" "$tmp/skp" "$tmp/skp1"
    i=0
    while [ $i -lt "$reps" ]; do
        sk sk >/dev/null
        skp skp >/dev/null
        skp skp1 1 >/dev/null
        i=$((i + 1))
    done
    gb=$(du -sb "$data/ref" | awk '{printf "%.2f", $1 / 1e9}')
    size=$(stat -c %s "$tmp/ref.tbsk")
    awk -v c="$case" -v gb="$gb" -v sk="$(cut -d' ' -f1 "$tmp/sk" | median)" -v p="$(cut -d' ' -f1 "$tmp/skp" | median)" \
        -v p1="$(cut -d' ' -f1 "$tmp/skp1" | median)" -v rss="$(cut -d' ' -f2 "$tmp/sk" | sort -n | tail -1)" \
        -v size="$size" 'BEGIN {
        printf "%-17s %5.2f sketch %7.3fs; probe %7.3fs (1 thread %7.3fs): %.0f%% of the probe (%.0f%% of one thread); sketch %.2f MB, %.2f%% of the tree; RSS %.0f MB\n",
            c, gb, sk, p, p1, 100 * p / sk, 100 * p1 / sk, size / 1e6, 100 * size / (gb * 1e9), rss / 1024 }'
done
echo "numpy: float64 sums; numpy32: float32 (--f32); numpy/tb, np32/tb: how many times faster tbisect is;"
echo "probe1, probe: the bandwidth probe on one thread and on all cores; tb/pr1, tb/probe: tbisect's bandwidth"
echo "as a share of each; RSS: tbisect's peak resident set;"
echo "open: process start to exit around tb_session_open (both trees indexed and paired, no tensor data read)."
