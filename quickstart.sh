#!/bin/sh
# tbisect quick start.
#   ./quickstart.sh demo   install what is missing, build, open the bundled sample pair
#   ./quickstart.sh test   install what is missing, build, run the whole test suite
# Builds out of tree in ./build.  Safe to re-run: steps already done are skipped.
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

status=0
make -j"$jobs" check || status=$?
if [ -f test-suite.log ]; then
	pass=$(sed -n 's/^# PASS: *//p' test-suite.log | head -n 1)
	fail=$(sed -n 's/^# FAIL: *//p' test-suite.log | head -n 1)
	err=$(sed -n 's/^# ERROR: *//p' test-suite.log | head -n 1)
	xpass=$(sed -n 's/^# XPASS: *//p' test-suite.log | head -n 1)
	if [ "$status" -ne 0 ]; then
		grep -E '^(not ok|ERROR|FAIL)' test-suite.log | head -n 40 || true
	fi
	echo "${pass:-0} passed, $(( ${fail:-0} + ${err:-0} + ${xpass:-0} )) failed"
else
	echo "0 passed, 1 failed"
	status=1
fi
exit "$status"
