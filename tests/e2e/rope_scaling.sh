#!/bin/sh
# RoPE scaling, YaRN and NoPE bugs (rope-scaling, yarn-scaling,
# nope-layers) on both decoders, mkdemo and the numpy one: where the query
# after RoPE is dumped (mkdemo --sub and --replay, model.py --replay) the
# first divergence is the bug's and its cause ranks first; a layer-type
# bug, YaRN's attention factor and a real config's llama3 scaling are
# found from the outputs alone; the new model options without a bug give
# no divergence.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

# judge DESC DIR WANT_CELL CAUSE [CONFIRMED]: check DIR/ref DIR/cand, first
# cell and first cause, and whether the replay confirmed it (yes or no).
judge() {
	run_cmd "$TBISECT" check --json --no-history "$2/ref" "$2/cand"
	conf=no
	[ -n "$(json_get causes.0.confirmed.variant)" ] && conf=yes
	got="$(json_get first_divergence.cell) $(json_get causes.0.id) $conf"
	want="$3 $4 ${5:-no}"
	if [ "$got" = "$want" ]; then
		ok "$1: $3, $4 first${5:+, confirmed $5}$( [ "$conf" = yes ] && echo " ($(json_get causes.0.confirmed.variant))")"
	else
		not_ok "$1" "got '$got', want '$want'"
	fi
}

# bug | cause with --sub | with --replay.  Only the pre-RoPE query of --replay
# shows the reference's own YaRN attention factor: with --sub alone a
# YaRN ramp error is a frequency scaling error like any other.
while IFS='|' read -r bug sub replay; do
	for taps in --sub --replay; do
		cause=$sub
		[ "$taps" = --replay ] && cause=$replay
		"$MKDEMO" $taps --bug "$bug" "$T/$bug$taps/ref" "$T/$bug$taps/cand" >/dev/null ||
			bail_out "mkdemo --bug $bug failed"
		conf=no
		[ "$taps" = --replay ] && conf=yes
		judge "mkdemo $bug $taps" "$T/$bug$taps" "$("$MKDEMO" $taps --expect "$bug")" "$cause" "$conf"
	done
	rm -rf "$T/$bug"*
done <<'TABLE'
rope-scaling-missing|rope-scaling|rope-scaling
rope-scaling-all|rope-scaling|rope-scaling
rope-llama3|rope-scaling|rope-scaling
yarn-mscale|yarn-scaling|yarn-scaling
yarn-mscale-twice|yarn-scaling|yarn-scaling
yarn-ramp|rope-scaling|yarn-scaling
nope-inverted|nope-layers|nope-layers
TABLE

# dynamic NTK: past original_max_position_embeddings (16) the reference
# raises theta to a value no config holds; the replay names the scaling,
# left out or added, where a theta fit alone would say rope-theta
"$MKDEMO" --bug rope-dynamic "$T/dyn/ref" "$T/dyn/cand" >/dev/null
expect_exit 0 "mkdemo rope-dynamic at 16 positions: no divergence" \
	"$TBISECT" check --no-history "$T/dyn/ref" "$T/dyn/cand"
"$MKDEMO" --seq 64 --replay --bug rope-dynamic "$T/dyn/ref" "$T/dyn/cand" >/dev/null
judge "mkdemo rope-dynamic --replay" "$T/dyn" L0.attn.q_rope rope-scaling yes
json_is "... named: no dynamic NTK, the reference's theta" causes.0.confirmed.variant \
	"no dynamic NTK: theta 1e+04, the reference's 3.06e+05"
"$MKDEMO" --seq 64 --replay --ref-only "$T/dyn/ref" >/dev/null
"$MKDEMO" --seq 64 --replay --rope-scaling dynamic:4 --cand-only "$T/dyn/cand" >/dev/null
judge "mkdemo dynamic NTK where the reference has none" "$T/dyn" L0.attn.q_rope rope-scaling yes
json_is "... named: a dynamic NTK base at 64 positions" causes.0.confirmed.variant \
	"dynamic NTK: theta 3.06e+05 from 1e+04 at 64 positions"
rm -rf "$T/dyn"

# from the outputs alone: only a global layer differs
"$MKDEMO" --seq 64 --bug rope-scaling-missing "$T/out/ref" "$T/out/cand" >/dev/null
judge "mkdemo rope-scaling-missing, outputs only" "$T/out" L1.attn rope-scaling

# from the outputs alone YaRN's attention factor is a mild temperature:
# the direction kept for the norm it moves, as no qk-norm keeps it, and
# nearer than a missing 1/sqrt(head_dim)
for bug in yarn-mscale yarn-mscale-twice; do
	rm -rf "$T/out"
	"$MKDEMO" --seq 64 --dtype bf16 --bug "$bug" "$T/out/ref" "$T/out/cand" >/dev/null
	judge "mkdemo $bug, outputs only" "$T/out" L0.attn yarn-scaling
done
for bug in softmax-scale qk-norm; do
	rm -rf "$T/out"
	"$MKDEMO" --seq 64 --dtype bf16 --bug "$bug" "$T/out/ref" "$T/out/cand" >/dev/null
	judge "mkdemo $bug, outputs only: not a YaRN factor" "$T/out" L0.attn "$bug"
done

# a longer sequence and a bf16 dump
"$MKDEMO" --sub --seq 256 --dtype bf16 --bug nope-inverted "$T/long/ref" "$T/long/cand" >/dev/null
judge "mkdemo nope-inverted --seq 256 bf16" "$T/long" L0.attn.q nope-layers

for opts in "--layer-types --sub" "--rope-scaling yarn:8 --replay" "--rope-scaling llama3:8 --nope 2 --sub"; do
	# shellcheck disable=SC2086
	"$MKDEMO" $opts "$T/clean/ref" "$T/clean/cand" >/dev/null
	expect_exit 0 "mkdemo $opts without a bug: match" "$TBISECT" check --no-history "$T/clean/ref" "$T/clean/cand"
done

# Gemma 3's windows: the sliding layers keep the last --window keys, so a
# window on every layer first shows at the first global layer, and another
# window size on the sliding ones at layer 0; the replay finds the
# reference's own window and the candidate's
rm -rf "$T/win"
"$MKDEMO" --layer-types --replay --seq 64 --bug sliding-window "$T/win/ref" "$T/win/cand" >/dev/null
judge "mkdemo sliding-window --layer-types --replay" "$T/win" L1.attn.core sliding-window yes
rm -rf "$T/win"
"$MKDEMO" --layer-types --replay --seq 64 --window 8 --ref-only "$T/win/ref" >/dev/null
"$MKDEMO" --layer-types --replay --seq 64 --window 16 --cand-only "$T/win/cand" >/dev/null
judge "mkdemo --layer-types, sliding windows of 8 and 16" "$T/win" L0.attn.core sliding-window yes
check_that "... the candidate's window named" test "$(json_get causes.0.confirmed.variant)" = \
	"a sliding window of 16 positions"

# the reverse: RoPE where the reference has none (every layer NoPE)
"$MKDEMO" --replay --nope 1 --bug nope-inverted "$T/rev/ref" "$T/rev/cand" >/dev/null
judge "mkdemo nope-inverted --nope 1 --replay" "$T/rev" L0.attn.q_rope nope-layers yes

# older RoPE bugs on the scaled models: their own cause, confirmed, none of the new ones
for case in "--rope-scaling yarn:4|rope-style|rope-style" "--layer-types --dtype bf16|qk-norm|qk-norm" \
	"--rope-scaling llama3:8|attention-layout|attention-layout" "--nope 2|rotate-half-sign|rotate-half-sign"; do
	opts=${case%%|*}
	bug=${case#*|}
	cause=${bug#*|}
	bug=${bug%|*}
	rm -rf "$T/old"
	# shellcheck disable=SC2086
	"$MKDEMO" --replay $opts --bug "$bug" "$T/old/ref" "$T/old/cand" >/dev/null
	judge "mkdemo $bug $opts --replay" "$T/old" L0.attn.q_rope "$cause" yes
done

expect_exit 2 "a bug with a contradicting option is refused" "$MKDEMO" --layer-types --bug yarn-ramp "$T/x/ref" "$T/x/cand"
check_that "... in one line" test "$(wc -l <"$TAP_ERR")" -eq 1

if PY=$(find_python numpy); then
	while IFS='|' read -r bug cell cause; do
		rm -rf "$T/py"
		"$PY" "$top_srcdir/tests/pymodel/model.py" --replay --seed 2 --bug "$bug" "$T/py/ref" "$T/py/cand"
		judge "model.py $bug --replay" "$T/py" "$cell" "$cause" yes
	done <<'TABLE'
rope-scaling-missing|L1.attn.q_rope|rope-scaling
rope-scaling-all|L0.attn.q_rope|rope-scaling
rope-llama3|L0.attn.q_rope|rope-scaling
yarn-mscale|L0.attn.q_rope|yarn-scaling
yarn-mscale-twice|L0.attn.q_rope|yarn-scaling
yarn-ramp|L0.attn.q_rope|yarn-scaling
nope-inverted|L0.attn.q_rope|nope-layers
rope-dynamic|L0.attn.q_rope|rope-scaling
TABLE
	# a real config's llama3 (original_max_position_embeddings 8192, head_dim 128): the swapped factors
	# change only the pairs of wavelengths 2048 to 8192, which no line nor one factor explains; a theta
	# changed on the same reference moves which pairs scale too, and is not taken for a scaling
	for case in "rope-llama3 rope-scaling yes" "rope-theta rope-theta no"; do
		# shellcheck disable=SC2086
		set -- $case
		rm -rf "$T/py"
		"$PY" "$top_srcdir/tests/pymodel/model.py" --replay --hidden 256 --heads 2 --head-dim 128 --kv-heads 1 \
			--mlp 256 --seq 128 --rope-orig 8192 --rope-scaling llama3:8 --bug "$1" "$T/py/ref" "$T/py/cand"
		judge "model.py $1 --replay, llama3 (original 8192)" "$T/py" L0.attn.q_rope "$2" "$3"
	done
	# ... and from the outputs alone: a llama3 scaling left out moves only the slow pairs, so the attention
	# is off from about position 40 on, where a theta of 5e5 for 1e6 is off from position 5 on
	big="--hidden 256 --heads 2 --head-dim 128 --kv-heads 1 --mlp 256 --seq 256 --rope-orig 8192"
	rm -rf "$T/py" "$T/py2"
	# shellcheck disable=SC2086
	"$PY" "$top_srcdir/tests/pymodel/model.py" $big --rope-scaling llama3:8 "$T/py/ref" "$T/py2/cand"
	# shellcheck disable=SC2086
	"$PY" "$top_srcdir/tests/pymodel/model.py" $big "$T/py2/ref" "$T/py/cand"
	judge "model.py llama3 scaling left out, outputs only" "$T/py" L0.attn rope-scaling
	rm -rf "$T/py"
	# shellcheck disable=SC2086
	"$PY" "$top_srcdir/tests/pymodel/model.py" $big --theta 1e6 --bug rope-theta "$T/py/ref" "$T/py/cand"
	judge "model.py theta 5e5 for 1e6, outputs only" "$T/py" L0.attn rope-theta
	# the attn.o replay from q and k before RoPE: the reference's dynamic base, 2.49e6, fitted as 2.5e6 from
	# bf16 dumps that cannot tell the two apart, is still a dynamic scaling (factor 4, original 16)
	rm -rf "$T/py"
	"$PY" "$top_srcdir/tests/pymodel/model.py" --subtaps --hidden 96 --heads 6 --head-dim 16 --kv-heads 3 \
		--seq 512 --format bf16 --seed 2 --bug rope-dynamic "$T/py/ref" "$T/py/cand"
	judge "model.py rope-dynamic, bf16, no query after RoPE" "$T/py" L0.attn.o rope-scaling yes
	rm -rf "$T/py"
	"$PY" "$top_srcdir/tests/pymodel/model.py" --subtaps --bug rope-scaling-missing "$T/py/ref" "$T/py/cand"
	judge "model.py rope-scaling-missing, no query after RoPE" "$T/py" L1.attn.o rope-scaling
	for bug in yarn-mscale yarn-mscale-twice qk-norm; do
		rm -rf "$T/py"
		"$PY" "$top_srcdir/tests/pymodel/model.py" --seed 3 --bug "$bug" "$T/py/ref" "$T/py/cand"
		want=yarn-scaling
		[ "$bug" = qk-norm ] && want=qk-norm
		judge "model.py $bug, outputs only" "$T/py" L0.attn "$want"
	done
	rm -rf "$T/py"
	"$PY" "$top_srcdir/tests/pymodel/model.py" --replay --layer-types --rope-scaling yarn:4 --nope 3 "$T/py/ref" "$T/py/cand"
	expect_exit 0 "model.py with layer types, yarn and NoPE, no bug: match" "$TBISECT" check --no-history "$T/py/ref" "$T/py/cand"
else
	skip "the numpy decoder" "no python3 with numpy (Debian: python3-numpy)"
fi
tap_done
