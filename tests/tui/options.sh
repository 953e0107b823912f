#!/bin/sh
# Every option `check` honours, the interactive view honours too: for each
# row of the table below, `tbisect check --json --features OPTIONS REF CAND`
# and the view in script mode (`:export`, then q) on the same pair must give
# the same exit code and the same verdict, first divergence, top causes,
# origin, status counts and measured features; and the option must change
# that outcome (against the same pair without it), so a mode that ignored
# it would fail here.  Both run the one pipeline of src/run/run.c.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tap_setup
TBISECT=$(cd "$(dirname "$TBISECT")" && pwd)/$(basename "$TBISECT")
JSONQ=$(cd "$(dirname "$JSONQ")" && pwd)/$(basename "$JSONQ")
MKDEMO=$(cd "$top_builddir" && pwd)/samples/mkdemo
FMTGEN=$(cd "$top_builddir" && pwd)/tests/fmtgen
TBGEN=$(cd "$(dirname "$TBGEN")" && pwd)/$(basename "$TBGEN")
tui_pin_env
LINES=24
COLUMNS=80
export LINES COLUMNS
cd "$TAP_TMP"

# --- the pairs and files the options act on ---
"$MKDEMO" --bug rope-style rope/ref rope/cand >/dev/null || bail_out "mkdemo rope-style failed"
"$MKDEMO" --bug dtype-precision prec/ref prec/cand >/dev/null || bail_out "mkdemo dtype-precision failed"
"$MKDEMO" --bug tied-embeddings tied/ref tied/cand >/dev/null || bail_out "mkdemo tied-embeddings failed"
"$MKDEMO" --sub --bug attention-layout heads/ref heads/cand >/dev/null || bail_out "mkdemo attention-layout failed"
"$MKDEMO" --sub --bug rope-style ropesub/ref ropesub/cand >/dev/null || bail_out "mkdemo rope-style --sub failed"
# The candidate under names only a map pairs: blk.N.{ln1,sa,ln2,ff,out}.
mkdir renamed
for f in rope/cand/*.npy; do
	b=$(basename "$f" .npy)
	n=$(echo "$b" | sed -e 's/^model\.layers\.\([0-9]*\)\.input_layernorm$/blk.\1.ln1/' \
		-e 's/^model\.layers\.\([0-9]*\)\.self_attn$/blk.\1.sa/' \
		-e 's/^model\.layers\.\([0-9]*\)\.post_attention_layernorm$/blk.\1.ln2/' \
		-e 's/^model\.layers\.\([0-9]*\)\.mlp$/blk.\1.ff/' \
		-e 's/^model\.layers\.\([0-9]*\)$/blk.\1.out/')
	cp "$f" "renamed/$n.npy"
done
cat >map.json <<'EOF'
{"rules": [{"match": "^blk\\.([0-9]+)\\.ln1$", "layer": "\\1", "tap": "attn_norm"},
           {"match": "^blk\\.([0-9]+)\\.sa$", "layer": "\\1", "tap": "attn"},
           {"match": "^blk\\.([0-9]+)\\.ln2$", "layer": "\\1", "tap": "mlp_norm"},
           {"match": "^blk\\.([0-9]+)\\.ff$", "layer": "\\1", "tap": "mlp"},
           {"match": "^blk\\.([0-9]+)\\.out$", "layer": "\\1", "tap": "block"}]}
EOF
cat >tol.json <<'EOF'
[{"match": "L0\\.attn", "diverge": 10}]
EOF
# With attn.q let through, the first divergence is attn.k: kv heads matter.
cat >tol-q.json <<'EOF'
[{"match": "L0\\.attn\\.q", "diverge": 10}]
EOF
cat >rules.json <<'EOF'
{"rules": [{"id": "team-attention-check", "weight": 1, "require": ["at_attn"],
            "why": "our own rule for {cell}", "look_at": "the team's attention notes"}]}
EOF
# Two prompts in each golden file: the first the same, the second not.
"$FMTGEN" convert golden rope/ref,rope/ref golden-ref.jsonl || bail_out "fmtgen golden failed"
"$FMTGEN" convert golden rope/ref,rope/cand golden-cand.jsonl || bail_out "fmtgen golden failed"
# bf16 .npy, which numpy writes as raw 2-byte void data.
"$TBGEN" --layers 2 --ref-dtype bf16 --cand-dtype bf16 --ref-format safetensors --bug noise@L1.mlp:1 \
	void/ref void/cand || bail_out "tbgen bf16 failed"

printf ':export tui.json\nq\n' >export.script

# outcome FILE: the facts both modes must agree on, one line.
outcome() {
	for _k in verdict first_divergence.layer first_divergence.tap first_divergence.first_bad_position \
		causes.0.id causes.0.score causes.1.id origin.layer origin.tap origin_factor counts \
		features.heads features.head_ok_frac unpaired; do
		printf '%s=%s ' "$_k" "$("$JSONQ" "$1" "$_k" 2>/dev/null || echo absent)"
	done
}

# same_in_both NAME REF CAND BASE OPTIONS...: check and the view agree
# with BASE and OPTIONS, and OPTIONS change the outcome against the same
# pair with BASE alone.  BASE: options joined by ',' ("-" for none).
same_in_both() {
	_name=$1 _ref=$2 _cand=$3 _base=$4
	shift 4
	[ "$_base" = - ] && _base=
	_base=$(echo "$_base" | tr ',' ' ')
	rc_c=0
	# shellcheck disable=SC2086
	"$TBISECT" check --json --features --no-history $_base "$@" "$_ref" "$_cand" >check.json 2>check.err || rc_c=$?
	rc_t=0
	rm -f tui.json
	# shellcheck disable=SC2086
	env TBISECT_SCRIPT=export.script "$TBISECT" --no-history $_base "$@" "$_ref" "$_cand" >/dev/null 2>tui.err ||
		rc_t=$?
	check_that "$_name: the same exit code in check ($rc_c) and the view ($rc_t)" test "$rc_c" -eq "$rc_t"
	if [ "$rc_c" -eq 2 ]; then
		check_that "$_name: the same error in both" cmp -s check.err tui.err
		return 0
	fi
	check_that "$_name: the view exported its report" test -s tui.json
	want=$(outcome check.json)
	got=$( [ -s tui.json ] && outcome tui.json || echo none)
	if [ "$want" = "$got" ]; then
		ok "$_name: the same outcome in both ($(echo "$want" | cut -c1-80)...)"
	else
		not_ok "$_name: the same outcome in both" "check: $want"
		diag "view:  $got"
	fi
	base_rc=0
	# shellcheck disable=SC2086
	"$TBISECT" check --json --features --no-history $_base "$_ref" "$_cand" >base.json 2>/dev/null || base_rc=$?
	if [ "$base_rc" -ne "$rc_c" ] || [ "$(outcome base.json)" != "$want" ]; then
		ok "$_name: the option changes the outcome"
	else
		not_ok "$_name: the option changes the outcome" "same as without it: $want"
	fi
}

# One row per option: name, the pair, the options both runs share with the
# baseline, the options under test.
while read -r name ref cand base opts; do
	case "$name" in '#'* | '') continue ;; esac
	# shellcheck disable=SC2086
	same_in_both "$name" "$ref" "$cand" "$base" $opts
done <<'ROWS'
--tol           rope/ref         rope/cand          -                   --tol tol.json
--rules         rope/ref         rope/cand          -                   --rules rules.json
--map           rope/ref         renamed            -                   --map map.json
--atol/--rtol   prec/ref         prec/cand          -                   --atol 1 --rtol 1
--diverge       rope/ref         rope/cand          -                   --diverge 10
--max-kl        tied/ref         tied/cand          --diverge,1000      --max-kl 1000
--origin-factor rope/ref         rope/cand          -                   --origin-factor 1000
--record        golden-ref.jsonl golden-cand.jsonl  -                   --record 1
--heads         heads/ref        heads/cand         -                   --heads 8
--kv-heads      ropesub/ref      ropesub/cand       --tol,tol-q.json    --kv-heads 2
--heads/--kv-heads ropesub/ref   ropesub/cand       --tol,tol-q.json    --heads 8 --kv-heads 2
--npy-void2     void/ref         void/cand          -                   --npy-void2 bf16
--tol/--diverge rope/ref         rope/cand          --tol,tol.json      --diverge 0.5
ROWS

tap_done
