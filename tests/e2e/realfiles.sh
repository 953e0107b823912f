#!/bin/sh
# realfiles: what real files from public repositories tripped (issue 20,
# "Readers, on real files"), through the command line: a safetensors header
# with "__metadata__": null loads; an npz of numbers beside strings, objects
# and long doubles loads its numbers and notes the rest on stderr; Git LFS
# pointers, float shapes, TorchScript and legacy torch files get one line
# naming the file and what it is; FIFOs and sockets are noted, never
# opened; a directory of a lone GGUF says so; a tree holding NaN compared
# with itself matches (logits too); [] pairs with [1].  Fixtures: printf, tests/fmtgen,
# and python3 with numpy where it is installed.

set -eu
. "$(dirname "$0")/lib.sh"
tap_setup
T=$TAP_TMP
FMTGEN=$top_builddir/tests/fmtgen
[ -x "$TBISECT" ] || bail_out "no tbisect at $TBISECT"

# st FILE HEADER NBYTES: a safetensors file with that JSON header and NBYTES zero bytes of data.
st() {
	{
		le 8 "${#2}"
		printf '%s' "$2"
		head -c "$3" /dev/zero
	} >"$1"
}

# --- safetensors ---
mkdir "$T/meta"
st "$T/meta/adapters.safetensors" '{"__metadata__":null,"embed":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' 8
expect_exit 0 'safetensors: "__metadata__": null loads' "$TBISECT" ls "$T/meta/adapters.safetensors"
check_that "... and its tensor is listed" grep -q '^embed ' "$TAP_OUT"
st "$T/float.safetensors" '{"embed":{"dtype":"F32","shape":[5.0],"data_offsets":[0,20]}}' 20
expect_error_msg 2 "$T/float.safetensors" "number 5.0 at header byte 33 is not an integer" \
	"safetensors: shape [5.0] is refused" "$TBISECT" ls "$T/float.safetensors"

# --- Git LFS pointers ---
for ext in npy safetensors pt npz bin; do
	mkdir "$T/lfs-$ext"
	printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 4096\n' \
		4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393 >"$T/lfs-$ext/model.$ext"
	expect_error_msg 2 "$T/lfs-$ext/model.$ext: is a Git LFS pointer, not the data (run git lfs pull)" "" \
		"an LFS pointer named .$ext, in a tree" "$TBISECT" check "$T/lfs-$ext" "$T/meta"
	expect_error_msg 2 "$T/lfs-$ext/model.$ext: is a Git LFS pointer, not the data (run git lfs pull)" "" \
		"an LFS pointer named .$ext, given itself" "$TBISECT" ls "$T/lfs-$ext/model.$ext"
done

# A shard behind a shard index is read by the index, not the walk: named too.
mkdir "$T/lfs-shards"
cp "$T/lfs-npy/model.npy" "$T/lfs-shards/model-00001-of-00001.safetensors"
printf '{"weight_map":{"embed":"model-00001-of-00001.safetensors"}}' >"$T/lfs-shards/model.safetensors.index.json"
expect_error_msg 2 "$T/lfs-shards/model-00001-of-00001.safetensors" \
	"is a Git LFS pointer, not the data (run git lfs pull)" \
	"an LFS pointer as the shard of an index" "$TBISECT" check "$T/lfs-shards" "$T/meta"

# --- torch files tbisect does not read, named ---
printf 'x' >"$T/one"
mkdir "$T/jit"
"$FMTGEN" zip "$T/jit/model.pt" model/data.pkl="$T/one" model/code/__torch__.py="$T/one" \
	model/constants.pkl="$T/one" || bail_out "fmtgen zip failed"
expect_error_msg 2 "$T/jit/model.pt" "a TorchScript archive (torch.jit.save), not torch.save" \
	"a TorchScript archive is named" "$TBISECT" check "$T/jit" "$T/meta"
mkdir "$T/legacy"
printf '\200\002\212\012\154\374\234\106\371\040\152\250\120\031.' >"$T/legacy/pytorch_model.bin"
expect_error_msg 2 "$T/legacy/pytorch_model.bin" "a legacy (pre-1.6) torch.save file: re-save with torch>=1.6" \
	"a legacy torch.save file is named" "$TBISECT" check "$T/legacy" "$T/meta"

# --- a directory of unsupported files ---
mkdir "$T/gguf"
printf 'GGUF\003\000\000\000' >"$T/gguf/model.gguf"
expect_error_msg 2 "$T/gguf" "no tensors found; skipped $T/gguf/model.gguf: a GGUF file" \
	"a lone GGUF: the skip note stays in the error line" "$TBISECT" check "$T/gguf" "$T/meta"
# llama.cpp's models before GGUF: a little-endian magic ('ggjt' is "tjgg"
# on disk), then the version; named .bin, which raw logits (--vocab) take.
mkdir "$T/ggml"
for m in lmgg:ggml fmgg:ggmf tjgg:ggjt; do
	printf '%s\001\000\000\000%064d' "${m%:*}" 0 >"$T/ggml/ggml-model-${m#*:}.bin"
	expect_error_msg 2 "$T/ggml/ggml-model-${m#*:}.bin" "a pre-GGUF GGML model file (magic '${m#*:}'), not a dump" \
		"a ${m#*:} model is named, not sent to --vocab" "$TBISECT" ls --vocab 4 "$T/ggml/ggml-model-${m#*:}.bin"
done
expect_error_msg 2 "$T/ggml" "skipped $T/ggml/ggml-model-ggjt.bin: a pre-GGUF GGML model file (magic 'ggjt')" \
	"a tree of GGML models: each skipped, named" "$TBISECT" ls "$T/ggml"

# --- special files: noted on stderr, never opened ---
mkdir "$T/special"
cp "$T/meta/adapters.safetensors" "$T/special/"
if mkfifo "$T/special/pipe.npy" 2>/dev/null; then
	# timeout: a guard against hanging on the FIFO, not a measure of speed
	expect_exit 0 "check: a FIFO in the tree is skipped, not opened" \
		timeout "$TAP_WAIT" "$TBISECT" check "$T/special" "$T/meta"
	check_that "... and noted on stderr" grep -q "^tbisect: note: skipped $T/special/pipe.npy: not a regular file (a FIFO)" \
		"$TAP_ERR"
else
	skip "check: a FIFO in the tree is skipped, not opened" "mkfifo unavailable"
	skip "... and noted on stderr" "mkfifo unavailable"
fi

# --- numpy-made files ---
if PY=$(find_python numpy); then
	"$PY" - "$T" <<'EOF' || bail_out "python fixtures failed"
import sys
import numpy as np
t = sys.argv[1]
import os
import json, pickle
for d in ("npz", "strs", "nan", "s0", "s1", "extras", "pkl-a", "pkl-b"):
    os.makedirs(os.path.join(t, d))
np.savez(t + "/npz/run.npz", embed=np.arange(8, dtype=np.float32).reshape(2, 4),
         names=np.array(["a", "bc"]), objs=np.array([1, "x"], dtype=object),
         ld=np.ones(2, dtype=np.longdouble))
np.savez(t + "/strs/labels.npz", names=np.array(["a", "bc"]), b=np.array([b"xy"]))
x = np.random.RandomState(0).randn(2, 4, 8).astype(np.float32)
x[0, 1, 2] = np.nan
x[1, 3, 0] = np.inf
for l in range(2):
    np.save(t + "/nan/layers.%d.attn.npy" % l, x * (l + 1))
    np.save(t + "/nan/layers.%d.mlp.npy" % l, (x * (l + 1)).astype(np.float16))
lg = np.random.RandomState(1).randn(4, 16).astype(np.float32)
lg[1, 3] = np.nan
np.save(t + "/nan/logits.npy", lg)
np.save(t + "/s0/logits.npy", np.array(3.0, dtype=np.float32))
np.save(t + "/s1/logits.npy", np.array([3.0], dtype=np.float32))
np.save(t + "/s0/embed.npy", np.array(2.0, dtype=np.float32))
np.save(t + "/s1/embed.npy", np.array([[2.0]], dtype=np.float32))
# What other programs leave in a dump folder: labels, pickled objects and
# configs, a JSON-lines log; beside them numpy's own pickles of arrays.
np.save(t + "/extras/logits.npy", lg)
np.save(t + "/extras/labels.npy", np.array(["cat", "dog"]))
np.save(t + "/extras/objs.npy", np.array([1, "x"], dtype=object), allow_pickle=True)
with open(t + "/extras/config.pkl", "wb") as f:
    pickle.dump({"layers": 2, "names": ["a"]}, f)
with open(t + "/extras/objarr.pkl", "wb") as f:
    pickle.dump(np.array([1, "x"], dtype=object), f)
with open(t + "/extras/train.jsonl", "w") as f:
    f.write(json.dumps({"step": 1, "loss": 0.5}) + "\n")
with open(t + "/pkl-b/embed.pkl", "wb") as f:
    pickle.dump(np.asfortranarray(x[0]), f, protocol=5)
np.save(t + "/pkl-a/embed.npy", x[0])
x[0].dump(t + "/pkl-b/layers.0.mlp.pkl")
np.save(t + "/pkl-a/layers.0.mlp.npy", x[0] * 2)
EOF
	expect_exit 0 "npz with strings, objects, long double: its numbers load" "$TBISECT" check "$T/npz" "$T/npz"
	check_that "... the string member is noted on stderr" \
		grep -q "^tbisect: note: $T/npz/run.npz: skipped member 'names.npy': npy dtype '<U2' is not a numeric tensor type" "$TAP_ERR"
	check_that "... the object member too" grep -q "skipped member 'objs.npy': object array" "$TAP_ERR"
	check_that "... the long double member too" grep -q "skipped member 'ld.npy': long double npy dtype" "$TAP_ERR"
	expect_error_msg 2 "$T/strs/labels.npz" "npz holds no numeric array (2 members skipped" \
		"an npz of strings only is refused, naming it" "$TBISECT" ls "$T/strs/labels.npz"
	expect_error_msg 2 "$T/strs" "no tensors found; $T/strs/labels.npz: skipped member 'names.npy'" \
		"a tree of it alone: no tensors, the npz named" "$TBISECT" ls "$T/strs"
	expect_exit 0 "strings, objects, a config pickle, a log beside the dumps: skipped" \
		"$TBISECT" check "$T/extras" "$T/extras"
	for f in labels.npy objs.npy config.pkl objarr.pkl train.jsonl; do
		check_that "... $f noted" grep -q "^tbisect: note: skipped $T/extras/$f: " "$TAP_ERR"
	done
	for f in config.pkl train.jsonl labels.npy objs.npy; do
		expect_error 2 "$T/extras/$f" "$f given alone is refused" "$TBISECT" ls "$T/extras/$f"
	done
	check_that "... an object array is named so" grep -q "objs.npy: object array" "$TAP_ERR"
	expect_exit 0 "numpy's pickles of arrays (pickle.dump, ndarray.dump) are read" "$TBISECT" ls "$T/pkl-b"
	check_that "... as the tensor the file names" grep -q "^embed  *embed  *f32  *\\[4, 8\\]  *.*/embed.pkl$" "$TAP_OUT"
	expect_exit 1 "... and their values are the arrays' (a Fortran-order one too)" \
		"$TBISECT" check --json "$T/pkl-a" "$T/pkl-b"
	json_is "... embed matches" cells.0.status match
	json_is "... mlp, doubled, diverges" cells.1.status diverged
	expect_exit 0 "a tree holding NaN and Inf, compared with itself" "$TBISECT" check --json "$T/nan" "$T/nan"
	json_is "... matches" verdict match
	json_is "... and names no cause" 'causes.#' 0
	expect_exit 0 "[] against [1] and [1, 1]" "$TBISECT" check --json "$T/s0" "$T/s1"
	json_is "... matches" verdict match
else
	for d in "npz: numbers load" "npz: string noted" "npz: object noted" "npz: long double noted" \
		"npz of strings refused" "npz of strings alone in a tree" "extras skipped" "labels noted" "objs noted" \
		"config noted" "objarr noted" "log noted" "labels alone" "objs alone" "config alone" "log alone" \
		"object array named" "numpy pickles read" "numpy pickle named" "numpy pickle values" "embed matches" \
		"mlp diverges" "NaN tree vs itself" "NaN: match" "NaN: no cause" "[] vs [1]" "[]: match"; do
		skip "$d" "no python3 with numpy"
	done
fi

tap_done
