#!/bin/sh
# formats: the container formats end to end: a dump pair from tests/tbgen
# (npy or safetensors) with the candidate re-written by tests/fmtgen as a
# torch.save dict, an npz (stored, deflated, zip64), a MaxText golden file
# (JSON lines, pickle protocols 2/4/5), then `tbisect check` finds the same
# first divergence and `tbisect ls` lists every tensor.  Also: 10,000 small
# files load, and a FIFO in the tree is skipped without blocking.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
FMTGEN=$top_builddir/tests/fmtgen
T=$TAP_TMP

"$TBGEN" --layers 3 --bug noise@L1.mlp "$T/npy/ref" "$T/npy/cand" >/dev/null || bail_out "tbgen failed"
"$TBGEN" --layers 3 --bug noise@L1.mlp --ref-format safetensors "$T/st/ref" "$T/st/cand" >/dev/null ||
	bail_out "tbgen failed"

# first_div DESC WANT REF CAND: check --json exits 1 with the first divergence at WANT.
first_div() {
	expect_exit 1 "$1: exit 1" "$TBISECT" check --json "$3" "$4"
	_l=$(json_get first_divergence.layer)
	_t=$(json_get first_divergence.tap)
	if [ "$_l" = null ]; then _got=$_t; else _got=L$_l.$_t; fi
	if [ "$_got" = "$2" ]; then ok "$1: first divergence $2"; else not_ok "$1: first divergence" "got $_got, expected $2"; fi
}


for f in pt pt-ordered pt-v3 npz npz-deflate npz-zip64; do
	case $f in pt*) ext=pt ;; *) ext=npz ;; esac
	"$FMTGEN" convert "$f" "$T/npy/cand" "$T/cand-$f.$ext" || bail_out "fmtgen convert $f failed"
done
first_div ".pt dict against npy" L1.mlp "$T/npy/ref" "$T/cand-pt.pt"
json_is ".pt dict against npy: every cell paired" 'unpaired.cand.#' 0
json_is ".pt dict against npy: 18 cells" 'cells.#' 18
json_is ".pt dict against npy: cell 0 matches exactly" cells.0.max_abs 0
first_div "state_dict OrderedDict against npy" L1.mlp "$T/npy/ref" "$T/cand-pt-ordered.pt"
first_div "_rebuild_tensor_v3 against npy" L1.mlp "$T/npy/ref" "$T/cand-pt-v3.pt"
for f in npz npz-deflate npz-zip64; do
	"$FMTGEN" convert "$f" "$T/st/cand" "$T/st-$f.npz" || bail_out "fmtgen convert failed"
	first_div "$f against safetensors" L1.mlp "$T/st/ref" "$T/st-$f.npz"
	json_is "$f against safetensors: every cell paired" 'unpaired.ref.#' 0
done
expect_exit 0 "npz against the .pt of the same tree: match" "$TBISECT" check "$T/cand-npz.npz" "$T/cand-pt.pt"

# golden files hold logits and the block outputs only
for f in golden golden-pkl2 golden-pkl4 golden-pkl5; do
	"$FMTGEN" convert "$f" "$T/npy/cand" "$T/$f.jsonl" || bail_out "fmtgen convert $f failed"
	first_div "$f against npy" L1.block "$T/npy/ref" "$T/$f.jsonl"
	json_is "$f against npy: block and logits cells paired" 'unpaired.cand.#' 0
done
expect_exit 0 "golden JSON lines against its pickle twin: match" "$TBISECT" check "$T/golden.jsonl" "$T/golden-pkl5.jsonl"
cp "$T/golden-pkl4.jsonl" "$T/golden-as.pkl"
expect_exit 0 "a golden pickle named .pkl" "$TBISECT" check "$T/golden.jsonl" "$T/golden-as.pkl"
expect_error_msg 2 "$T/golden.jsonl" "--record 1 is out of range" "--record past the last prompt" \
	"$TBISECT" ls --record 1 "$T/golden.jsonl"

# ls shows them all, with their cells
expect_exit 0 "ls of the .pt" "$TBISECT" ls "$T/cand-pt.pt"
check_that "ls .pt: model.layers.1.mlp is L1.mlp" grep -q '^model.layers.1.mlp  *L1.mlp ' "$TAP_OUT"
check_that "ls .pt: 18 tensors" grep -q '^18 tensors, 0 unmapped$' "$TAP_OUT"
expect_exit 0 "ls of the npz" "$TBISECT" ls "$T/cand-npz-deflate.npz"
check_that "ls npz: lm_head is logits" grep -q '^lm_head  *logits ' "$TAP_OUT"
expect_exit 0 "ls of the golden file" "$TBISECT" ls "$T/golden-pkl5.jsonl"
check_that "ls golden: layer_hidden_states[2] is L2.block" grep -q '^layer_hidden_states\[2\]  *L2.block ' "$TAP_OUT"
check_that "ls golden: 4 tensors" grep -q '^4 tensors, 0 unmapped$' "$TAP_OUT"
mkdir -p "$T/mixed/a" "$T/mixed/b" "$T/mixed/c"
cp "$T/cand-pt.pt" "$T/mixed/a/"
cp "$T/cand-npz.npz" "$T/mixed/b/"
cp "$T/golden.jsonl" "$T/mixed/c/"
expect_exit 0 "ls --json of a tree of .pt, .npz and .jsonl" "$TBISECT" ls --json "$T/mixed"
json_is "mixed tree: 18 + 18 + 4 tensors" 'tensors.#' 40

# the tree walk: many small files, a FIFO, a raw .bin beside a .pt
"$FMTGEN" many "$T/many" 10000 || bail_out "fmtgen many failed"
start=$(date +%s)
expect_exit 0 "10,000 small npy files load" "$TBISECT" ls "$T/many"
end=$(date +%s)
check_that "10,000 small files: all listed" grep -q '^10000 tensors, 0 unmapped$' "$TAP_OUT"
diag "10,000 small files listed in $((end - start)) s"
mkdir "$T/fifo"
cp "$T/cand-pt.pt" "$T/fifo/"
head -c 100 /dev/urandom >"$T/fifo/raw.bin"
printf 'notes\n' >"$T/notes.txt"
"$FMTGEN" zip "$T/fifo/logs.zip" docs/notes.txt="$T/notes.txt" || bail_out "fmtgen zip failed"
if mkfifo "$T/fifo/pipe.npy" 2>/dev/null; then
	# timeout: a guard against hanging on the FIFO for ever, not a measure of speed
	expect_exit 0 "a FIFO in the tree is skipped, not opened" timeout "$TAP_WAIT" "$TBISECT" ls "$T/fifo"
	check_that "the FIFO is named in a note" grep -q 'pipe.npy: not a regular file' "$TAP_OUT"
else
	skip "a FIFO in the tree is skipped, not opened" "mkfifo unavailable"
	skip "the FIFO is named in a note" "mkfifo unavailable"
fi
check_that "a raw .bin beside a .pt is skipped, saying what reads it" grep -q 'raw.bin: --vocab N reads raw float32 logits' "$TAP_OUT"
check_that "a zip of other things is skipped" grep -q 'logs.zip: not a tensor file' "$TAP_OUT"

tap_done
