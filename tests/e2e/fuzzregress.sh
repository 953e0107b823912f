#!/bin/sh
# fuzzregress: every input kept in tests/fuzz-regress/TARGET/ (crashes the
# fuzzers found, and inputs that reach the readers' caps) goes through the
# normal program the way its fuzz target fed it: as a file of that format
# for `tbisect check FILE FILE` (which decodes every tensor) and `tbisect ls`.
# Each run must end with exit 0, 1 or 2, at most one line on stderr and no
# sanitizer report.  Run `make check` in an --enable-sanitizers build to
# replay them under ASan and UBSan.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
FMTGEN=$top_builddir/tests/fmtgen
R=$top_srcdir/tests/fuzz-regress
"$TBGEN" --layers 1 "$TAP_TMP/good" "$TAP_TMP/good2" >/dev/null 2>&1 || bail_out "tbgen failed"
printf 'x' >"$TAP_TMP/storage"

# survives DESC CMD...: the command ends normally with at most one error line.
survives() {
	_d=$1
	shift
	run_cmd "$@"
	if [ "$TAP_RC" -gt 2 ]; then
		not_ok "$_d" "exit status $TAP_RC: $*"
		diag_file "$TAP_ERR"
	elif grep -q -e "Sanitizer" -e "runtime error:" "$TAP_ERR"; then
		not_ok "$_d" "sanitizer report: $*"
		diag_file "$TAP_ERR"
	elif [ "$(stderr_lines)" -gt 1 ]; then
		not_ok "$_d" "more than one line on stderr: $*"
		diag_file "$TAP_ERR"
	else
		ok "$_d"
	fi
}

# replay FILE AS: copy FILE to a scratch name AS, then check and ls it.
replay() {
	cp "$1" "$TAP_TMP/$2"
	survives "$2 from $(basename "$1"): check" "$TBISECT" check "$TAP_TMP/$2" "$TAP_TMP/$2"
	survives "$2 from $(basename "$1"): ls" "$TBISECT" ls "$TAP_TMP/$2"
	rm -f "$TAP_TMP/$2"
}

n=0
for f in "$R"/npy/*; do [ -f "$f" ] && replay "$f" x.npy && n=$((n + 1)); done
for f in "$R"/safetensors/*; do [ -f "$f" ] && replay "$f" x.safetensors && n=$((n + 1)); done
for f in "$R"/golden/*; do [ -f "$f" ] && replay "$f" x.jsonl && n=$((n + 1)); done
for f in "$R"/polygraphy/*; do [ -f "$f" ] && replay "$f" x.json && n=$((n + 1)); done
for f in "$R"/ggmltext/*; do [ -f "$f" ] && replay "$f" x.log && n=$((n + 1)); done
for f in "$R"/tbsk/*; do [ -f "$f" ] && replay "$f" x.tbsk && n=$((n + 1)); done
for f in "$R"/moetrace/*; do [ -f "$f" ] && replay "$f" x.csv && n=$((n + 1)); done
for f in "$R"/zip/*; do
	[ -f "$f" ] || continue
	replay "$f" x.npz
	replay "$f" x.pt
	n=$((n + 1))
done
for f in "$R"/pickle/*; do
	[ -f "$f" ] || continue
	"$FMTGEN" zip "$TAP_TMP/wrapped.pt" archive/data.pkl="$f" archive/data/0="$TAP_TMP/storage" ||
		bail_out "fmtgen zip failed"
	replay "$TAP_TMP/wrapped.pt" x.pt
	replay "$f" x.jsonl
	n=$((n + 1))
done
for f in "$R"/map/*; do
	[ -f "$f" ] || continue
	survives "map $(basename "$f")" "$TBISECT" ls --map "$f" "$TAP_TMP/good"
	n=$((n + 1))
done
check_that "the regression corpus is not empty ($n inputs)" [ "$n" -gt 0 ]
tap_done
