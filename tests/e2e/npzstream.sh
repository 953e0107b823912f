#!/bin/sh
# npzstream: deflated npz members stream through a bounded window while
# they are compared (issue 18, "peak RSS at most 512 MB at any tree size,
# deflated npz and zip members included").  A pair of np.savez_compressed
# files holding a 200 MB array each is checked in a child whose peak RSS is
# read with getrusage(RUSAGE_CHILDREN): it must stay under 150 MB (the whole
# members would take twice the array), and the JSON report must equal that
# of the same arrays saved uncompressed (np.savez), sums to 9 digits.  A Fortran-ordered
# member, which loads whole, rides along.  NPZSTREAM_MB sets the array size
# (NPZSTREAM_MB=2048 for the issue's 2 GB case); the bound stays.

set -eu
. "$(dirname "$0")/lib.sh"
tap_setup
T=$TAP_TMP
[ -x "$TBISECT" ] || bail_out "no tbisect at $TBISECT"
need_python numpy
MB=${NPZSTREAM_MB:-200}
RSS_MAX_MB=150

mkdir "$T/z" "$T/u"
"$PY" - "$T" "$MB" <<'EOF'
import sys
import numpy as np

t, mb = sys.argv[1], int(sys.argv[2])
rows = mb * (1 << 20) // (4096 * 4)
rng = np.random.default_rng(18)
# Mostly zeros (a dump's padding, or a sparse activation): deflate shrinks
# it a few hundred fold, near what the zip reader still accepts.
ref = np.zeros((rows, 4096), np.float32)
ref[::8, ::64] = rng.standard_normal((len(ref[::8]), 64)).astype(np.float32)
cand = ref.copy()
cand[rows // 2 + 1, 64] += 1e-3  # close: one element past allclose, half way in
small = rng.standard_normal((64, 256)).astype(np.float32)
off = small.copy()
off[40:] *= 1.5  # diverged from position 40
for save, d in ((np.savez_compressed, "z"), (np.savez, "u")):
    save("%s/%s/ref.npz" % (t, d), **{"hidden_states.0": ref, "hidden_states.1": small})
    save("%s/%s/cand.npz" % (t, d), **{"hidden_states.0": cand, "hidden_states.1": np.asfortranarray(off)})
EOF

# peak_check DIR OUT: run check --json in DIR with output to OUT; print its
# exit status and its peak RSS in MB.
peak_check() {
	(cd "$1" && "$PY" - "$2" "$TBISECT" check --json --no-history ref.npz cand.npz <<'EOF'
import resource, subprocess, sys
with open(sys.argv[1], "wb") as out:
    rc = subprocess.call(sys.argv[2:], stdout=out, stdin=subprocess.DEVNULL)
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
EOF
	)
}

case $TBISECT in /*) ;; *) TBISECT=$(pwd)/$TBISECT ;; esac
peak_check "$T/z" "$T/z.json" >"$T/peak"
read -r rc rss <"$T/peak"
check_that "deflated ${MB} MB members: check exits 1 (diverged)" [ "$rc" = 1 ]
check_that "... in at most $RSS_MAX_MB MB of RSS (peak $rss MB)" [ "$rss" -le "$RSS_MAX_MB" ]
peak_check "$T/u" "$T/u.json" >"$T/peak"
read -r rc rss <"$T/peak"
check_that "the same arrays stored: check exits 1" [ "$rc" = 1 ]
# same_report A B: the same JSON but for the last bits of sums (one thread
# walks a deflated pair; a stored one is split among threads).
same_report() {
	"$PY" - "$1" "$2" <<'EOF'
import json, math, sys

def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b

sys.exit(not same(*(json.load(open(p)) for p in sys.argv[1:])))
EOF
}
check_that "deflated and stored members give the same report" same_report "$T/z.json" "$T/u.json"
last_ok || diff "$T/z.json" "$T/u.json" | sed -n '1,20s/^/# /p'
cp "$T/z.json" "$TAP_OUT"
json_is "the big pair is close (one element off)" cells.0.status close
json_is "... found half way in" cells.0.first_bad_position $((MB * 32 + 1))
json_is "the Fortran-ordered member diverges" cells.1.status diverged
json_is "... from position 40" cells.1.first_bad_position 40
tap_done
