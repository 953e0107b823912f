#!/bin/sh
# badinput: malformed npy / safetensors / shard-index files and broken trees
# are refused the way tbisect(1) EXIT STATUS says: exit status 2, exactly one line on
# stderr, "tbisect: " and the offending file's path, no crash or sanitizer
# report, and the input left untouched.  Fixtures are made with printf, head,
# tr and dd (no python, no numpy), so the test runs on a bare machine.

set -eu
. "$(dirname "$0")/lib.sh"
tap_setup

B=$TAP_TMP/bad      # the malformed inputs (and nothing else)
W=$TAP_TMP/work     # scratch for building them
GOOD=$TAP_TMP/good
CASES=$W/cases      # one "path<TAB>expected path<TAB>reason<TAB>description" per input
mkdir "$B" "$W" || bail_out "cannot make directories under $TAP_TMP"
: >"$CASES"

[ -x "$TBISECT" ] || bail_out "no tbisect at $TBISECT"
[ -x "$TBGEN" ] || bail_out "no tbgen at $TBGEN"
"$TBGEN" --layers 1 "$GOOD" "$TAP_TMP/good2" >"$W/tbgen.out" 2>&1 || bail_out "tbgen failed"

# npy FILE HEADER [NDATA [MAJOR]]: an npy file, header padded to 64 bytes, NDATA zero data bytes.
npy() {
	printf '%s' "$2" >"$W/h"
	_len=$(wc -c <"$W/h")
	_maj=${4:-1}
	if [ "$_maj" -eq 1 ]; then _pre=10; else _pre=12; fi
	_hl=$(((_pre + _len + 1 + 63) / 64 * 64 - _pre))
	{
		printf '\223NUMPY'
		byte "$_maj"
		byte 0
		le $((_pre - 8)) "$_hl"
		cat "$W/h"
		head -c $((_hl - _len - 1)) /dev/zero | tr '\000' ' '
		printf '\n'
		head -c "${3:-0}" /dev/zero
	} >"$1"
}

# st_file FILE HEADERFILE NDATA [HLEN]: a safetensors file; HLEN defaults to the header's size.
st_file() {
	_len=$(wc -c <"$2")
	{
		le 8 "${4:-$_len}"
		cat "$2"
		head -c "$3" /dev/zero
	} >"$1"
}

# st FILE HEADER NDATA [HLEN]: st_file with the header given as text.
st() {
	printf '%s' "$2" >"$W/h"
	st_file "$1" "$W/h" "$3" ${4:+"$4"}
}

# bad PATH REASON DESC [EXPECTED]: register PATH as an input to refuse; its one error line must
# name EXPECTED (default PATH) and say REASON, so each fixture is shown to fail for its own fault.
bad() {
	printf '%s\t%s\t%s\t%s\n' "$1" "${4:-$1}" "$2" "$3" >>"$CASES"
}

F4="'fortran_order': False"
OKHDR="{'descr': '<f4', $F4, 'shape': (2,), }"

# --- npy ---
npy "$B/magic.npy" "$OKHDR" 8
poke "$B/magic.npy" 5 'X'
bad "$B/magic.npy" "not an npy file (bad magic)" "npy: bad magic"
printf '\223NUMPY\001' >"$B/pre7.npy"
bad "$B/pre7.npy" "npy file truncated in its preamble" "npy: preamble truncated after the version"
printf '\223NUMPY\001\000\166' >"$B/pre9.npy"
bad "$B/pre9.npy" "npy file truncated in its preamble" "npy: preamble truncated in the length field"
printf '\223NUMPY\002\000\166\000' >"$B/pre10v2.npy"
bad "$B/pre10v2.npy" "npy file truncated in its preamble" "npy: v2 preamble truncated in the length field"
: >"$B/empty.npy"
bad "$B/empty.npy" "not an npy file (bad magic)" "npy: empty file"
npy "$B/v4.npy" "$OKHDR" 8
poke "$B/v4.npy" 6 '\004'
bad "$B/v4.npy" "unsupported npy format version 4.0" "npy: unsupported version 4.0"
npy "$B/v11.npy" "$OKHDR" 8
poke "$B/v11.npy" 7 '\001'
bad "$B/v11.npy" "unsupported npy format version 1.1" "npy: unsupported version 1.1"
npy "$B/hlen.npy" "$OKHDR" 8
poke "$B/hlen.npy" 8 '\377\177'
bad "$B/hlen.npy" "npy header length 32767 runs past the end of the file" "npy: header length past EOF"
npy "$B/hbig.npy" "$OKHDR" 8 2
poke "$B/hbig.npy" 8 '\000\000\020\000'
bad "$B/hbig.npy" "npy header of 1048576 bytes exceeds the 65536-byte cap" "npy: header too big (1 MiB)"
npy "$B/hmax.npy" "$OKHDR" 8 3
poke "$B/hmax.npy" 8 '\377\377\377\377'
bad "$B/hmax.npy" "npy header of 4294967295 bytes exceeds" "npy: header length 2^32-1"
npy "$B/nul.npy" "$OKHDR" 8
poke "$B/nul.npy" 20 '\000'
bad "$B/nul.npy" "npy header contains a NUL byte" "npy: NUL in header"
npy "$B/notdict.npy" "['descr', '<f4']" 8
bad "$B/notdict.npy" "npy header is not a dict" "npy: header not a dict"
npy "$B/nokey.npy" "{'descr': '<f4', $F4, }" 8
bad "$B/nokey.npy" "missing key 'shape'" "npy: missing key"
npy "$B/extrakey.npy" "{'descr': '<f4', $F4, 'shape': (2,), 'extra': 0, }" 8
bad "$B/extrakey.npy" "unexpected key 'extra'" "npy: extra key"
npy "$B/dupkey.npy" "{'descr': '<f4', 'descr': '<f4', $F4, 'shape': (2,), }" 8
bad "$B/dupkey.npy" "duplicate key 'descr'" "npy: duplicate key"
npy "$B/negdim.npy" "{'descr': '<f4', $F4, 'shape': (-1, 2), }" 8
bad "$B/negdim.npy" "negative dimension" "npy: negative dim"
npy "$B/hugedim.npy" "{'descr': '<f4', $F4, 'shape': (99999999999999999999,), }" 8
bad "$B/hugedim.npy" "dimension too large" "npy: dim beyond int64"
npy "$B/numel.npy" "{'descr': '<f4', $F4, 'shape': (4294967296, 4294967296), }" 8
bad "$B/numel.npy" "element count overflows" "npy: element count overflow"
npy "$B/nbytes.npy" "{'descr': '<f8', $F4, 'shape': (1152921504606846976,), }" 8
bad "$B/nbytes.npy" "byte size overflows" "npy: byte size overflow"
npy "$B/rank.npy" "{'descr': '<f4', $F4, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1), }" 8
bad "$B/rank.npy" "more than 16 dimensions" "npy: 17 dimensions"
npy "$B/fortran.npy" "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }" 8
bad "$B/fortran.npy" "'fortran_order' must be True or False" "npy: fortran_order not a bool"
npy "$B/object.npy" "{'descr': '|O', $F4, 'shape': (2,), }" 16
bad "$B/object.npy" "object array (pickled data) refused" "npy: object dtype |O"
npy "$B/complex.npy" "{'descr': '<c8', $F4, 'shape': (2,), }" 16
bad "$B/complex.npy" "complex dtype '<c8' is not supported" "npy: complex dtype"
npy "$B/descr.npy" "{'descr': '<x4', $F4, 'shape': (2,), }" 8
bad "$B/descr.npy" "unknown npy dtype '<x4'" "npy: unknown descr"
npy "$B/struct.npy" "{'descr': [('x', '<f4')], $F4, 'shape': (2,), }" 8
bad "$B/struct.npy" "structured or subarray dtypes are not supported" "npy: structured dtype"
npy "$B/void2.npy" "{'descr': '|V2', $F4, 'shape': (4,), }" 8
bad "$B/void2.npy" "pass --npy-void2 bf16" "npy: |V2 without --npy-void2"
npy "$B/void1.npy" "{'descr': '<V1', $F4, 'shape': (4,), }" 4
bad "$B/void1.npy" "pass --npy-void1" "npy: <V1 without --npy-void1"
npy "$B/short.npy" "{'descr': '<f4', $F4, 'shape': (16,), }" 8
bad "$B/short.npy" "npy data truncated: 64 bytes expected, 8 present" "npy: data truncated"
npy "$B/trailing.npy" "{'descr': '<f4', $F4, 'shape': (2,), } junk" 8
bad "$B/trailing.npy" "trailing bytes after the dict" "npy: bytes after the header dict"

# --- safetensors ---
T1='"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'
printf '\002\000\000' >"$B/tiny.safetensors"
bad "$B/tiny.safetensors" "file shorter than its 8-byte header length" "safetensors: file shorter than 8 bytes"
st "$B/hlen.safetensors" "{$T1}" 8 1000
bad "$B/hlen.safetensors" "header length 1000 runs past the end of the file" "safetensors: header length past EOF"
st "$B/hbig.safetensors" "{$T1}" 8 100000001
bad "$B/hbig.safetensors" "header length 100000001 exceeds the 100 MB cap" "safetensors: header length over 100 MB"
{ printf '\370\377\377\377\377\377\377\377'; printf '%s' "{$T1}"; head -c 8 /dev/zero; } >"$B/hwrap.safetensors"
bad "$B/hwrap.safetensors" "exceeds the 100 MB cap" "safetensors: header length near 2^64"
st "$B/json.safetensors" "{$T1" 8
bad "$B/json.safetensors" "header is not valid JSON" "safetensors: invalid JSON"
st "$B/array.safetensors" "[1,2]" 8
bad "$B/array.safetensors" "header is not a JSON object" "safetensors: header not an object"
printf '{"a\377":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' >"$W/h"
st_file "$B/utf8.safetensors" "$W/h" 8
bad "$B/utf8.safetensors" "header is not valid UTF-8" "safetensors: invalid UTF-8"
printf '{%s}\000\000\000\000' "$T1" >"$W/h"
st_file "$B/nulpad.safetensors" "$W/h" 8
bad "$B/nulpad.safetensors" "header contains a NUL byte" "safetensors: NUL padding after the header"
st "$B/dup.safetensors" "{$T1,\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}" 16
bad "$B/dup.safetensors" "duplicate tensor name 'a'" "safetensors: duplicate key"
st "$B/dtype.safetensors" '{"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}}' 8
bad "$B/dtype.safetensors" "unknown dtype 'F12'" "safetensors: unknown dtype"
st "$B/f4.safetensors" '{"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}' 1
bad "$B/f4.safetensors" "dtype F4 is not supported" "safetensors: unsupported dtype F4"
st "$B/nodtype.safetensors" '{"a":{"shape":[2],"data_offsets":[0,8]}}' 8
bad "$B/nodtype.safetensors" "has no dtype string" "safetensors: dtype missing"
st "$B/shape.safetensors" '{"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}}' 8
bad "$B/shape.safetensors" "has no shape array" "safetensors: shape not an array"
st "$B/shapeneg.safetensors" '{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}' 8
bad "$B/shapeneg.safetensors" "shape entries must be non-negative integers" "safetensors: negative dim"
st "$B/shapefrac.safetensors" '{"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}' 8
bad "$B/shapefrac.safetensors" "number 2.5 at header byte 29 is not an integer" "safetensors: non-integer dim"
st "$B/shapefloat.safetensors" '{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}' 8
bad "$B/shapefloat.safetensors" "number 2.0 at header byte 29 is not an integer" "safetensors: integral dim written as a float"
st "$B/numel.safetensors" '{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}' 8
bad "$B/numel.safetensors" "element count overflows" "safetensors: element count overflow"
st "$B/offs1.safetensors" '{"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}}' 8
bad "$B/offs1.safetensors" "data_offsets must be two non-negative integers" "safetensors: data_offsets of length 1"
st "$B/offs3.safetensors" '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}}' 8
bad "$B/offs3.safetensors" "data_offsets must be two non-negative integers" "safetensors: data_offsets of length 3"
st "$B/reversed.safetensors" '{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}' 8
bad "$B/reversed.safetensors" "data_offsets end before they begin" "safetensors: data_offsets reversed"
st "$B/overlap.safetensors" "{$T1,\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}" 12
bad "$B/overlap.safetensors" "tensor 'b' overlaps the previous tensor" "safetensors: overlapping tensors"
st "$B/gap.safetensors" "{$T1,\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}" 20
bad "$B/gap.safetensors" "tensor 'b' leaves a gap before it" "safetensors: gap between tensors"
st "$B/trailing.safetensors" "{$T1}" 12
bad "$B/trailing.safetensors" "tensors cover 8 data bytes but the file holds 12" "safetensors: trailing bytes after the tensors"
st "$B/short.safetensors" "{$T1}" 4
bad "$B/short.safetensors" "tensors cover 8 data bytes but the file holds 4" "safetensors: data truncated"
st "$B/mismatch.safetensors" '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}' 8
bad "$B/mismatch.safetensors" "data_offsets span 8 bytes, shape and dtype need 12" "safetensors: offsets do not match shape*dtype"
st "$B/meta.safetensors" "{\"__metadata__\":{\"format\":1},$T1}" 8
bad "$B/meta.safetensors" "__metadata__ value 'format' is not a string" "safetensors: __metadata__ with a non-string value"
st "$B/entry.safetensors" '{"a":[0,8]}' 8
bad "$B/entry.safetensors" "entry 'a' is not an object" "safetensors: tensor entry not an object"
st "$B/garbage.safetensors" "{$T1}x" 8
bad "$B/garbage.safetensors" "trailing bytes after the JSON value" "safetensors: bytes after the JSON value"

# --- shard indexes (each beside one good shard holding "a") ---
# index NAME JSON: $B/NAME/model.safetensors.index.json beside shard-1.safetensors.
index() {
	mkdir "$B/$1"
	st "$B/$1/shard-1.safetensors" "{$T1}" 8
	printf '%s\n' "$2" >"$B/$1/model.safetensors.index.json"
}
st "$B/x.safetensors" "{$T1}" 8
index idx_nomap '{"metadata":{"total_size":8}}'
bad "$B/idx_nomap/model.safetensors.index.json" "no \"weight_map\" object" "index: weight_map missing"
index idx_mapnotobj '{"weight_map":["shard-1.safetensors"]}'
bad "$B/idx_mapnotobj/model.safetensors.index.json" "no \"weight_map\" object" "index: weight_map not an object"
index idx_json '{"weight_map":{"a":"shard-1.safetensors"}'
bad "$B/idx_json/model.safetensors.index.json" "shard index is not valid JSON" "index: invalid JSON"
index idx_dotdot '{"weight_map":{"a":"../x.safetensors"}}'
bad "$B/idx_dotdot/model.safetensors.index.json" "not a plain file name beside the index" "index: shard path ../x.safetensors"
index idx_slash '{"weight_map":{"a":"idx_slash/shard-1.safetensors"}}'
bad "$B/idx_slash/model.safetensors.index.json" "not a plain file name beside the index" "index: shard path with a '/'"
index idx_abs "{\"weight_map\":{\"a\":\"$B/x.safetensors\"}}"
bad "$B/idx_abs/model.safetensors.index.json" "not a plain file name beside the index" "index: absolute shard path"
index idx_absent '{"weight_map":{"a":"shard-2.safetensors"}}'
bad "$B/idx_absent/model.safetensors.index.json" "cannot open" "index: shard file absent"
index idx_ghost '{"weight_map":{"a":"shard-1.safetensors","ghost":"shard-1.safetensors"}}'
bad "$B/idx_ghost/model.safetensors.index.json" "lists tensor 'ghost' but shard shard-1.safetensors does not hold it" "index: tensor absent from its shard"
index idx_unlisted '{"weight_map":{"a":"shard-1.safetensors"}}'
st "$B/idx_unlisted/shard-1.safetensors" "{$T1,\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}" 16
bad "$B/idx_unlisted/model.safetensors.index.json" "tensor 'b' is not listed in the shard index" "index: shard tensor not listed" \
	"$B/idx_unlisted/shard-1.safetensors"
index idx_dup '{"weight_map":{"a":"shard-1.safetensors","a":"shard-1.safetensors"}}'
bad "$B/idx_dup/model.safetensors.index.json" "lists tensor 'a' twice" "index: tensor listed twice"

# --- whole trees: the error names the file inside ---
mkdir -p "$B/tree_badfile/sub" "$B/tree_out" "$B/tree_broken" "$B/tree_loop" "$B/tree_dup" "$B/tree_empty/a/b"
npy "$B/tree_badfile/good.npy" "$OKHDR" 8
npy "$B/tree_badfile/sub/bad.npy" "$OKHDR" 4
bad "$B/tree_badfile" "npy data truncated" "tree: truncated npy in a subdirectory" "$B/tree_badfile/sub/bad.npy"
npy "$B/outside.npy" "$OKHDR" 8
npy "$B/tree_out/good.npy" "$OKHDR" 8
ln -s ../outside.npy "$B/tree_out/link.npy"
bad "$B/tree_out" "symbolic link leaves the tree" "tree: symlink leaving the tree" "$B/tree_out/link.npy"
npy "$B/tree_broken/good.npy" "$OKHDR" 8
ln -s nowhere.npy "$B/tree_broken/gone.npy"
bad "$B/tree_broken" "broken symbolic link" "tree: broken symlink" "$B/tree_broken/gone.npy"
npy "$B/tree_loop/good.npy" "$OKHDR" 8
ln -s . "$B/tree_loop/again"
bad "$B/tree_loop" "symbolic link loop" "tree: symlink loop" "$B/tree_loop/again"
st "$B/tree_dup/a.safetensors" "{$T1}" 8
st "$B/tree_dup/b.safetensors" "{$T1}" 8
bad "$B/tree_dup" "duplicate tensor name 'a'" "tree: duplicate tensor name across containers" "$B/tree_dup/b.safetensors"
bad "$B/tree_empty" "no tensors found" "tree: no tensors at all"
cp -R "$B/idx_dotdot" "$B/tree_index"
bad "$B/tree_index" "not a plain file name beside the index" "tree: index with a traversing shard path" "$B/tree_index/model.safetensors.index.json"

# --- the runs ---
snapshot "$B" >"$W/before"

expect_exit 0 "control: ls of the good tree" "$TBISECT" ls "$GOOD"
expect_exit 0 "control: check of the good pair" "$TBISECT" check "$GOOD" "$TAP_TMP/good2"
expect_exit 0 "control: |V2 is read with --npy-void2 bf16" "$TBISECT" ls --npy-void2 bf16 "$B/void2.npy"
expect_exit 0 "control: <V1 is read with --npy-void1 f8_e4m3fn" "$TBISECT" ls --npy-void1 f8_e4m3fn "$B/void1.npy"

refuse_cases "$CASES" "$GOOD"

snapshot "$B" >"$W/after"
if cmp -s "$W/before" "$W/after"; then
	ok "no bad input was modified, added or removed"
else
	not_ok "no bad input was modified, added or removed"
	diff "$W/before" "$W/after" | sed 's/^/#   /'
fi
n_cases=$(awk 'END { print NR }' "$CASES")
check_that "at least 30 malformed inputs ($n_cases)" [ "$n_cases" -ge 30 ]

tap_done
