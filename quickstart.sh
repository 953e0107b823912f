#!/bin/sh
# tbisect quick start.
#   ./quickstart.sh demo   install what is missing, build, open the bundled sample pair
#   ./quickstart.sh test   install what is missing, build with -Werror, run the whole
#                          test suite, then once more under ASan + UBSan (TB_ASAN=no
#                          skips that), then make distcheck (TB_DISTCHECK=no skips it)
#                          and build and check the Debian package (TB_DEB=no skips it)
# Builds out of tree in ./build (and ./build-asan).  Safe to re-run: steps
# already done are skipped.  The last line sums every run: "N passed, N failed".
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
what=${1:-}
case "$what" in
demo | test) ;;
*)
	echo "usage: $0 demo|test" >&2
	exit 2
	;;
esac

scripts/setup-deps.sh "$what"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
	autoreconf -fi
fi
# The tests build as CI does, warnings as errors; the demo takes any compiler's warnings.
flags=
if [ "$what" = test ]; then
	flags=--enable-werror
fi
mkdir -p build
cd build
if [ ! -f Makefile ] || [ ../configure -nt config.status ] ||
	{ [ -n "$flags" ] && ! ./config.status --config | grep -q -e "$flags"; }; then
	../configure ${flags:+"$flags"}
fi
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs"

if [ "$what" = demo ]; then
	exec make demo
fi

# tally LOG: add a test-suite.log's counts to $passed/$failed (a missing log is one failure).
passed=0
failed=0
tally() {
	if [ ! -f "$1" ]; then
		failed=$((failed + 1))
		return
	fi
	_p=$(sed -n 's/^# PASS: *//p' "$1" | head -n 1)
	_f=$(sed -n 's/^# FAIL: *//p' "$1" | head -n 1)
	_e=$(sed -n 's/^# ERROR: *//p' "$1" | head -n 1)
	_x=$(sed -n 's/^# XPASS: *//p' "$1" | head -n 1)
	passed=$((passed + ${_p:-0}))
	failed=$((failed + ${_f:-0} + ${_e:-0} + ${_x:-0}))
	grep -E '^(not ok|ERROR|FAIL)' "$1" | head -n 40 || true
}

# tally_tap LOG STATUS: add the ok / not ok lines of a TAP script's output; a
# script that failed without a "not ok" (bailed out, no plan) is one failure.
tally_tap() {
	_p=$(grep '^ok ' "$1" | grep -c -v '# SKIP' || true)
	_f=$(grep -c '^not ok ' "$1" || true)
	if [ "$2" -ne 0 ] && [ "$_f" -eq 0 ] || ! grep -q '^1\.\.[0-9]' "$1"; then
		_f=$((_f + 1))
		tail -n 20 "$1"
	fi
	passed=$((passed + _p))
	failed=$((failed + _f))
	grep -E -A 3 '^(not ok|Bail out)' "$1" | head -n 40 || true
}

status=0
make -j"$jobs" check || status=$?
tally test-suite.log

# The same suite again with AddressSanitizer and UBSan (a second build dir).
if [ "${TB_ASAN:-yes}" != no ]; then
	cd "$here"
	mkdir -p build-asan
	cd build-asan
	if [ ! -f Makefile ] || [ ../configure -nt config.status ]; then
		../configure --enable-sanitizers
	fi
	asan=0
	make -j"$jobs" && make -j"$jobs" check || asan=$?
	[ "$asan" -eq 0 ] || status=$asan
	tally test-suite.log
fi

# The tarball: it builds with -Werror, passes make check, installs and
# uninstalls (DESTDIR too) and cleans up after itself.  One test.
if [ "${TB_DISTCHECK:-yes}" != no ]; then
	cd "$here/build"
	if make -j"$jobs" distcheck VERBOSE=1 >distcheck.log 2>&1; then
		passed=$((passed + 1))
		echo "ok - make distcheck"
	else
		failed=$((failed + 1))
		status=1
		echo "not ok - make distcheck (build/distcheck.log: its failed tests, then its end)"
		grep -E -A 3 '^(not ok|Bail out|FAIL:|ERROR:)' distcheck.log | head -n 40 || true
		tail -n 20 distcheck.log
	fi
fi

# The Debian package, from a clean copy of HEAD (tests/pkg/deb.sh, TAP).
if [ "${TB_DEB:-yes}" != no ]; then
	cd "$here"
	deb=0
	tests/pkg/deb.sh "$here" >build/deb.log 2>&1 || deb=$?
	[ "$deb" -eq 0 ] || status=$deb
	tally_tap build/deb.log "$deb"
fi
echo "$passed passed, $failed failed"
exit "$status"
