#!/bin/sh
# --map files as users get them wrong: a rule that matches nothing is
# reported by its index and pattern; rules that put two tensors of one
# tree in one cell stop with exit 2 naming the file and the rules; a map
# can come from standard input (--map -).
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

"$MKDEMO" "$T/ref" "$T/cand" >/dev/null || bail_out "mkdemo failed"
mv "$T/cand/model.layers.0.npy" "$T/cand/blk_0.npy"

cat >"$T/unused.json" <<'MAP'
{"rules": [{"match": "^never$", "tap": "embed"},
           {"match": "^blk_([0-9]+)$", "layer": "\\1", "tap": "block"},
           {"match": "^also_never_([0-9]+)$", "layer": "\\1", "tap": "attn"}]}
MAP
expect_exit 0 "a map with rules that match nothing still compares" \
	"$TBISECT" check --no-history --map "$T/unused.json" "$T/ref" "$T/cand"
check_that "text: the unused rules by index and pattern" \
	grep -q '^warning (map): map rules 0 (^never\$) and 2 (^also_never_(\[0-9\]+)\$) matched no tensor of either tree$' "$TAP_OUT"
check_that "text: the used rule is not reported" sh -c "! grep -q 'rules 0 (^never\$), 1' '$TAP_OUT'"
expect_exit 0 "--json with the unused rules" "$TBISECT" check --json --no-history --map "$T/unused.json" "$T/ref" "$T/cand"
json_is "JSON: the map warning's id" warnings.0.id map
json_is "JSON: blk_0 paired through the map" 'unpaired.cand.#' 0

cat >"$T/two.json" <<'MAP'
{"rules": [{"match": "^blk_0$", "layer": 0, "tap": "block"},
           {"match": "^model\\.layers\\.0\\.mlp$", "layer": "0", "tap": "block"}]}
MAP
expect_error_msg 2 "$T/two.json" "map rules 0 and 1 both claim L0.block (blk_0 and model.layers.0.mlp of $T/cand)" \
	"two rules claiming one cell: exit 2 naming the file and the rules" \
	"$TBISECT" check --map "$T/two.json" "$T/ref" "$T/cand"
cat >"$T/loose.json" <<'MAP'
{"rules": [{"match": "^model\\.layers\\.([0-9]+)\\.(mlp|self_attn)$", "layer": "\\1", "tap": "attn"}]}
MAP
expect_error_msg 2 "$T/loose.json" "map rule 0 maps both model.layers.0.mlp and model.layers.0.self_attn of $T/ref to L0.attn" \
	"one rule mapping two tensors to one cell: exit 2" "$TBISECT" check --map "$T/loose.json" "$T/ref" "$T/cand"
expect_error_msg 2 "$T/loose.json" "map rule 0 maps both" "the view refuses it the same way" \
	"$TBISECT" --map "$T/loose.json" "$T/ref" "$T/cand"
printf '{"rules": [{"match": "^blk_(\\\\d+)$", "layer": "\\\\1", "tap": "block"}]}\n' >"$T/perl.json"
expect_error_msg 2 "$T/perl.json" 'map rule 0: "match" uses \d, a Perl class POSIX regular expressions lack: write [0-9]' \
	"\\d in a map: refused with the POSIX spelling" "$TBISECT" check --map "$T/perl.json" "$T/ref" "$T/cand"
printf '{"rules": [{"match": "^x$", "tap": "attention"}]}\n' >"$T/tap.json"
expect_error_msg 2 "$T/tap.json" "map rule 0: \"tap\": 'attention' is not a canonical tap" \
	"an unknown tap: exit 2 naming the rule" "$TBISECT" check --map "$T/tap.json" "$T/ref" "$T/cand"

# --map -: the map from standard input, read once.
TAP_RC=0
"$TBISECT" check --no-history --map - "$T/ref" "$T/cand" <"$T/unused.json" >"$TAP_OUT" 2>"$TAP_ERR" || TAP_RC=$?
check_that "--map -: read from standard input (exit $TAP_RC)" test "$TAP_RC" -eq 0
check_that "--map -: its unused rules reported too" grep -q '^warning (map): map rules 0 ' "$TAP_OUT"
TAP_RC=0
echo '{"rules": [' | "$TBISECT" check --map - "$T/ref" "$T/cand" >"$TAP_OUT" 2>"$TAP_ERR" || TAP_RC=$?
check_that "--map - with bad JSON: exit 2 ($TAP_RC)" test "$TAP_RC" -eq 2
check_that "--map - with bad JSON: one line naming standard input" \
	sh -c "test \"\$(wc -l <'$TAP_ERR')\" -eq 1 && grep -q '^tbisect: standard input (--map -): map file is not valid JSON' '$TAP_ERR'"
TAP_RC=0
"$TBISECT" ls --map - "$T/cand" <"$T/unused.json" >"$TAP_OUT" 2>"$TAP_ERR" || TAP_RC=$?
check_that "ls --map -: blk_0 is L0.block" grep -q '^blk_0  *L0\.block ' "$TAP_OUT"

tap_done
