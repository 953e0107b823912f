# lib.sh: TAP helpers shared by the end-to-end tests (POSIX sh; source it).
#
#   set -eu
#   . "$(dirname "$0")/lib.sh"
#   tap_setup                        # $TBISECT, $TBGEN, $JSONQ, $TAP_TMP (removed at exit)
#   expect_exit 0 "ls a good tree" "$TBISECT" ls "$TAP_TMP/good"
#   ...
#   tap_done                         # prints the "1..N" plan, exits 0 iff all passed
#
# Every run_cmd / expect_* leaves the command's output in "$TAP_OUT" and
# "$TAP_ERR" and its exit status in $TAP_RC, for further checks.
#
# The tests run under set -eu.  A check that fails prints "not ok" and the
# script goes on (the helpers return 0; last_ok says how the last check
# went); a command that fails outside a check stops the script, and the
# exit trap then prints "Bail out!" with the number of the last test, which
# the TAP driver reports as an ERROR.  A command whose failure is expected
# is written so: `rc=0; cmd || rc=$?`, or run_cmd.

# The variables set here are for the sourcing script.
# shellcheck disable=SC2034

set -eu
LC_ALL=C
export LC_ALL

TAP_N=0
TAP_FAILED=0
# 1 when the last check passed.
TAP_LAST_OK=1
# Set once the plan is printed (tap_done, bail_out): the exit is then expected.
TAP_ENDED=
# Shell code the exit trap runs before $TAP_TMP goes (tuilib.sh's tmux server).
TAP_AT_EXIT=
# How long a wait gives its event, in seconds.  Only a guard against hanging
# for ever: no check passes or fails by how fast something happens.
TAP_WAIT=${TAP_WAIT:-60}

# tap_setup: default top_srcdir/top_builddir to ., set TBISECT/TBGEN/JSONQ/MKDEMO,
# make $TAP_TMP, and keep pass history in it (XDG_STATE_HOME).
tap_setup() {
	: "${top_srcdir:=.}" "${top_builddir:=.}"
	TBISECT=$top_builddir/tbisect
	TBGEN=$top_builddir/tests/tbgen
	JSONQ=$top_builddir/tests/jsonq
	MKDEMO=$top_builddir/samples/mkdemo
	TAP_TMP=$(mktemp -d "${TMPDIR:-/tmp}/tbe2e.XXXXXX") || bail_out "mktemp -d failed"
	# Pass history goes to the test's own folder, never the user's.
	XDG_STATE_HOME=$TAP_TMP/state
	export XDG_STATE_HOME
	trap tap_exit EXIT
	trap 'exit 130' INT TERM HUP
	TAP_OUT=$TAP_TMP/.stdout
	TAP_ERR=$TAP_TMP/.stderr
	TAP_RC=0
}

# tap_exit: the exit trap.  An exit before the plan was printed is an
# error (set -e, set -u, a signal): say so where the TAP driver sees it.
tap_exit() {
	_rc=$?
	if [ -z "$TAP_ENDED" ]; then
		printf 'Bail out! %s stopped by an unexpected error (exit status %d) after test %d\n' \
			"$0" "$_rc" "$TAP_N"
		[ "$_rc" -ne 0 ] || _rc=1
	fi
	if [ -n "$TAP_AT_EXIT" ]; then eval "$TAP_AT_EXIT"; fi
	# A process the exit code just stopped (a tmux pane's tbisect) may still
	# be writing in $TAP_TMP: rm then finds a folder not empty.  Try again,
	# and never let the cleanup decide the test's status (set -e would).
	rm -rf "${TAP_TMP:-}" 2>/dev/null || rm -rf "${TAP_TMP:-}" 2>/dev/null || :
	exit "$_rc"
}

# diag MSG...: print MSG as a TAP comment ("# MSG"); lines of a file via diag_file.
diag() {
	printf '# %s\n' "$*"
}

# diag_file FILE: print each line of FILE as a TAP comment (at most 20 lines).
diag_file() {
	if [ -f "$1" ]; then sed -n '1,20s/^/#   /p' "$1"; fi
}

# ok DESC: record a passing test.
ok() {
	TAP_N=$((TAP_N + 1))
	TAP_LAST_OK=1
	printf 'ok %d - %s\n' "$TAP_N" "$*"
}

# not_ok DESC [WHY]: record a failing test, WHY as a TAP comment.
not_ok() {
	TAP_N=$((TAP_N + 1))
	TAP_FAILED=$((TAP_FAILED + 1))
	TAP_LAST_OK=0
	printf 'not ok %d - %s\n' "$TAP_N" "$1"
	if [ $# -gt 1 ]; then diag "$2"; fi
}

# last_ok: succeeds when the last check passed (to skip checks that build on it).
last_ok() {
	[ "$TAP_LAST_OK" = 1 ]
}

# skip DESC REASON: record a skipped test.
skip() {
	TAP_N=$((TAP_N + 1))
	printf 'ok %d - %s # SKIP %s\n' "$TAP_N" "$1" "$2"
}

# bail_out MSG: abort the whole run (TAP "Bail out!").
bail_out() {
	printf 'Bail out! %s\n' "$*"
	TAP_ENDED=1
	exit 1
}

# check_that DESC CMD...: ok iff CMD (a test, not the program under test) succeeds.
check_that() {
	_d=$1
	shift
	if "$@"; then ok "$_d"; else not_ok "$_d" "failed: $*"; fi
}

# run_cmd CMD...: run CMD, stdin from /dev/null, output to $TAP_OUT/$TAP_ERR, status to $TAP_RC.
run_cmd() {
	TAP_RC=0
	"$@" </dev/null >"$TAP_OUT" 2>"$TAP_ERR" || TAP_RC=$?
}

# expect_exit CODE DESC CMD...: run CMD; ok iff it exits with status CODE.
expect_exit() {
	_code=$1 _d=$2
	shift 2
	run_cmd "$@"
	if [ "$TAP_RC" -eq "$_code" ]; then
		ok "$_d"
	else
		not_ok "$_d" "exit status $TAP_RC, expected $_code: $*"
		diag_file "$TAP_ERR"
	fi
}

# stderr_lines: number of lines in $TAP_ERR (a last line without newline counts).
stderr_lines() {
	awk 'END { print NR }' "$TAP_ERR"
}

# one_error_line PATH: "" if $TAP_ERR is one "tbisect: " line naming PATH (no sanitizer report), else why not.
one_error_line() {
	_n=$(stderr_lines)
	if grep -q -e "Sanitizer" -e "runtime error:" "$TAP_ERR"; then
		echo "sanitizer report on stderr"
	elif [ "$_n" -ne 1 ]; then
		echo "stderr has $_n lines, expected 1"
	elif ! head -n 1 "$TAP_ERR" | grep -q '^tbisect: '; then
		echo "stderr does not start with 'tbisect: '"
	elif ! grep -F -q -- "$1" "$TAP_ERR"; then
		echo "stderr does not name $1"
	fi
}

# expect_error_msg CODE PATH TEXT DESC CMD...: as expect_error, and the line must also contain TEXT.
expect_error_msg() {
	_code=$1 _p=$2 _t=$3 _d=$4
	shift 4
	run_cmd "$@"
	if [ "$TAP_RC" -ne "$_code" ]; then
		_why="exit status $TAP_RC, expected $_code"
	else
		_why=$(one_error_line "$_p")
		if [ -z "$_why" ] && [ -n "$_t" ] && ! grep -F -q -- "$_t" "$TAP_ERR"; then
			_why="stderr does not say \"$_t\""
		fi
	fi
	if [ -z "$_why" ]; then
		ok "$_d"
	else
		not_ok "$_d" "$_why: $*"
		diag_file "$TAP_ERR"
	fi
}

# expect_error CODE PATH DESC CMD...: ok iff CMD exits CODE with one "tbisect: ...PATH..." line on stderr.
expect_error() {
	_c=$1 _q=$2 _e=$3
	shift 3
	expect_error_msg "$_c" "$_q" "" "$_e" "$@"
}

# --- binary fixtures (printf, dd: no python) ---

# byte N: the byte of value N (0..255).
byte() {
	# shellcheck disable=SC2059 # the format is the point: an octal escape
	printf "\\$(printf %03o "$1")"
}

# le WIDTH N: N as a WIDTH-byte little-endian integer.
le() {
	_v=$2 _i=0
	while [ "$_i" -lt "$1" ]; do
		byte $((_v & 255))
		_v=$((_v >> 8)) _i=$((_i + 1))
	done
}

# poke FILE OFFSET FORMAT: overwrite bytes at OFFSET with printf FORMAT's output.
poke() {
	# shellcheck disable=SC2059 # FORMAT carries octal escapes
	printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

# peek FILE OFFSET WIDTH: the WIDTH-byte (1, 2 or 4) little-endian integer at OFFSET.
peek() {
	od -An -tu"$3" -j "$2" -N "$3" "$1" | tr -d ' '
}

# snapshot DIR: checksums and names of everything under DIR (to show nothing changed).
snapshot() {
	find "$1" -type f -exec cksum {} + | sort
	find "$1" | sort
}

# refuse_cases CASES GOOD: each "path<TAB>expected path<TAB>reason<TAB>description" line
# of CASES must be refused (exit 2, one line naming the expected path and saying reason)
# by check BAD GOOD, check GOOD BAD and ls BAD.
refuse_cases() {
	_good=$2
	while IFS=$(printf '\t') read -r _path _want _reason _desc; do
		expect_error_msg 2 "$_want" "$_reason" "check BAD GOOD refuses $_desc" "$TBISECT" check "$_path" "$_good"
		expect_error_msg 2 "$_want" "$_reason" "check GOOD BAD refuses $_desc" "$TBISECT" check "$_good" "$_path"
		expect_error_msg 2 "$_want" "$_reason" "ls refuses $_desc" "$TBISECT" ls "$_path"
	done <"$1"
}

# json_is DESC PATH WANT: the JSON in $TAP_OUT has WANT at PATH (tests/jsonq syntax).
json_is() {
	_got=$("$JSONQ" "$TAP_OUT" "$2" 2>&1)
	if [ "$_got" = "$3" ]; then ok "$1"; else not_ok "$1" "$2 is '$_got', expected '$3'"; fi
}

# find_python MODULE: print a python3 that can import MODULE; fail when none can.
find_python() {
	for _p in python3 /usr/bin/python3; do
		if command -v "$_p" >/dev/null 2>&1 && "$_p" -c "import $1" >/dev/null 2>&1; then
			command -v "$_p"
			return 0
		fi
	done
	return 1
}

# need_python MODULE: set PY to a python3 that can import MODULE, or skip
# the whole test when there is none (Debian: python3-MODULE).
need_python() {
	PY=$(find_python "$1") || {
		echo "1..0 # SKIP no python3 with $1 (Debian: python3-$1)"
		TAP_ENDED=1
		exit 0
	}
}

# wait_until CMD...: run CMD every 50 ms until it succeeds (return 0); 1 when
# CMD says the event will never come (a status other than 0 and 1) or after
# $TAP_WAIT seconds.  Counted in sleeps, so a loaded machine waits longer.
wait_until() {
	_wu_left=$((TAP_WAIT * 20))
	while :; do
		_wu_rc=0
		"$@" || _wu_rc=$?
		case $_wu_rc in
		0) return 0 ;;
		1) ;;
		*) return 1 ;;
		esac
		_wu_left=$((_wu_left - 1))
		[ "$_wu_left" -gt 0 ] || return 1
		sleep 0.05
	done
}

# json_get PATH: the value at PATH of the JSON in $TAP_OUT, "" when there is none
# (a report that is missing or short makes the check that reads it fail, not the script).
json_get() {
	"$JSONQ" "$TAP_OUT" "$1" 2>/dev/null || :
}

# cell_is DESC CELL FIELD PATTERN: the field of the cell named CELL
# ("L0.mlp.gate", "logits") of the JSON report in $TAP_OUT matches the
# shell pattern (a string as is, anything else as JSON).
cell_is() {
	_got=$("$PY" - "$TAP_OUT" "$2" "$3" <<'PY' 2>&1 || :
import json, sys
doc = json.load(open(sys.argv[1]))
name = lambda c: c["tap"] if c["layer"] is None else "L%d.%s" % (c["layer"], c["tap"])
v = next((c for c in doc["cells"] if name(c) == sys.argv[2]), {}).get(sys.argv[3])
print(v if isinstance(v, str) else json.dumps(v))
PY
)
	case $_got in
	$4) ok "$1" ;;
	*) not_ok "$1" "$2 $3 is '$_got', expected '$4'" ;;
	esac
}

# rewrite FILE: write standard input over FILE in place, then give FILE an
# mtime later than it had, while FILE is still open for writing: a --watch
# view sees one write ending at the close, whatever the file system's
# timestamp granularity.  (The history's digest is of the values, so the
# same bytes written again are no new pass.)
# shellcheck disable=SC2094 # the group writes FILE and sets its time: on purpose
rewrite() {
	_rw_old=$(stat -c %.9Y "$1" 2>/dev/null || echo 0)
	_rw_new=$(awk -v o="$_rw_old" -v n="$(date +%s.%N)" 'BEGIN { printf "%.9f", (n > o + 0.001 ? n : o + 0.001) }')
	{
		cat
		touch -c -d "@$_rw_new" "$1"
	} >"$1"
	_rw_now=$(stat -c %.9Y "$1")
	awk -v o="$_rw_old" -v n="$_rw_now" 'BEGIN { exit !(n > o) }' ||
		bail_out "rewrite $1: its mtime did not move past $_rw_old (file system timestamps too coarse?)"
}

# tap_done: print the plan trailer "1..N"; exit 0 iff no test failed.
tap_done() {
	printf '1..%d\n' "$TAP_N"
	TAP_ENDED=1
	if [ "$TAP_FAILED" -ne 0 ]; then
		diag "$TAP_FAILED of $TAP_N tests failed"
		exit 1
	fi
	exit 0
}

# tap_end_by CMD...: CMD prints this test's whole TAP stream, plan included;
# exit with its status.
tap_end_by() {
	_rc=0
	"$@" || _rc=$?
	TAP_ENDED=1
	exit "$_rc"
}
