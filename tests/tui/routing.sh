#!/bin/sh
# The routing view of an MoE layer (script mode: :save-display writes the
# screen's text): a bf16 port of mkdemo's MoE model flips one position's
# experts at a near tie in layer 1.  The heatmap's status line of that
# layer's expert sets gives its routing; the detail screen lists every
# layer's, marks this one, and shows the experts each side chose there.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_script_setup
LINES=60
COLUMNS=100
export LINES COLUMNS
MKDEMO=$(cd "$(dirname "$MKDEMO")" && pwd)/$(basename "$MKDEMO")
cd "$TAP_TMP" || bail_out "cd failed"
"$MKDEMO" --moe --sub --seq 256 --seed 8 --bug dtype-precision ref cand >/dev/null || bail_out "mkdemo failed"
printf ':goto L2.mlp.topk_ids\n:save-display heatmap.txt\nEnter\n:save-display detail.txt\nq\nq\n' >script
expect_exit 0 "the script runs (exit 0: close)" env TBISECT_SCRIPT=script "$TBISECT" --no-history ref cand
check_that "heatmap: the expert sets' status line is its layer's routing" \
	grep -q '^L2: 254 of 256 positions agree (top-2); flipped at 159 (gap ' heatmap.txt
check_that "detail: a routing section" grep -q '^routing  (the experts each position chose' detail.txt
check_that "detail: this layer marked" grep -q '^> L2: 254 of 256 positions agree' detail.txt
check_that "detail: the others listed" grep -q '^  L0: 256 of 256 positions agree (top-2)$' detail.txt
check_that "detail: the flipped position and the experts each side chose" \
	grep -Eq '^  pos 159 +flipped ref \[[0-9]+ [0-9]+\]  cand \[[0-9]+ [0-9]+\]$' detail.txt
tap_done
