#!/bin/sh
# tbisect sketch: a fingerprint of a tree, taken in place of the tree by
# check and ls, from any layout (ranks joined first, bf16 safetensors).  Sketch against tree and sketch against sketch agree with
# the full comparison on the verdict, the first divergence and its first
# bad position; every estimated rel_l2 lies inside its stated bound (JSON
# estimated, rel_l2_bound); equal tensors are known equal (match, exit 0).
# Every bug mkdemo injects agrees too, in every dtype and format in turn.
# Bad sketches (other seed, truncated, corrupted, another version) give
# exit 2 and one line naming the file; the trees are never written to.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

"$MKDEMO" --sub --layers 3 --seq 64 --ref-only "$T/ref" >/dev/null || bail_out "mkdemo failed"
for bug in none rope-style sliding-window mlp-activation mlp-bias dtype-precision nan-overflow; do
	"$MKDEMO" --sub --layers 3 --seq 64 --bug "$bug" --cand-only "$T/$bug" >/dev/null || bail_out "mkdemo $bug failed"
done
snapshot "$T/ref" >"$T/ref.before"

expect_exit 0 "sketch the reference" "$TBISECT" sketch "$T/ref" -o "$T/ref.tbsk"
check_that "it says what it wrote" grep -q "^tbisect: wrote $T/ref.tbsk: 40 tensors, [0-9]* bytes (.*% of the tree's [0-9]*), seed 1\$" "$TAP_ERR"
check_that "rows of 64 values: a note says the sketch is no smaller thing to carry" \
	grep -q "^tbisect: note: the sketch is [0-9]*% of the tree: each tensor, row and column carry a fixed part" "$TAP_ERR"
"$TBGEN" --layers 1 --seq 256 --hidden 1024 --vocab 256 "$T/wide" "$T/wide-cand" >/dev/null || bail_out "tbgen failed"
expect_exit 0 "sketch a tree of 1024-value rows" "$TBISECT" sketch "$T/wide" -o "$T/wide.tbsk"
check_that "... under 1% of it, with no note ($(cat "$TAP_ERR"))" \
	sh -c 'grep -q "(0\.[0-9]*% of the tree" "$1" && ! grep -q note "$1"' - "$TAP_ERR"
snapshot "$T/ref" >"$T/ref.after"
check_that "the tree is not written to" cmp -s "$T/ref.before" "$T/ref.after"
expect_exit 0 "ls the sketch" "$TBISECT" ls "$T/ref.tbsk"
check_that "ls: the tensors and their cells" grep -q '^model.layers.1.self_attn.q_proj  *L1.attn.q  *f32  *\[1, 64, 64\]  *.*ref.tbsk' "$TAP_OUT"
check_that "ls: 40 tensors, none unmapped" grep -q '^40 tensors, 0 unmapped$' "$TAP_OUT"

expect_exit 0 "a sketch against its own tree" "$TBISECT" check --json --no-history "$T/ref.tbsk" "$T/ref"
json_is "own tree: match (every block hash equal)" verdict match
json_is "own tree: estimated" cells.0.estimated true
json_is "own tree: bound [0, 0]" cells.3.rel_l2_bound '[0,0]'
expect_exit 0 "a correct port: match" "$TBISECT" check --json --no-history "$T/ref.tbsk" "$T/none"
json_is "correct port: match" verdict match

# agree NAME SKETCH-REF SKETCH-CAND LABEL [FULL-REF]: the full comparison
# (FULL-REF, default $T/ref, against $T/NAME) and the sketch's, on verdict,
# first divergence, first bad position, bounds
agree() {
	run_cmd "$TBISECT" check --json --no-history "${5:-$T/ref}" "$T/$1"
	cp "$TAP_OUT" "$T/full.json"
	run_cmd "$TBISECT" check --json --no-history "$2" "$3"
	cp "$TAP_OUT" "$T/est.json"
	for k in verdict first_divergence.cell first_divergence.first_bad_position; do
		_a=$("$JSONQ" "$T/full.json" "$k" 2>&1 || :)
		_b=$("$JSONQ" "$T/est.json" "$k" 2>&1 || :)
		check_that "$1 ($4): $k $_a" test "$_a" = "$_b"
	done
	_n=$("$JSONQ" "$T/est.json" 'cells.#')
	_i=0 _out=0
	while [ "$_i" -lt "$_n" ]; do
		_r=$("$JSONQ" "$T/full.json" "cells.$_i.rel_l2")
		# where NaN or Inf differ the sketch's sums are over each side's finite
		# values, not the common ones (the cell is diverged either way)
		[ "$("$JSONQ" "$T/full.json" "cells.$_i.nan.0")" = "$("$JSONQ" "$T/full.json" "cells.$_i.nan.1")" ] || _r=null
		_lo=$("$JSONQ" "$T/est.json" "cells.$_i.rel_l2_bound.0")
		_hi=$("$JSONQ" "$T/est.json" "cells.$_i.rel_l2_bound.1")
		awk -v r="$_r" -v lo="$_lo" -v hi="$_hi" 'BEGIN { exit !(r == "null" || (r + 0 >= lo * (1 - 1e-9) && (hi == "null" || r + 0 <= hi * (1 + 1e-9)))) }' ||
			_out=$((_out + 1))
		_i=$((_i + 1))
	done
	check_that "$1 ($4): every rel_l2 inside its bound ($_n cells, $_out outside)" test "$_out" -eq 0
}
for bug in rope-style sliding-window mlp-activation mlp-bias dtype-precision nan-overflow; do
	agree "$bug" "$T/ref.tbsk" "$T/$bug" "sketch against tree"
done
# NaN and Inf (-Inf too) are counted as in the values; a non-finite value is
# a zero in its side's sums but leaves its pair out of the values' rel_l2:
# which pair, a sketch does not say, so the bound says nothing
"$MKDEMO" --bug nan-overflow "$T/nref" "$T/ncand" >/dev/null || bail_out "mkdemo nan-overflow failed"
"$TBISECT" sketch "$T/ncand" -o "$T/ncand.tbsk" 2>/dev/null || bail_out "sketch failed"
run_cmd "$TBISECT" check --json --no-history "$T/nref" "$T/ncand"
first=$(json_get first_divergence.ref_name)
n=$(json_get 'cells.#')
i=0
while [ "$i" -lt "${n:-0}" ] && [ "$(json_get "cells.$i.ref_name")" != "$first" ]; do
	i=$((i + 1))
done
infs=$(json_get "cells.$i.inf.1")
check_that "nan-overflow: the values hold Inf at the first divergence" test "${infs:-0}" -gt 0
expect_exit 1 "nan-overflow, the candidate a sketch" "$TBISECT" check --json --no-history "$T/nref" "$T/ncand.tbsk"
json_is "nan-overflow: the sketch counts the values' Inf" "cells.$i.inf.1" "$infs"
json_is "nan-overflow: the bound's low end is 0" "cells.$i.rel_l2_bound.0" 0
json_is "nan-overflow: the bound has no high end" "cells.$i.rel_l2_bound.1" null
# the tree's token ids and its tie score, measured on the values, ride in
# the sketch: lm-head and tied-embeddings are told apart from a sketch, and
# so are tokens that differ
for bug in lm-head tied-embeddings; do
	"$MKDEMO" --sub --layers 3 --seq 64 --bug "$bug" --cand-only "$T/t-$bug" >/dev/null || bail_out "mkdemo $bug failed"
	expect_exit 1 "$bug, the reference a sketch" "$TBISECT" check --json --no-history "$T/ref.tbsk" "$T/t-$bug"
	json_is "$bug: named from the sketch's tie score" causes.0.id "$bug"
	"$TBISECT" sketch "$T/t-$bug" -o "$T/t-$bug.tbsk" 2>/dev/null || bail_out "sketch failed"
	expect_exit 1 "$bug, the candidate a sketch" "$TBISECT" check --json --no-history "$T/ref" "$T/t-$bug.tbsk"
	json_is "$bug: named from the candidate's sketch" causes.0.id "$bug"
done
# a rotation keeps each position's norm up to the dtype's rounding: in bf16
# the rules tell RoPE at q_rope from the sketch's exact row norms
"$MKDEMO" --replay --dtype bf16 --ref-only "$T/rref" >/dev/null || bail_out "mkdemo failed"
"$MKDEMO" --replay --dtype bf16 --bug rope-style --cand-only "$T/rcand" >/dev/null || bail_out "mkdemo failed"
"$TBISECT" sketch "$T/rref" -o "$T/rref.tbsk" 2>/dev/null || bail_out "sketch failed"
expect_exit 1 "bf16 rope-style at q_rope, the reference a sketch" "$TBISECT" check --json --no-history "$T/rref.tbsk" "$T/rcand"
json_is "bf16 rope-style: named from the sketch" causes.0.id rope-style
# The attention rules read the per-position cosines of positions 1-15
# (early_cos: 0.73 from the sketch, 0.83 from the values), not the whole
# tensor's, whose estimate (0.941) once passed qk-norm's "cosine >= 0.94"
# and ranked qk-norm first: the RoPE faults rank first either way.
"$MKDEMO" --bug rotate-half-sign "$T/rh-ref" "$T/rh-cand" >/dev/null || bail_out "mkdemo rotate-half-sign failed"
"$TBISECT" sketch "$T/rh-ref" -o "$T/rh-ref.tbsk" 2>/dev/null || bail_out "sketch failed"
expect_exit 1 "rotate-half-sign, the reference a sketch" "$TBISECT" check --json --no-history "$T/rh-ref.tbsk" "$T/rh-cand"
json_is "rotate-half-sign: rope-style at the estimate" causes.0.id rope-style
rs_ids=
for i in 0 1 2 3 4; do rs_ids="$rs_ids $(json_get causes.$i.id)"; done
check_that "rotate-half-sign among the causes, qk-norm not ($rs_ids)" sh -c 'case "$1" in *qk-norm*) exit 1 ;; *rotate-half-sign*) exit 0 ;; esac; exit 1' - "$rs_ids"
expect_exit 1 "rotate-half-sign, both trees" "$TBISECT" check --json --no-history "$T/rh-ref" "$T/rh-cand"
json_is "rotate-half-sign: rope-style from the values" causes.0.id rope-style
check_that "... with nothing left open" sh -c '! grep -q "cannot settle" "$1"' - "$TAP_OUT"
# a per-channel offset is told from the sketches' column sums, as from the values
expect_exit 1 "mlp-bias from the sketch" "$TBISECT" check --json --no-history "$T/ref.tbsk" "$T/mlp-bias"
json_is "mlp-bias: the cause from the column sums" causes.0.id mlp-bias
# the dump checks: a layer's sketch against its neighbour's, and block hashes
"$MKDEMO" --bug dump-offset "$T/off-ref" "$T/off-cand" >/dev/null || bail_out "mkdemo dump-offset failed"
"$MKDEMO" --bug dump-duplicate "$T/dup-ref" "$T/dup-cand" >/dev/null || bail_out "mkdemo dump-duplicate failed"
"$TBISECT" sketch "$T/off-ref" -o "$T/off-ref.tbsk" 2>/dev/null || bail_out "sketch failed"
"$TBISECT" sketch "$T/dup-cand" -o "$T/dup-cand.tbsk" 2>/dev/null || bail_out "sketch failed"
expect_exit 1 "dump-offset, the reference a sketch" "$TBISECT" check --json --no-history "$T/off-ref.tbsk" "$T/off-cand"
json_is "dump-offset from the sketch" causes.0.id dump-offset
expect_exit 1 "dump-duplicate, the candidate a sketch" "$TBISECT" check --json --no-history "$T/dup-ref" "$T/dup-cand.tbsk"
json_is "dump-duplicate from the block hashes" causes.0.id dump-duplicate
# a token sequence shifted by one (a BOS added), from the rows' norms
"$MKDEMO" --bug tokenizer-bos "$T/bos-ref" "$T/bos-cand" >/dev/null || bail_out "mkdemo tokenizer-bos failed"
"$TBISECT" sketch "$T/bos-ref" -o "$T/bos-ref.tbsk" 2>/dev/null || bail_out "sketch failed"
expect_exit 1 "tokenizer-bos, the reference a sketch" "$TBISECT" check --json --no-history "$T/bos-ref.tbsk" "$T/bos-cand"
json_is "tokenizer from the rows' norms" causes.0.id tokenizer
expect_exit 0 "sketch a candidate" "$TBISECT" sketch "$T/rope-style" -o "$T/rope.tbsk"
agree rope-style "$T/ref.tbsk" "$T/rope.tbsk" "sketch against sketch"
agree rope-style "$T/ref" "$T/rope.tbsk" "tree against sketch"
# every bug mkdemo injects, each pair in one of the dtypes and formats in
# turn: sketch against tree, and sketch against sketch
n_bugs=0
for bug in $("$MKDEMO" --list | awk '{ print $1 }'); do
	dt=$(echo "f32 bf16 f16" | cut -d' ' -f$((n_bugs % 3 + 1)))
	fmt=$(echo "npy safetensors" | cut -d' ' -f$((n_bugs / 3 % 2 + 1)))
	d=all-$bug
	"$MKDEMO" --sub --layers 2 --seq 32 --seed $((n_bugs + 2)) --dtype "$dt" --format "$fmt" --bug "$bug" \
		"$T/$d-ref" "$T/$d" >/dev/null || bail_out "mkdemo $bug failed"
	"$TBISECT" sketch "$T/$d-ref" -o "$T/$d-ref.tbsk" 2>/dev/null || bail_out "sketch of $d-ref failed"
	"$TBISECT" sketch "$T/$d" -o "$T/$d.tbsk" 2>/dev/null || bail_out "sketch of $d failed"
	agree "$d" "$T/$d-ref.tbsk" "$T/$d" "$dt $fmt, sketch against tree" "$T/$d-ref"
	agree "$d" "$T/$d-ref.tbsk" "$T/$d.tbsk" "$dt $fmt, sketch against sketch" "$T/$d-ref"
	n_bugs=$((n_bugs + 1))
done
check_that "every bug of mkdemo's list ($n_bugs)" test "$n_bugs" -ge 31

# every layout tbisect reads: ranks joined before sketching, bf16 safetensors
"$top_builddir/tests/layoutgen" npy "$T/ref" "$T/tp2" 2 64 || bail_out "layoutgen failed"
expect_exit 0 "sketch a tree of two tensor-parallel ranks" "$TBISECT" sketch "$T/tp2" -o "$T/tp2.tbsk"
expect_exit 0 "the ranks' sketch against the unsharded tree: match" "$TBISECT" check --json --no-history "$T/tp2.tbsk" "$T/ref"
json_is "ranks joined: match, every block hash equal" verdict match
"$MKDEMO" --sub --layers 3 --seq 64 --dtype bf16 --format safetensors --ref-only "$T/bf" >/dev/null || bail_out "mkdemo failed"
"$MKDEMO" --sub --layers 3 --seq 64 --dtype bf16 --format safetensors --bug rope-style --cand-only "$T/bfc" >/dev/null ||
	bail_out "mkdemo failed"
expect_exit 0 "sketch a bf16 safetensors file" "$TBISECT" sketch "$T/bf" -o "$T/bf.tbsk"
run_cmd "$TBISECT" check --json --no-history "$T/bf" "$T/bfc"
cp "$TAP_OUT" "$T/full.json"
run_cmd "$TBISECT" check --json --no-history "$T/bf.tbsk" "$T/bfc"
json_is "bf16: the same first divergence" first_divergence.cell "$("$JSONQ" "$T/full.json" first_divergence.cell)"
json_is "bf16: the same first bad position" first_divergence.first_bad_position "$("$JSONQ" "$T/full.json" first_divergence.first_bad_position)"
# a float32 reference's sketch compares with a bfloat16 candidate's
# (test_sketch checks that the parameters follow the shape alone)
expect_exit 0 "an f32 sketch against a bf16 sketch of the same model" "$TBISECT" check --json --no-history "$T/ref.tbsk" "$T/bf.tbsk"
json_is "f32 against bf16 sketches: close, as the trees" verdict close

# each host sketches its own rank; the merged sketch is the joined tree's
mkdir "$T/host0" "$T/host1"
cp -r "$T/tp2/rank_0" "$T/host0/"
cp -r "$T/tp2/rank_1" "$T/host1/"
expect_exit 0 "sketch rank 0 of 2 alone" "$TBISECT" sketch --rank 0/2 "$T/host0/rank_0" -o "$T/r0.tbsk"
expect_exit 0 "sketch rank 1 of 2 alone" "$TBISECT" sketch --rank 1/2 "$T/host1/rank_1" -o "$T/r1.tbsk"
expect_error 2 "r0.tbsk" "a rank's share is no tensor to compare" "$TBISECT" check --no-history "$T/r0.tbsk" "$T/ref"
check_that "a share: the message says to merge" grep -q "merge the ranks' sketches first" "$TAP_ERR"
expect_error 2 "r1.tbsk" "layoutgen's o_proj and down_proj are partial sums: merge refuses them" \
	"$TBISECT" sketch merge "$T/r0.tbsk" "$T/r1.tbsk" -o "$T/bad-merge.tbsk"
check_that "partial sums: the message says why" grep -q "partial sums of a row-parallel layer" "$TAP_ERR"
check_that "a refused merge writes nothing" test ! -e "$T/bad-merge.tbsk"
for h in 0 1; do
	find "$T/host$h" \( -name '*o_proj*' -o -name '*down_proj*' \) -exec rm {} +
done
expect_exit 0 "sketch rank 0 (no row-parallel taps)" "$TBISECT" sketch --rank 0/2 "$T/host0/rank_0" -o "$T/r0.tbsk"
expect_exit 0 "sketch rank 1 (no row-parallel taps)" "$TBISECT" sketch --rank 1/2 "$T/host1/rank_1" -o "$T/r1.tbsk"
expect_exit 0 "sketch merge" "$TBISECT" sketch merge "$T/r0.tbsk" "$T/r1.tbsk" -o "$T/merged.tbsk"
check_that "merge says what it wrote" grep -q "^tbisect: wrote $T/merged.tbsk: 34 tensors merged from 2 parts" "$TAP_ERR"
mkdir "$T/refnorow"
cp "$T/ref"/*.npy "$T/refnorow/"
find "$T/refnorow" \( -name '*o_proj*' -o -name '*down_proj*' \) -exec rm {} +
expect_exit 0 "the merged sketch against the unsharded tree: match" "$TBISECT" check --json --no-history "$T/merged.tbsk" "$T/refnorow"
json_is "merged: match, every block hash equal" verdict match
# partial sums: declared so, each rank's sketch leaves them out, and a
# sketch of a tree of only their ranks (joined: summed) is merged in too
P='--shard attn.o=partial --shard mlp.down=partial'
mkdir "$T/partials"
cp -r "$T/tp2/rank_0" "$T/tp2/rank_1" "$T/partials/"
find "$T/partials" -type f ! \( -name '*o_proj*' -o -name '*down_proj*' \) -exec rm {} +
cp -r "$T/tp2/rank_0" "$T/host0/rank_0p"
cp -r "$T/tp2/rank_1" "$T/host1/rank_1p"
expect_exit 0 "rank 0 with its partial sums declared" "$TBISECT" sketch $P --rank 0/2 "$T/host0/rank_0p" -o "$T/p0.tbsk"
check_that "the partial sums are left out, and the note says what to do" \
	grep -q "^tbisect: note: left out 6 partial sums ('.*', ...): .*sketch them from a tree of their ranks joined" "$TAP_ERR"
expect_exit 0 "rank 1 with its partial sums declared" "$TBISECT" sketch $P --rank 1/2 "$T/host1/rank_1p" -o "$T/p1.tbsk"
expect_exit 0 "the partial sums' ranks joined, sketched" "$TBISECT" sketch $P "$T/partials" -o "$T/psums.tbsk"
expect_exit 0 "merge the ranks and the partial sums" "$TBISECT" sketch merge "$T/p0.tbsk" "$T/p1.tbsk" "$T/psums.tbsk" -o "$T/pmerged.tbsk"
check_that "merge: every tensor" grep -q "^tbisect: wrote $T/pmerged.tbsk: 40 tensors merged from 3 parts" "$TAP_ERR"
expect_exit 0 "the merged sketch against the unsharded tree: match" "$TBISECT" check --json --no-history "$T/pmerged.tbsk" "$T/ref"
json_is "partial sums merged: match, every block hash equal" verdict match
json_is "partial sums merged: every tensor paired" 'unpaired.ref.#' 0
# a split on another axis than the last (q declared split on its
# positions): a rank's chunks are folded in at the joined indices too
S='attn.q=b s[tp] h'
cp -r "$T/tp2" "$T/tp2norow"
find "$T/tp2norow" \( -name '*o_proj*' -o -name '*down_proj*' \) -exec rm {} +
expect_exit 0 "sketch the joined tree, q split on positions" "$TBISECT" sketch --shard "$S" "$T/tp2norow" -o "$T/joined-s.tbsk"
expect_exit 0 "rank 0 alone, q split on positions" "$TBISECT" sketch --shard "$S" --rank 0/2 "$T/host0/rank_0" -o "$T/r0s.tbsk"
expect_exit 0 "rank 1 alone, q split on positions" "$TBISECT" sketch --shard "$S" --rank 1/2 "$T/host1/rank_1" -o "$T/r1s.tbsk"
expect_exit 0 "merge the ranks split on positions" "$TBISECT" sketch merge "$T/r0s.tbsk" "$T/r1s.tbsk" -o "$T/merged-s.tbsk"
expect_exit 0 "the merged sketch against the joined tree's" "$TBISECT" check --json --no-history "$T/merged-s.tbsk" "$T/joined-s.tbsk"
json_is "split on positions: match, every block hash equal" verdict match
# vLLM's ranks are in the file names (*_cuda_K.pt), its qkv_proj and
# gate_up_proj fused: each host holds its own rank's files, and each
# projection of a fused shard is folded in at its place in the joined tensor
"$MKDEMO" --sub --layers 3 --seq 16 --ref-only "$T/vref" >/dev/null || bail_out "mkdemo failed"
"$top_builddir/tests/layoutgen" vllm "$T/vref" "$T/vllm" 2 12,1,1,1,1 || bail_out "layoutgen vllm failed"
H='--heads 8 --kv-heads 2'
for r in 0 1; do
	(cd "$T/vllm" && find . \( -name "*_cuda_$r.pt" -o -name '*.json' \) -print) | while read -r f; do
		mkdir -p "$T/vhost$r/$(dirname "$f")"
		cp "$T/vllm/$f" "$T/vhost$r/$f"
	done
done
expect_exit 0 "vLLM: sketch the joined tree" "$TBISECT" sketch $H "$T/vllm" -o "$T/vjoined.tbsk"
expect_exit 0 "vLLM: rank 0's files alone" "$TBISECT" sketch $H --rank 0/2 "$T/vhost0" -o "$T/v0.tbsk"
expect_exit 0 "vLLM: rank 1's files alone" "$TBISECT" sketch $H --rank 1/2 "$T/vhost1" -o "$T/v1.tbsk"
expect_exit 0 "vLLM: merge the ranks" "$TBISECT" sketch merge "$T/v0.tbsk" "$T/v1.tbsk" -o "$T/vmerged.tbsk"
expect_exit 0 "vLLM: the merged sketch against the joined tree's" "$TBISECT" check --json --no-history "$T/vmerged.tbsk" "$T/vjoined.tbsk"
json_is "fused projections: match, every block hash equal" verdict match
check_that "fused projections: the qkv cells are there" grep -q '"tap":[[:space:]]*"attn.qkv"' "$TAP_OUT"
# q, k and v cut at the wrong widths land at the wrong places
"$TBISECT" sketch --heads 4 --kv-heads 2 --rank 0/2 "$T/vhost0" -o "$T/w0.tbsk" 2>/dev/null || bail_out "sketch failed"
"$TBISECT" sketch --heads 4 --kv-heads 2 --rank 1/2 "$T/vhost1" -o "$T/w1.tbsk" 2>/dev/null || bail_out "sketch failed"
"$TBISECT" sketch merge "$T/w0.tbsk" "$T/w1.tbsk" -o "$T/wmerged.tbsk" 2>/dev/null || bail_out "merge failed"
expect_exit 1 "vLLM: other head counts on the ranks than on the joined tree" "$TBISECT" check --json --no-history "$T/wmerged.tbsk" "$T/vjoined.tbsk"
json_is "wrong widths: a qkv cell diverges first" first_divergence.tap attn.qkv
expect_error_msg 2 "qkv_proj" "needs --heads and --kv-heads" "vLLM: a rank's fused qkv without the head counts" \
	"$TBISECT" sketch --rank 0/2 "$T/vhost0" -o "$T/v-noheads.tbsk"
expect_error_msg 2 "cuda_1" "in a tree given as rank 0's alone" "vLLM: --rank on a tree holding every rank" \
	"$TBISECT" sketch $H --rank 0/2 "$T/vllm" -o "$T/v-all.tbsk"
check_that "a refused rank sketch writes nothing" test ! -e "$T/v-all.tbsk"
expect_error 2 "r0.tbsk" "merge: rank 0 twice" "$TBISECT" sketch merge "$T/r0.tbsk" "$T/r0.tbsk" -o "$T/twice.tbsk"
expect_exit 2 "merge of one part: a usage error" "$TBISECT" sketch merge "$T/r0.tbsk" -o "$T/one.tbsk"
expect_exit 2 "--rank 2/2: a usage error" "$TBISECT" sketch --rank 2/2 "$T/host0/rank_0" -o "$T/x.tbsk"

expect_exit 1 "the text report of a sketch" "$TBISECT" check --no-history "$T/ref.tbsk" "$T/rope-style"
check_that "text: the estimate and its bound" grep -q '^  rel_l2 ~[0-9.e+-]* in \[[0-9.e+-]*, [0-9.e+-]*\]  cosine ~' "$TAP_OUT"
check_that "text: the reason says estimated" grep -q '(estimated from a sketch, within \[' "$TAP_OUT"
check_that "text: a warning names what needs the values" grep -q '^warning (sketch): a sketch took part' "$TAP_OUT"
expect_exit 1 "JSON of a sketch" "$TBISECT" check --json --no-history "$T/ref.tbsk" "$T/rope-style"
json_is "JSON: max_abs unknown" cells.3.max_abs null
json_is "JSON: allclose unknown" cells.3.allclose_frac null

# bad sketches: one line naming the file, exit 2
expect_exit 0 "another seed" "$TBISECT" sketch --seed 7 "$T/rope-style" -o "$T/seed7.tbsk"
expect_error 2 "seed7.tbsk" "sketches of other seeds" "$TBISECT" check --no-history "$T/ref.tbsk" "$T/seed7.tbsk"
check_that "other seeds: the message says so" grep -q "sketched with seeds 1 and 7" "$TAP_ERR"
head -c 3000 "$T/ref.tbsk" >"$T/trunc.tbsk"
expect_error 2 "trunc.tbsk" "a truncated sketch" "$TBISECT" check --no-history "$T/trunc.tbsk" "$T/rope-style"
cp "$T/ref.tbsk" "$T/bad.tbsk"
poke "$T/bad.tbsk" 5000 7
expect_error 2 "bad.tbsk" "a corrupted sketch" "$TBISECT" ls "$T/bad.tbsk"
check_that "corrupted: the checksum says so" grep -q "checksum does not match" "$TAP_ERR"
cp "$T/ref.tbsk" "$T/v5.tbsk"
poke "$T/v5.tbsk" 8 '\005'
expect_error 2 "v5.tbsk" "a newer version" "$TBISECT" check --no-history "$T/v5.tbsk" "$T/rope-style"
check_that "newer version: the message names the versions" grep -q "sketch version 5; this tbisect reads version 4 (a newer tbisect wrote it)" "$TAP_ERR"
cp "$T/ref.tbsk" "$T/v3.tbsk"
poke "$T/v3.tbsk" 8 '\003'
expect_error 2 "v3.tbsk" "an older version" "$TBISECT" check --no-history "$T/v3.tbsk" "$T/rope-style"
check_that "older version: the message says to sketch again" grep -q "sketch version 3; this tbisect reads version 4 (sketch the tree again)" "$TAP_ERR"
expect_error 2 "ref.tbsk" "a sketch of a sketch" "$TBISECT" sketch "$T/ref.tbsk" -o "$T/again.tbsk"
check_that "nothing left behind" test ! -e "$T/again.tbsk"
expect_exit 2 "sketch without -o: a usage error" "$TBISECT" sketch "$T/ref"
expect_error 2 "ref.tbsk" "calibrate refuses a sketch" "$TBISECT" calibrate "$T/ref.tbsk" "$T/ref" -o "$T/tol.json"
check_that "calibrate: no file written" test ! -e "$T/tol.json"
tap_done
