#!/bin/sh
# badformats: malformed and hostile zip, npz, torch.save, pickle and MaxText
# golden files are refused the way tbisect(1) EXIT STATUS says: exit 2, one line
# "tbisect: FILE: ..." that says what is wrong, no crash, no sanitizer
# report, nothing in the tree changed, and no command run: pickles whose
# payload would `touch` a marker file must leave no marker.  Fixtures come
# from tests/fmtgen (valid archives, then patched with dd) and printf.

set -eu
. "$(dirname "$0")/lib.sh"
tap_setup

B=$TAP_TMP/bad
W=$TAP_TMP/work
GOOD=$TAP_TMP/good
CASES=$W/cases
MARK=$TAP_TMP/pwned
FMTGEN=$top_builddir/tests/fmtgen
mkdir "$B" "$W" || bail_out "cannot make directories under $TAP_TMP"
: >"$CASES"
[ -x "$TBISECT" ] || bail_out "no tbisect at $TBISECT"
[ -x "$FMTGEN" ] || bail_out "no fmtgen at $FMTGEN"
"$TBGEN" --layers 1 "$GOOD" "$TAP_TMP/good2" >"$W/tbgen.out" 2>&1 || bail_out "tbgen failed"

# bad PATH REASON DESC [EXPECTED]: as in badinput.sh.
bad() {
	printf '%s\t%s\t%s\t%s\n' "$1" "${4:-$1}" "$2" "$3" >>"$CASES"
}

# cd_at FILE: offset of the first central-directory entry (from the end record).
cd_at() {
	_s=$(wc -c <"$1")
	peek "$1" $((_s - 22 + 16)) 4
}

# a valid npy member and a valid npz/pt to patch
"$FMTGEN" convert npz "$GOOD" "$W/good.npz" || bail_out "fmtgen convert npz failed"
npy_one=$(find "$GOOD" -name '*.npy' | sort | head -n 1)
cp "$npy_one" "$W/x.npy"
printf 'this is not an npy file at all, just text\n' >"$W/text"

# --- zip structure (each a one-member archive named x.npy, 5-byte name) ---
zip1() { "$FMTGEN" zip "$@" || bail_out "fmtgen zip $* failed"; }
zip1 "$B/localname.npz" x.npy="$W/x.npy"
poke "$B/localname.npz" 30 'Q'
bad "$B/localname.npz" "zip: member 'x.npy': local header names 'Q.npy'" "zip: local and central names differ"
zip1 "$B/method.npz" x.npy="$W/x.npy"
poke "$B/method.npz" $(($(cd_at "$B/method.npz") + 10)) '\014'
bad "$B/method.npz" "uses compression method 12" "zip: compression method 12 (bzip2)"
zip1 "$B/localmethod.npz" x.npy="$W/x.npy"
poke "$B/localmethod.npz" 8 '\010'
bad "$B/localmethod.npz" "disagree on the method" "zip: local header says deflate, directory says stored"
zip1 "$B/encrypted.npz" x.npy="$W/x.npy"
poke "$B/encrypted.npz" $(($(cd_at "$B/encrypted.npz") + 8)) '\001'
bad "$B/encrypted.npz" "zip: member 'x.npy' is encrypted" "zip: encrypted member"
cp "$W/text" "$B/noeocd.npz"
bad "$B/noeocd.npz" "zip: no end-of-central-directory record" "zip: no end record (text named .npz)"
printf 'PK\005\006' >"$B/short.npz"
bad "$B/short.npz" "zip: file too short for an end-of-central-directory record" "zip: 4-byte file"
zip1 "$W/full.npz" x.npy="$W/x.npy"
head -c $(($(wc -c <"$W/full.npz") - 30)) "$W/full.npz" >"$B/truncated.npz"
bad "$B/truncated.npz" "zip: no end-of-central-directory record" "zip: truncated archive"
zip1 "$B/disk.npz" x.npy="$W/x.npy"
poke "$B/disk.npz" $(($(wc -c <"$B/disk.npz") - 22 + 4)) '\001'
bad "$B/disk.npz" "multi-disk archives are not supported" "zip: multi-disk"
zip1 "$B/cdoff.npz" x.npy="$W/x.npy"
poke "$B/cdoff.npz" $(($(wc -c <"$B/cdoff.npz") - 22 + 16)) '\377\377\377\177'
bad "$B/cdoff.npz" "runs past its end record" "zip: directory offset past the end"
zip1 "$B/count.npz" x.npy="$W/x.npy"
poke "$B/count.npz" $(($(wc -c <"$B/count.npz") - 22 + 8)) '\377\377\377\377'
bad "$B/count.npz" "members cannot fit" "zip: 65535 members in a one-entry directory"
zip1 "$B/lho.npz" x.npy="$W/x.npy"
poke "$B/lho.npz" $(($(cd_at "$B/lho.npz") + 42)) '\000\000\000\020'
bad "$B/lho.npz" "local header offset 268435456 is outside the archive" "zip: local header offset outside"
zip1 "$B/localsig.npz" x.npy="$W/x.npy"
poke "$B/localsig.npz" 0 'Q'
bad "$B/localsig.npz" "no local header at offset 0" "zip: local header signature"
zip1 "$B/localsize.npz" x.npy="$W/x.npy"
poke "$B/localsize.npz" 18 '\003\000\000\000\003\000\000\000'
bad "$B/localsize.npz" "disagree on its size" "zip: local sizes differ from the directory's"
zip1 "$B/storedsize.npz" x.npy="$W/x.npy"
poke "$B/storedsize.npz" 22 '\005\000\000\000'
poke "$B/storedsize.npz" $(($(cd_at "$B/storedsize.npz") + 24)) '\005\000\000\000'
bad "$B/storedsize.npz" "different compressed and uncompressed sizes" "zip: stored member with two sizes"
zip1 "$B/z64extra.npz" x.npy="$W/x.npy"
poke "$B/z64extra.npz" $(($(cd_at "$B/z64extra.npz") + 42)) '\377\377\377\377'
bad "$B/z64extra.npz" "missing or short zip64 extra field" "zip: 0xFFFFFFFF offset without zip64 extra"
zip1 "$B/trailing.npz" x.npy="$W/x.npy"
printf 'garbage' >>"$B/trailing.npz"
bad "$B/trailing.npz" "the end-of-central-directory comment does not end the file" "zip: bytes after the end record"
zip1 "$W/plain.npz" x.npy="$W/x.npy"
{ printf 'prepended bytes'; cat "$W/plain.npz"; } >"$B/prepended.npz"
bad "$B/prepended.npz" "central directory does not end where its end record starts" "zip: bytes before the archive"
zip1 "$B/storedcrc.npz" x.npy="$W/x.npy"
poke "$B/storedcrc.npz" $((35 + $(wc -c <"$W/x.npy") - 1)) 'Z'
bad "$B/storedcrc.npz" "zip: member 'x.npy' fails its CRC check" "zip: stored member with a wrong CRC"
zip1 "$B/dup.npz" x.npy="$W/x.npy" x.npy="$W/x.npy"
bad "$B/dup.npz" "zip: duplicate member 'x.npy'" "zip: duplicate member names"
for n in "../x.npy|dotdot|has a '.' or '..' path component" "/x.npy|abs|is an absolute path" \
	'a\x.npy|backslash|contains a backslash' "C:/x.npy|drive|starts with a drive letter" \
	"a//x.npy|empty|has an empty path component" "a/./x.npy|dot|has a '.' or '..' path component"; do
	name=${n%%|*} rest=${n#*|}
	tag=${rest%%|*} why=${rest#*|}
	zip1 "$B/name_$tag.npz" "$name=$W/x.npy"
	bad "$B/name_$tag.npz" "$why" "zip: member name $name"
done
zip1 --deflate "$B/corrupt.npz" x.npy="$W/x.npy"
poke "$B/corrupt.npz" 35 '\377\377\377\377\377\377'
bad "$B/corrupt.npz" "zip: member 'x.npy'" "zip: corrupt deflate data"
zip1 --deflate "$B/crc.npz" x.npy="$W/x.npy"
poke "$B/crc.npz" 14 '\000\000\000\000'
poke "$B/crc.npz" $(($(cd_at "$B/crc.npz") + 16)) '\000\000\000\000'
bad "$B/crc.npz" "zip: member 'x.npy' fails its CRC check" "zip: deflated member with a wrong CRC"
zip1 --deflate --zip64 --zip64-central "$B/declared.npz" x.npy="$W/x.npy"
poke "$B/declared.npz" 39 '\377\377\377\000\000\000\000\000'
poke "$B/declared.npz" $(($(cd_at "$B/declared.npz") + 55)) '\377\377\377\000\000\000\000\000'
bad "$B/declared.npz" "more than deflate can make of" "zip: declared size no deflate stream can reach"
zip1 --deflate --zip64 --zip64-central "$B/lessdecl.npz" x.npy="$W/x.npy" y.npy="$W/x.npy"
poke "$B/lessdecl.npz" 39 '\200\000\000\000\000\000\000\000'
poke "$B/lessdecl.npz" $(($(cd_at "$B/lessdecl.npz") + 55)) '\200\000\000\000\000\000\000\000'
bad "$B/lessdecl.npz" "zip: member 'x.npy' inflates to more than its declared 128 bytes" "zip: inflates past its declared size"
# zip bombs: 64 MiB of zeros declared as 5 GiB, and as 1 MiB
"$FMTGEN" bomb "$B/bomb_ratio.npz" 67108864 5368709120 || bail_out "fmtgen bomb failed"
bad "$B/bomb_ratio.npz" "declares 5368709120 bytes, more than deflate can make of" "bomb: 5 GiB declared, 64 KiB of deflate"
"$FMTGEN" bomb "$B/bomb_small.npz" 67108864 1048576 || bail_out "fmtgen bomb failed"
bad "$B/bomb_small.npz" "npy data truncated" "bomb: 64 MiB stream declared as 1 MiB"
"$FMTGEN" bomb "$W/bomb_ok.npz" 67108864 || bail_out "fmtgen bomb failed"
# declared truly, under the total cap, but 300 MiB from 300 KiB: never inflated
"$FMTGEN" bomb "$B/bomb_true.npz" 314572800 || bail_out "fmtgen bomb failed"
bad "$B/bomb_true.npz" "would inflate 1" "bomb: 300 MiB of zeros declared truly, 1000-fold"

# --- npz members ---
zip1 "$B/npz_text.npz" x.npy="$W/text"
bad "$B/npz_text.npz" "npz member 'x.npy': not an npy file (bad magic)" "npz: member without the npy magic"
head -c $(($(wc -c <"$W/x.npy") - 4)) "$W/x.npy" >"$W/x_short.npy"
zip1 "$B/npz_short.npz" x.npy="$W/x_short.npy"
bad "$B/npz_short.npz" "npy data truncated" "npz: member data truncated"
cat "$W/x.npy" "$W/text" >"$W/x_long.npy"
zip1 --deflate "$B/npz_extra.npz" x.npy="$W/x_long.npy"
bad "$B/npz_extra.npz" "but its npy header needs" "npz: deflated member larger than its header says"
zip1 "$B/npz_dupname.npz" x.npy="$W/x.npy" x.NPY="$W/x.npy"
bad "$B/npz_dupname.npz" "duplicate tensor name 'x'" "npz: two members, one tensor name"
printf '\223NUMPY\001\000\020\000{"descr": 1}   \n' >"$W/badhdr.npy"
zip1 --deflate "$B/npz_header.npz" x.npy="$W/badhdr.npy"
bad "$B/npz_header.npz" "npz member 'x.npy': npy header" "npz: broken npy header inside"

# --- torch.save archives with one flaw each ---
for k in "size:storage record 'archive/data/0' holds 24 bytes, the pickle declares 20" \
	"missing:storage record 'archive/data/7' is missing" \
	"past:tensor 'w': data extends past its storage" \
	"negstride:tensor stride holds a negative value" \
	"key:storage key is not a plain name" \
	"args:tensor rebuild takes 6 or 7 arguments, got 4" \
	"pid:persistent id is not a ('storage', type, key, location, numel) tuple" \
	"complex:torch.ComplexFloatStorage tensors are not supported" \
	"v3dtype:torch.complex64 tensors are not supported" \
	"byteorder:byteorder record says neither 'little' nor 'big'" \
	"shared:storage '0' is declared twice with different types or sizes" \
	"overflow:element count overflows" \
	"rank:tensor size has more than 16 entries" \
	"expand:a view of 1099511627776 elements over a 24-byte storage is too large"; do
	kind=${k%%:*}
	"$FMTGEN" pt-case "$kind" "$B/pt_$kind.pt" || bail_out "fmtgen pt-case $kind failed"
	bad "$B/pt_$kind.pt" "${k#*:}" "torch: $kind"
done
"$FMTGEN" pt-case deflate "$W/pt_ok.pt" || bail_out "fmtgen pt-case deflate failed"
printf '\200\002\212\012\154\374\234\106\371\040\152\250\120\031.' >"$B/legacy.pt"
bad "$B/legacy.pt" "a legacy (pre-1.6) torch.save file: re-save with torch>=1.6" "torch: legacy stream"
printf '3\n' >"$W/version"
zip1 "$B/nopkl.pt" archive/version="$W/version"
bad "$B/nopkl.pt" "not a torch.save archive: no 'archive/data.pkl'" "torch: no data.pkl"
printf '\200\002}.' >"$W/empty.pkl"
zip1 "$B/flat.pt" data.pkl="$W/empty.pkl"
bad "$B/flat.pt" "is not inside a folder" "torch: members outside a folder"

# --- pickles as data.pkl (also as golden .jsonl pickles) ---
# pk NAME: wrap $W/pkl as a torch.save archive $B/pk_NAME.pt and a golden $B/pk_NAME.jsonl.
pk() {
	printf 'x' >"$W/storage"
	zip1 "$B/pk_$1.pt" archive/data.pkl="$W/pkl" archive/data/0="$W/storage"
	cp "$W/pkl" "$B/pk_$1.jsonl"
}
# s TEXT: a BINUNICODE string.
s() {
	printf 'X'
	le 4 ${#1}
	printf '%s' "$1"
}
pkl() { cat >"$W/pkl"; }
{ printf '\200\002cos\nsystem\n'; s "touch $MARK"; printf '\205R.'; } | pkl
pk os_system
bad "$B/pk_os_system.pt" "pickle global os.system is not allowed" "pickle: os.system REDUCE (torch)"
bad "$B/pk_os_system.jsonl" "pickle global os.system is not allowed" "pickle: os.system REDUCE (golden)"
{ printf '\200\002cposix\nsystem\n'; s "touch $MARK"; printf '\205R.'; } | pkl
pk posix_system
bad "$B/pk_posix_system.pt" "pickle global posix.system is not allowed" "pickle: posix.system REDUCE (torch)"
bad "$B/pk_posix_system.jsonl" "pickle global posix.system is not allowed" "pickle: posix.system REDUCE (golden)"
{ printf '\200\002c__builtin__\neval\n'; s "__import__('os').system('touch $MARK')"; printf '\205R.'; } | pkl
pk eval
bad "$B/pk_eval.pt" "pickle global builtins.eval is not allowed" "pickle: __builtin__.eval REDUCE (torch)"
bad "$B/pk_eval.jsonl" "pickle global builtins.eval is not allowed" "pickle: __builtin__.eval REDUCE (golden)"
{ printf '\200\004\214\010builtins\214\004exec\223'; s "import os; os.system('touch $MARK')"; printf '\205R.'; } | pkl
pk exec
bad "$B/pk_exec.pt" "pickle global builtins.exec is not allowed" "pickle: STACK_GLOBAL builtins.exec (torch)"
{ printf '\200\002csubprocess\ncheck_call\n'; s touch; s "$MARK"; printf '\206\205R.'; } | pkl
pk subprocess
bad "$B/pk_subprocess.pt" "pickle global subprocess.check_call is not allowed" "pickle: subprocess.check_call"
{ printf '\200\002cnt\nsystem\n'; s "touch $MARK"; printf '\205\201.'; } | pkl
pk nt
bad "$B/pk_nt.jsonl" "pickle global nt.system is not allowed" "pickle: nt.system through NEWOBJ"
{ printf '\200\002ccopy_reg\n_reconstructor\n)R.'; } | pkl
pk copyreg
bad "$B/pk_copyreg.pt" "pickle global copyreg._reconstructor is not allowed" "pickle: copy_reg._reconstructor"
{ printf '\200\002cbuiltins\ngetattr\n)R.'; } | pkl
pk getattr
bad "$B/pk_getattr.pt" "pickle global builtins.getattr is not allowed" "pickle: builtins.getattr"
{ printf '\200\002ctorch._utils\n_rebuild_qtensor\n)R.'; } | pkl
pk qtensor
bad "$B/pk_qtensor.pt" "pickle global torch._utils._rebuild_qtensor is not allowed" "pickle: torch global outside the allowlist"
{ printf '\200\002]K\001K\002s.'; } | pkl
pk setitem
bad "$B/pk_setitem.pt" "SETITEM on a list, not a dict" "pickle: SETITEM on a list"
{ printf '\200\002}K\001a.'; } | pkl
pk append
bad "$B/pk_append.pt" "APPEND on a dict, not a list" "pickle: APPEND on a dict"
{ printf '\200\002K\001r\377\377\377\377j\376\377\377\377.'; } | pkl
pk memo
bad "$B/pk_memo.pt" "memo entry 4294967294 was never stored" "pickle: LONG_BINPUT 2^32-1 then a missing LONG_BINGET"
{ printf '\200\002X\377\377\377\177abc.'; } | pkl
pk strlen
bad "$B/pk_strlen.pt" "2147483647 bytes asked for" "pickle: string longer than the input"
{ printf '\200\002'; head -c 20000 /dev/zero | tr '\000' '('; printf '.'; } | pkl
pk marks
bad "$B/pk_marks.pt" "MARKs nested deeper than 10000" "pickle: 20000 nested MARKs"
{ printf '\200\002K\001'; head -c 1100000 /dev/zero | tr '\000' '2'; printf '.'; } | pkl
pk stack
bad "$B/pk_stack.pt" "stack deeper than 1048576" "pickle: 1.1 million DUPs"
{ printf '\200\002}'; } | pkl
pk nostop
bad "$B/pk_nostop.pt" "no STOP before the end of the pickle" "pickle: no STOP"
{ printf '\200\007}.'; } | pkl
pk proto
bad "$B/pk_proto.pt" "unsupported pickle protocol 7" "pickle: protocol 7"
{ printf '\200\002I1\n.'; } | pkl
pk textop
bad "$B/pk_textop.pt" "opcode 0x49 ('I') is not supported" "pickle: protocol-0 INT opcode"
{ printf '\200\002X\002\000\000\000\303(.'; } | pkl
pk utf8
bad "$B/pk_utf8.pt" "string is not valid UTF-8" "pickle: invalid UTF-8 string"
{ printf '\200\002]K\001a.'; } | pkl
pk notdict
bad "$B/pk_notdict.jsonl" "golden record 0 is a int, not a dict" "golden pickle: record not a dict"
{ printf '\200\002K\001.'; } | pkl
pk notlist
bad "$B/pk_notlist.jsonl" "golden pickle is a int, not a list of records" "golden pickle: not a list"

# golden pickles from fmtgen, then patched: unsupported dtype, data size mismatch
"$FMTGEN" convert golden-pkl4 "$GOOD" "$W/g4.pkl" || bail_out "fmtgen convert golden-pkl4 failed"
LC_ALL=C sed 's/\x8c\x02f4/\x8c\x02c8/g' "$W/g4.pkl" >"$B/gp_dtype.jsonl"
bad "$B/gp_dtype.jsonl" "numpy dtype 'c8' is not supported" "golden pickle: complex dtype"
LC_ALL=C sed 's/\x8c\x02f4/\x8c\x02f8/g' "$W/g4.pkl" >"$B/gp_size.jsonl"
bad "$B/gp_size.jsonl" "its shape and dtype need more or fewer" "golden pickle: array bytes do not fit shape x dtype"
LC_ALL=C sed 's/_reconstruct/_reconstrucX/' "$W/g4.pkl" >"$B/gp_global.jsonl"
bad "$B/gp_global.jsonl" "pickle global numpy.core.multiarray._reconstrucX is not allowed" "golden pickle: unknown numpy global"

# --- golden JSON lines ---
g() { printf '%s\n' "$2" >"$B/$1.jsonl"; }
g gj_ragged '{"logits": [[1.0, 2.0], [3.0]]}'
bad "$B/gj_ragged.jsonl" "ragged array: 1 items where 2 were expected" "golden: ragged logits"
g gj_number '{"logits": [[1.0, 2.0.1]]}'
bad "$B/gj_number.jsonl" "expected ',' or ']' in an array" "golden: malformed number"
g gj_nan '{"logits": [[nan]]}'
bad "$B/gj_nan.jsonl" "expected a number" "golden: lower-case nan"
g gj_zeros '{"tokens": [007], "logits": [[1.0]]}'
bad "$B/gj_zeros.jsonl" "expected an integer" "golden: token id with leading zeros"
printf '{"prompt": "\351t\351", "logits": [[1.0]]}\n' >"$B/gj_utf8.jsonl"
bad "$B/gj_utf8.jsonl" "golden record 0 is not valid UTF-8" "golden: latin-1 bytes in a string"
g gj_dup '{"logits": [[1.0]], "logits": [[2.0]]}'
bad "$B/gj_dup.jsonl" "duplicate key \"logits\"" "golden: duplicate key"
g gj_none '{"prompt": "hello", "tokens": [1, 2]}'
bad "$B/gj_none.jsonl" "no \"logits\" or \"layer_hidden_states\"" "golden: record without tensors"
g gj_tokens '{"tokens": [1, "x"], "logits": [[1.0]]}'
bad "$B/gj_tokens.jsonl" "expected an integer" "golden: token id not an integer"
g gj_unterm '{"prompt": "hello'
bad "$B/gj_unterm.jsonl" "unterminated string" "golden: unterminated string"
g gj_trailing '{"logits": [[1.0]]} {}'
bad "$B/gj_trailing.jsonl" "trailing bytes after the record" "golden: two objects on one line"
g gj_open '{"logits": [[1.0, 2.0]'
bad "$B/gj_open.jsonl" "record ends inside an array" "golden: line ends inside the logits"
g gj_array '[1.0, 2.0]'
bad "$B/gj_array.jsonl" "record is not a JSON object" "golden: record not an object"
{ printf '{"x": '; head -c 200 /dev/zero | tr '\000' '['; printf '\n'; } >"$B/gj_deep.jsonl"
bad "$B/gj_deep.jsonl" "nested deeper than 128" "golden: 200 nested arrays in a skipped field"
{ printf '{"logits": '; head -c 20 /dev/zero | tr '\000' '['; printf '1.0'; head -c 20 /dev/zero | tr '\000' ']'; printf '}\n'; } >"$B/gj_rank.jsonl"
bad "$B/gj_rank.jsonl" "array nested deeper than 16" "golden: logits of rank 20"
printf '\n\n  \n' >"$B/gj_empty.jsonl"
bad "$B/gj_empty.jsonl" "golden file holds no records" "golden: only blank lines"
g gj_hidden '{"logits": [[1.0]], "layer_hidden_states": [[[1.0]], 5]}'
bad "$B/gj_hidden.jsonl" "expected an array of numbers" "golden: hidden state that is a number"
g gj_ctrl "$(printf '{"prompt": "a\001b", "logits": [[1.0]]}')"
bad "$B/gj_ctrl.jsonl" "control character in a string" "golden: control character in a string"

# --- npy headers numpy refuses too (found comparing the fuzz corpus with np.load) ---
cp "$top_srcdir/tests/fuzz-regress/npy/shape-leading-zero.npy" "$B/leadzero.npy"
bad "$B/leadzero.npy" "'shape' must hold integers" "npy: shape (01, 2)"
cp "$top_srcdir/tests/fuzz-regress/npy/descr-bool-suffix.npy" "$B/boolsuffix.npy"
bad "$B/boolsuffix.npy" "unknown npy dtype '?f2'" "npy: descr '?f2'"

# --- a tree holding one bad container among good ones ---
mkdir -p "$B/tree_mixed/a" "$B/tree_mixed/b"
cp "$W/good.npz" "$B/tree_mixed/a/good.npz"
cp "$B/pk_os_system.pt" "$B/tree_mixed/b/evil.pt"
bad "$B/tree_mixed" "pickle global os.system is not allowed" "tree: a hostile .pt among good files" "$B/tree_mixed/b/evil.pt"

# --- the runs ---
snapshot "$B" >"$W/before"

expect_exit 0 "control: the good npz loads" "$TBISECT" ls "$W/good.npz"
expect_exit 0 "control: a deflated torch.save file loads" "$TBISECT" ls "$W/pt_ok.pt"
expect_exit 0 "control: 64 MiB of zeros deflated, declared truly, loads" "$TBISECT" ls "$W/bomb_ok.npz"
check_that "control: its 16 million elements are listed" grep -q '16777184' "$TAP_OUT"

refuse_cases "$CASES" "$GOOD"

snapshot "$B" >"$W/after"
if cmp -s "$W/before" "$W/after"; then
	ok "no bad input was modified, added or removed"
else
	not_ok "no bad input was modified, added or removed"
	diff "$W/before" "$W/after" | sed 's/^/#   /'
fi
check_that "no pickle payload ran (no marker file)" [ ! -e "$MARK" ]
n_cases=$(awk 'END { print NR }' "$CASES")
check_that "at least 60 malformed inputs ($n_cases)" [ "$n_cases" -ge 60 ]

tap_done
