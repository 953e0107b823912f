#!/bin/sh
# End to end: where the error is born (origin, drift), dump sanity checks,
# per-tensor tolerance files and the rule table, on pairs from tests/tbgen.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

gen() {
	_name=$1
	shift
	"$TBGEN" "$@" "$T/$_name/ref" "$T/$_name/cand" || bail_out "tbgen $* failed"
}


# cell_of PATH: "L3.mlp" / "embed" / "null" for a {layer, tap} object in $TAP_OUT
cell_of() {
	_l=$(json_get "$1.layer") || { echo missing; return; }
	[ "$_l" = "" ] && { echo null; return; }
	_t=$(json_get "$1.tap") || { echo null; return; }
	if [ "$_l" = null ]; then echo "$_t"; else echo "L$_l.$_t"; fi
}

cell_is() {
	_got=$(cell_of "$2")
	if [ "$_got" = "$3" ]; then ok "$1"; else not_ok "$1" "$2 is '$_got', expected '$3'"; fi
}

# --- a broken op deep inside is the origin, though every later cell is worse ---
gen deep --layers 6 --bug noise@L3.mlp:0.05
expect_exit 1 "deep fault: exit 1" "$TBISECT" check --json "$T/deep/ref" "$T/deep/cand"
cell_is "deep fault: origin is the broken op" origin L3.mlp
cell_is "deep fault: first divergence is the broken op" first_divergence L3.mlp
json_is "deep fault: later cell is worse than the origin" 'cells.23.status' diverged
worse=$(json_get cells.23.rel_l2)
check_that "deep fault: L4.mlp rel_l2 ($worse) exceeds the origin's" awk -v a="$worse" 'BEGIN { exit !(a > 0.1) }'
amp=$(json_get cells.19.amplification)
check_that "deep fault: origin amplification ($amp) above 10" awk -v a="$amp" 'BEGIN { exit !(a > 10) }'
amp=$(json_get cells.23.amplification)
check_that "deep fault: downstream amplification ($amp) below 10" awk -v a="$amp" 'BEGIN { exit !(a < 10) }'
json_is "deep fault: input_rel_l2 of embed is 0" cells.0.input_rel_l2 0
json_is "deep fault: top cause weight-mapping" causes.0.id weight-mapping

# --- precision drift: a late cell crosses --diverge, no origin ---
gen drift --layers 8 --bug drift:1.6
expect_exit 1 "drift: a late cell diverged" "$TBISECT" check --json "$T/drift/ref" "$T/drift/cand"
json_is "drift: no origin" origin null
check_that "drift: origin text says precision drift" grep -q 'precision drift, not a broken op' "$TAP_OUT"
json_is "drift: top cause dtype-precision" causes.0.id dtype-precision
run_cmd "$TBISECT" check "$T/drift/ref" "$T/drift/cand"
check_that "drift: text report names the growth per layer" grep -q '^origin: .*by about x1\.[0-9]* per layer' "$TAP_OUT"
gen prec --layers 4 --bug precision
expect_exit 0 "precision only: exit 0" "$TBISECT" check --json "$T/prec/ref" "$T/prec/cand"
json_is "precision only: top cause dtype-precision" causes.0.id dtype-precision
json_is "precision only: no origin" origin null

# --- dump sanity ---
gen off --layers 6 --bug offset
expect_exit 1 "off-by-one dump: exit 1" "$TBISECT" check --json "$T/off/ref" "$T/off/cand"
json_is "off-by-one dump: warning" warnings.0.id dump-offset
json_is "off-by-one dump: top cause" causes.0.id dump-offset
gen dup --layers 6 --bug duplicate
expect_exit 1 "duplicated layers: exit 1" "$TBISECT" check --json "$T/dup/ref" "$T/dup/cand"
json_is "duplicated layers: warning" warnings.0.id dump-duplicate
json_is "duplicated layers: top cause" causes.0.id dump-duplicate
gen tok --layers 2 --bug tokens:3 --tokens
expect_exit 0 "token ids differ, activations equal: exit 0" "$TBISECT" check --json "$T/tok/ref" "$T/tok/cand"
json_is "token ids: warning" warnings.0.id tokenizer
check_that "token ids: warning names the position" grep -q 'first at 3 (ref' "$TAP_OUT"
run_cmd "$TBISECT" check --no-history "$T/tok/ref" "$T/tok/cand"
w=$(grep -n '^warning (tokenizer): token ids differ' "$TAP_OUT" | cut -d: -f1)
g=$(grep -n '^legend:' "$TAP_OUT" | cut -d: -f1)
check_that "text report: the dump warning comes before any metric (line ${w:-none} < ${g:-none})" test "${w:-99999}" -lt "${g:-0}"
gen clean --layers 3 --tokens
expect_exit 0 "clean pair: exit 0" "$TBISECT" check --json "$T/clean/ref" "$T/clean/cand"
json_is "clean pair: no warnings" 'warnings.#' 0
json_is "clean pair: no causes" 'causes.#' 0

# --- per-tensor tolerances ---
gen tol --layers 2 --bug noise@L1.mlp:0.05 --no-propagate
expect_exit 1 "without --tol the cell diverges" "$TBISECT" check "$T/tol/ref" "$T/tol/cand"
printf '[{"match": "L1\\\\.mlp", "diverge": 0.2}, {"match": "lm_head", "atol": 9}]\n' >"$T/tol.json"
expect_exit 0 "--tol turns it close" "$TBISECT" check --json --tol "$T/tol.json" "$T/tol/ref" "$T/tol/cand"
json_is "--tol: cell status close" cells.9.status close
json_is "--tol: verdict close" verdict close
expect_exit 0 "ls --tol" "$TBISECT" ls --tol "$T/tol.json" "$T/tol/ref"
check_that "ls --tol shows the entry for L1.mlp" grep -q '^model.layers.1.mlp .*L1\\\.mlp: atol 0.0001 rtol 0.0001 diverge 0.2$' "$TAP_OUT"
check_that "ls --tol shows raw-name entries" grep -q '^lm_head .*lm_head: atol 9 ' "$TAP_OUT"
check_that "ls --tol shows the command line for the rest" grep -q '^model.norm .*(command line): atol 0.0001' "$TAP_OUT"
printf '[{"match": "L1\\\\.mlp", "mode": "abs", "diverge": 100}]\n' >"$T/abs.json"
expect_exit 0 "--tol absolute mode" "$TBISECT" check --json --tol "$T/abs.json" "$T/tol/ref" "$T/tol/cand"
json_is "--tol absolute mode: close" cells.9.status close
printf '[{"match": "x"}, {"match": "y", "diverge": "big"}]\n' >"$T/badtol.json"
expect_error 2 "$T/badtol.json" "bad --tol file" "$TBISECT" check --tol "$T/badtol.json" "$T/tol/ref" "$T/tol/cand"
check_that "bad --tol file: names the entry" grep -q 'entry 1: "diverge"' "$TAP_ERR"

# --- the rule table ---
cat >"$T/my.json" <<'JSON'
{"rules": [{"id": "my-cause", "weight": 1, "require": ["at_mlp", "rel_l2 > 0.01"],
            "why": "mlp off by {rel_l2:.2f}", "look_at": "my notes"}]}
JSON
expect_exit 1 "--rules adds a user rule" "$TBISECT" check --json --rules "$T/my.json" "$T/tol/ref" "$T/tol/cand"
json_is "user rule ranks first" causes.0.id my-cause
json_is "user rule fills its template" causes.0.why "mlp off by 0.05"
mkdir -p "$T/xdg/tbisect"
cp "$T/my.json" "$T/xdg/tbisect/rules.json"
XDG_CONFIG_HOME=$T/xdg expect_exit 1 "rules from the config directory" "$TBISECT" check --json "$T/tol/ref" "$T/tol/cand"
json_is "config-directory rule ranks first" causes.0.id my-cause
printf '{"rules": [{"id": "a", "weight": 1, "require": ["at_mlp"], "why": "w", "look_at": "l"}, {"id": "b", "weight": 1, "require": ["cosin > 1"], "why": "w", "look_at": "l"}]}' >"$T/badrules.json"
expect_error 2 "$T/badrules.json" "bad --rules file" "$TBISECT" check --rules "$T/badrules.json" "$T/tol/ref" "$T/tol/cand"
check_that "bad --rules file: names rule and field" grep -q "rule 1: require\[0\]: unknown feature 'cosin'" "$TAP_ERR"
expect_exit 1 "--features" "$TBISECT" check --features "$T/tol/ref" "$T/tol/cand"
check_that "--features lists at_mlp = 1" grep -q '^  at_mlp  *1$' "$TAP_OUT"
expect_exit 2 "--origin-factor must exceed 1" "$TBISECT" check --origin-factor 0.5 "$T/tol/ref" "$T/tol/cand"
gen fac --layers 2 --bug noise@L1.mlp:0.05 --no-propagate
expect_exit 1 "--origin-factor 1e9 finds no origin" "$TBISECT" check --json --origin-factor 1e9 "$T/fac/ref" "$T/fac/cand"
json_is "--origin-factor echoed" origin_factor 1000000000
json_is "--origin-factor 1e9: origin null" origin null

# --- a loose --diverge: the texts state what the cells measured, not their status ---
# The RoPE bug is born at L0.attn (rel_l2 0.47 from exact inputs); with
# --diverge 1 only the logits diverge, and final_norm is close at 0.72.
"$MKDEMO" --bug rope-style "$T/loose/ref" "$T/loose/cand" >/dev/null || bail_out "mkdemo rope-style failed"
expect_exit 1 "--diverge 1: only the logits diverge" "$TBISECT" check --json --no-history --diverge 1 "$T/loose/ref" "$T/loose/cand"
json_is "--diverge 1: first divergence logits" first_divergence.cell logits
o=$(json_get origin_text)
case $o in
*"no diverged cell adds more than x10 to its input error; L0.attn does (x2.36e+03: rel_l2 0.469 from inputs at 0), within --diverge 1"*)
	ok "--diverge 1: origin names the cell that multiplies its input error ($o)" ;;
*) not_ok "--diverge 1: origin names the cell that multiplies its input error" "origin_text: $o" ;;
esac
check_that "--diverge 1: origin claims no precision drift" sh -c 'case "$1" in *"precision drift"* | "no cell adds"*) exit 1 ;; esac' x "$o"
check_that "--diverge 1: no dtype-precision (L0.attn adds error far above rounding)" \
	sh -c "! grep -q '\"id\": \"dtype-precision\"' '$TAP_OUT'"
check_that "--diverge 1: no why-text says final_norm matches" sh -c "! grep -q 'final_norm matches' '$TAP_OUT'"
i=0 whys=
while [ "$i" -lt "$(json_get 'causes.#')" ]; do whys="$whys $(json_get causes.$i.why)"; i=$((i + 1)); done
case $whys in
*"final_norm stays within --diverge (rel_l2 0.722)"*) ok "--diverge 1: lm-head's why gives final_norm's rel_l2" ;;
*) not_ok "--diverge 1: lm-head's why gives final_norm's rel_l2" "why-texts:$whys" ;;
esac
# At the default tolerance the same pair is born at L0.attn, as before.
expect_exit 1 "default tolerance: the origin" "$TBISECT" check --json --no-history "$T/loose/ref" "$T/loose/cand"
cell_is "default tolerance: origin L0.attn" origin L0.attn
# Precision drift is still drift, with its largest step stated.
"$MKDEMO" --bug dtype-precision "$T/bf16/ref" "$T/bf16/cand" >/dev/null || bail_out "mkdemo dtype-precision failed"
expect_exit 0 "dtype-precision: nothing diverges" "$TBISECT" check --json --no-history "$T/bf16/ref" "$T/bf16/cand"
json_is "dtype-precision: the top cause" causes.0.id dtype-precision
o=$(json_get origin_text)
case $o in
*"L0.block does (x13.3"*"precision drift, not a broken op") ok "dtype-precision: origin states the largest step and the drift" ;;
*) not_ok "dtype-precision: origin states the largest step and the drift" "origin_text: $o" ;;
esac

tap_done
