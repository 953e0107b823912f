#!/bin/sh
# llama.cpp's MoE routing trace (tbisect-dumps(5) FORMATS, llama.cpp
# moe-trace CSV): "phase,token,layer,rank,expert" rows read as every
# layer's mlp.topk_ids [tokens, k].  The trace here is what llama-moe-trace
# writes for the real capture's prompt (tests/llamacpp, 2026-moe): the same
# ffn_moe_topk-N its callback reads, layer 1 (the last) at the last token
# only; a reconstruction, no trace tool being in the llama.cpp build.
# Against the Hugging Face reference it compares as routing alone; bad
# rows stop it with one line naming the file.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
need_python numpy
T=$TAP_TMP
C=$top_srcdir/tests/llamacpp/captures

gzip -dc "$C/2026-moe.log.gz" >"$T/2026-moe.log" || bail_out "cannot unpack the capture"
"$PY" - "$T/2026-moe.log" "$T/trace.csv" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
out = ["phase,token,layer,rank,expert"]
for layer in (0, 1):
    at = next(i for i, l in enumerate(lines) if re.search(r"\bffn_moe_topk-%d = " % layer, l))
    rows = []
    for l in lines[at + 1:]:
        if l.strip().startswith("sum"):
            break
        m = re.match(r"\s*\[\s*([-\d.]+),\s*([-\d.]+)\s*\],?$", l)
        if m:
            rows.append([int(float(x)) for x in m.groups()])
    first = 6 - len(rows)  # the prompt's 6 tokens; the last layer computes the last
    out += ["prefill,%d,%d,%d,%d" % (first + t, layer, k, e) for t, r in enumerate(rows) for k, e in enumerate(r)]
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY

expect_exit 0 "ls reads the trace" "$TBISECT" ls "$T/trace.csv"
check_that "ls: layer 0's ids, 6 tokens of 2 experts" grep -q '^layers.0.mlp.topk_ids  *L0.mlp.topk_ids  *i32  *\[6, 2\] ' "$TAP_OUT"
check_that "ls: layer 1 traced its last token only" \
	grep -q '^layers.1.mlp.topk_ids  *L1.mlp.topk_ids  *i32  *\[6, 2\] (2 printed) ' "$TAP_OUT"
expect_exit 0 "against the reference: exit 0" "$TBISECT" check --json --no-history "$C/ref-moe.npz" "$T/trace.csv"
json_is "layer 0's 6 positions agree" routing.0.agree 6
json_is "layer 1's routing is its last position" routing.1.positions 1
json_is "and agrees" routing.1.agree 1

# bad CASE ROWS WHAT: a trace of the header and ROWS is refused, naming it
bad() {
	printf 'phase,token,layer,rank,expert\n%b' "$2" >"$T/$1.csv"
	expect_error_msg 2 "$1.csv" "$3" "$1: exit 2, one line naming the file" "$TBISECT" ls "$T/$1.csv"
}
bad phase 'warmup,0,0,0,1\n' "line 2: not prefill|decode"
bad columns 'prefill,0,0,0\n' "line 2: not prefill|decode"
bad negative 'prefill,0,0,0,-1\n' "line 2: not prefill|decode"
bad huge 'prefill,0,0,0,99999999999\n' "line 2: not prefill|decode"
bad gap 'prefill,0,0,0,1\nprefill,0,0,2,3\n' "token 0 of layer 0: rank 2"
bad twice 'prefill,0,0,0,1\nprefill,0,0,1,2\ndecode,0,0,0,3\n' "rank 0, but the ranks of a token are 0 to 1 once each"
bad short 'prefill,0,0,0,1\nprefill,0,0,1,2\nprefill,1,0,0,3\n' "token 1 of layer 0 has 1 ranks of 2"
bad empty '' "a routing trace with no row"
tap_done
