#!/bin/sh
# kv-cache and dump-aliasing on mkdemo and on the numpy model, with and
# without sub-taps, at several lengths: the first divergence where the
# generator says, the right cause first, confirmed by replay where
# attn.core and its inputs are dumped in f32 (the cache's fp8 read back
# from the prefill's end), nothing confirmed elsewhere.  The
# kv-cache pair also as steps (a prefill, then one step per position):
# stitched, the rule sees where the decode starts; one decode step alone
# is named too; a clean pair of steps matches.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP
LAYOUTGEN=$top_builddir/tests/layoutgen

# diagnosed DESC DIR WANT_CELL CAUSE [CHECK OPTIONS]: first divergence, first cause, and the
# replay's confirmed variant $CONFIRMED (nothing confirmed when empty).
diagnosed() {
	_d=$1 _dir=$2 _cell=$3 _cause=$4
	shift 4
	run_cmd "$TBISECT" check --json --no-history "$@" "$_dir/ref" "$_dir/cand"
	json_is "$_d: first divergence" first_divergence.cell "$_cell"
	json_is "$_d: $_cause first" causes.0.id "$_cause"
	if [ -n "${CONFIRMED:-}" ]; then
		json_is "$_d: confirmed" causes.0.confirmed.variant "$CONFIRMED"
	else
		check_that "$_d: nothing confirmed" sh -c "! grep -q '\"confirmed\":[[:space:]]*{' '$TAP_OUT'"
	fi
}

# bug | mkdemo options | the variant replay confirms
while IFS='|' read -r bug opts CONFIRMED; do
	case $bug in '' | '#'*) continue ;; esac
	dir=$T/$bug$(echo "$opts" | tr -d ' -')
	# shellcheck disable=SC2086
	"$MKDEMO" $opts --bug "$bug" "$dir/ref" "$dir/cand" >/dev/null || bail_out "mkdemo --bug $bug failed"
	# shellcheck disable=SC2086
	diagnosed "mkdemo $bug $opts" "$dir" "$("$MKDEMO" $opts --expect "$bug")" "$bug"
done <<'TABLE'
kv-cache|--seq 16|
kv-cache|--seq 64 --sub --seed 2|
kv-cache|--seq 32 --replay|K and V through an fp8 e4m3 cache from position 16 on
kv-cache|--seq 64 --replay --dtype bf16|
kv-cache|--seq 64 --prefill 40 --format safetensors --dtype bf16|
dump-aliasing|--seq 16 --replay
dump-aliasing|--seq 64 --sub
dump-aliasing|--seq 256 --seed 3
TABLE
# the reverse: the reference decodes through the cache, the candidate not
"$MKDEMO" --seq 64 --replay --bug kv-cache "$T/swap/cand" "$T/swap/ref" >/dev/null
CONFIRMED="K and V as computed (the reference: an fp8 e4m3 cache)" \
	diagnosed "the reference reads the cache" "$T/swap" L0.attn.core kv-cache
CONFIRMED=

# q and k before RoPE and attn.o, the prefill past the positions o_proj is fitted on: the replay says so
"$MKDEMO" --sub --seq 256 --bug kv-cache "$T/late/ref" "$T/late/cand" >/dev/null
diagnosed "the decode past o_proj's fit" "$T/late" L0.attn.o kv-cache
run_cmd "$TBISECT" check --no-history "$T/late/ref" "$T/late/cand"
check_that "the decode past o_proj's fit: the replay names the positions it saw" \
	grep -q "the first 96 positions, where the candidate's output is the reference's; it departs from position 128" \
	"$TAP_OUT"

# A prefill of 8, then 8 decode steps of one position.
"$MKDEMO" --sub --bug kv-cache "$T/s/ref" "$T/s/cand" >/dev/null
"$MKDEMO" --sub "$T/s/ref" "$T/s/ok" >/dev/null
for side in ref cand ok; do
	"$LAYOUTGEN" npy "$T/s/$side" "$T/steps/$side" 1 8,1,1,1,1,1,1,1,1 || bail_out "layoutgen failed"
done
diagnosed "steps stitched" "$T/steps" L0.attn.o kv-cache --steps all
check_that "steps stitched: the why names the first decode position" \
	grep -q 'goes bad at the first decode position (8)' "$TAP_OUT"
expect_exit 0 "the prefill step alone matches" "$TBISECT" check --no-history "$T/steps/ref" "$T/steps/cand"
diagnosed "one decode step alone" "$T/steps" L0.attn.o kv-cache --step 3
check_that "one decode step alone: the why names the step" grep -q 'of decode step 3, compared alone' "$TAP_OUT"
expect_exit 0 "a clean decode step alone matches" "$TBISECT" check --json --no-history --step 3 "$T/steps/ref" "$T/steps/ok"
expect_exit 0 "a clean pair of steps, stitched, matches" \
	"$TBISECT" check --json --no-history --steps all "$T/steps/ref" "$T/steps/ok"
json_is "a clean pair of steps: no cause" 'causes.#' 0

if PY=$(find_python numpy); then
	# bug | model.py options | the variant replay confirms (rows 157 and 164 are sampled, none between:
	# the first decode position is found between them)
	while IFS='|' read -r bug opts CONFIRMED; do
		dir=$T/py$bug$(echo "$opts" | tr -d ' -')
		# shellcheck disable=SC2086
		"$PY" "$top_srcdir/tests/pymodel/model.py" --bug "$bug" $opts "$dir/ref" "$dir/cand" ||
			bail_out "model.py --bug $bug failed"
		want=L0.attn
		case $bug,$opts in
		kv-cache,*subtaps*) want=L0.attn.o ;;
		kv-cache,*replay*) want=L0.attn.core ;;
		dump-aliasing,*subtaps* | dump-aliasing,*replay*) want=L0.mlp.down ;;
		dump-aliasing,*) want=L0.mlp ;;
		esac
		diagnosed "numpy $bug $opts" "$dir" "$want" "$bug"
	done <<-'TABLE'
	kv-cache|--seq 16|
	kv-cache|--seq 64 --subtaps --heads 6 --kv-heads 3 --head-dim 16 --hidden 96|
	kv-cache|--seq 256 --replay --prefill 160|K and V through an fp8 e4m3 cache from position 160 on
	kv-cache|--seq 48 --replay --prefill 40 --kv-dtype e5m2|K and V through an fp8 e5m2 cache from position 40 on
	kv-cache|--seq 160 --kv-dtype e5m2 --format bf16|
	dump-aliasing|--seq 16 --subtaps|
	dump-aliasing|--seq 64 --replay|
	TABLE
	CONFIRMED=
	# A block kept by reference, then the next layer's attention added into it in place.
	"$MKDEMO" "$T/blk/ref" "$T/blk/cand" >/dev/null
	"$PY" -c 'import sys, numpy as np
d = sys.argv[1]
np.save(d + "/cand/model.layers.1.npy", np.load(d + "/ref/model.layers.1.npy") + np.load(d + "/ref/model.layers.2.self_attn.npy"))' "$T/blk"
	diagnosed "an aliased block" "$T/blk" L1.block dump-aliasing
	check_that "an aliased block: the why names the next block" grep -q 'while L2.block, the residual sum' "$TAP_OUT"
else
	skip "the numpy model" "no python3 with numpy (Debian: python3-numpy)"
fi
tap_done
