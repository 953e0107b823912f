#!/bin/sh
# check --markdown: the summary for CI step summaries and pull requests.
# The verdict and first divergence as a heading, the facts, the top causes
# with why and what to look at, and the glyph heatmap in a code block with
# deep models folded; the exit status is check's; markup in the rules'
# texts is escaped.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

"$MKDEMO" --bug rope-style "$T/ref" "$T/cand" >/dev/null || bail_out "mkdemo failed"
expect_exit 1 "a diverged pair: exit 1, as check" "$TBISECT" check --markdown --no-history "$T/ref" "$T/cand"
check_that "the heading: verdict, first divergence and position" \
	grep -q -x -F '## tbisect: DIVERGED, first divergence `L0.attn` at position 1' "$TAP_OUT"
check_that "the coverage" grep -q -x -F -- '- **Coverage:** 23 of 23 main cells paired (ref 23, cand 23)' "$TAP_OUT"
check_that "the cell counts" grep -q -x -F -- '- **Cells:** 23: 2 match, 0 close, 21 diverged, 0 missing' "$TAP_OUT"
check_that "the origin, underscores escaped" grep -q -F -- '- **Origin:** error is born at L0.attn: rel\_l2 0.469' "$TAP_OUT"
check_that "the causes of the first divergence" grep -q -x -F '### Likely causes of `L0.attn`' "$TAP_OUT"
check_that "the top cause first, with its score" grep -q '^1\. \*\*rope-style\*\* (score 0\.[0-9][0-9]): attn diverged' "$TAP_OUT"
check_that "what to look at" grep -q -F '   *Look at:* RoPE layout' "$TAP_OUT"
check_that "the heatmap in a text code block" sh -c "grep -q -x -F '\`\`\`text' '$TAP_OUT' && test \"\$(grep -c -x -F '\`\`\`' '$TAP_OUT')\" -eq 1"
check_that "the heatmap's L0 row" grep -q -x -F 'L0          .         X    X        X   X' "$TAP_OUT"
# RoPE on the NoPE layers only: four causes, every RoPE fault that
# attention's output alone cannot tell apart
"$MKDEMO" --bug nope-inverted "$T/al-ref" "$T/al-cand" >/dev/null || bail_out "mkdemo failed"
expect_exit 1 "four causes: exit 1" "$TBISECT" check --markdown --no-history "$T/al-ref" "$T/al-cand"
check_that "three causes at most, the rest counted" grep -q -x -F '1 more in `tbisect check` or its JSON report.' "$TAP_OUT"
check_that "no fourth cause listed" sh -c "! grep -q '^4\\. ' '$TAP_OUT'"

# A matching pair.
expect_exit 0 "a pair compared with itself: exit 0" "$TBISECT" check --markdown --no-history "$T/ref" "$T/ref"
check_that "match: the heading says so" grep -q -x -F '## tbisect: MATCH, no cell diverged' "$TAP_OUT"
check_that "match: no causes section" sh -c "! grep -q 'Likely causes' '$TAP_OUT'"

# A deep model folds its middle layers, keeping the first divergence's.
"$TBGEN" --layers 40 --bug noise@L20.mlp "$T/dref" "$T/dcand" || bail_out "tbgen failed"
expect_exit 1 "40 layers: exit 1" "$TBISECT" check --markdown --no-history "$T/dref" "$T/dcand"
check_that "40 layers: the first layers" grep -q '^L2 ' "$TAP_OUT"
check_that "40 layers: a folded run, with its diverged cells" \
	grep -q -x -F '...         L3-L18 folded: 16 layers, 0 diverged cells' "$TAP_OUT"
check_that "40 layers: the first divergence's layer and its neighbours" \
	sh -c "grep -q '^L19 ' '$TAP_OUT' && grep -q '^L20 ' '$TAP_OUT' && grep -q '^L21 ' '$TAP_OUT'"
check_that "40 layers: the second run folded" grep -q -x -F '...         L22-L36 folded: 15 layers, 75 diverged cells' "$TAP_OUT"
check_that "40 layers: the last layer" grep -q '^L39 ' "$TAP_OUT"
check_that "40 layers: 9 layer rows, not 40" test "$(grep -c '^L[0-9]' "$TAP_OUT")" -eq 9
# check's text report folds nothing.
expect_exit 1 "the text report of 40 layers" "$TBISECT" check --no-history "$T/dref" "$T/dcand"
check_that "the text report: every layer" test "$(grep -c '^L[0-9]' "$TAP_OUT")" -eq 40

expect_exit 2 "--markdown with --json: a usage error" "$TBISECT" check --markdown --json "$T/ref" "$T/cand"
check_that "--markdown with --json: said" grep -q -F -- "--json and --markdown exclude each other" "$TAP_ERR"
expect_exit 2 "--markdown belongs to check" "$TBISECT" ls --markdown "$T/ref"

tap_done
