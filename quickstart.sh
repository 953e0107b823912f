#!/bin/sh
# tbisect quick start.
#   ./quickstart.sh demo   install what is missing, build, open the bundled sample pair
#   ./quickstart.sh test   install what is missing, build, run the whole test suite,
#                          then once more under ASan + UBSan (TB_ASAN=no skips that)
# Builds out of tree in ./build (and ./build-asan).  Safe to re-run: steps
# already done are skipped.  The last line sums both runs: "N passed, N failed".
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

scripts/setup-deps.sh
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
	autoreconf -fi
fi
mkdir -p build
cd build
if [ ! -f Makefile ] || [ ../configure -nt config.status ]; then
	../configure
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
echo "$passed passed, $failed failed"
exit "$status"
