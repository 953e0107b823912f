#!/bin/sh
# The Debian package, as a clean clone builds it: HEAD is exported with git
# archive into a scratch directory (the working tree and the build
# directories are never touched) and built with dpkg-buildpackage -us -uc -b,
# which runs autoreconf and the whole make check.  lintian must report no
# error; the package must hold the program, the rule table, the manual
# pages, the dumpers and the bash completion; and the program it ships,
# extracted with dpkg -x, must compare the sample pair its build made.
# Minutes long: quickstart.sh test runs it, make check does not.
#   tests/pkg/deb.sh [SOURCE-DIR]       (default: the clone this script is in)
# expect_* return non-zero after recording a failure: "|| true" carries on.
set -eu
top=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
top_srcdir=$top
. "$top/tests/e2e/lib.sh"
tap_setup
S=$TAP_TMP

for tool in git dpkg-buildpackage dpkg-parsechangelog lintian fakeroot; do
	command -v "$tool" >/dev/null 2>&1 || bail_out "$tool is not installed (scripts/setup-deps.sh installs it)"
done
git -C "$top" rev-parse --verify -q HEAD >/dev/null || bail_out "$top is not a git checkout"

version=$(sed -n 's/^AC_INIT(\[tbisect\], \[\([^]]*\)\].*/\1/p' "$top/configure.ac")
src=$S/tbisect-$version
mkdir "$src"
git -C "$top" archive --format=tar HEAD | tar -xf - -C "$src"
ok "git archive HEAD: a clean copy of $(git -C "$top" rev-parse --short HEAD)"
if [ -x "$src/configure" ]; then not_ok "the copy has no configure script (autoreconf is the build's)"; else ok "the copy has no configure script (autoreconf is the build's)"; fi
changelog=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
check_that "debian/changelog's version $changelog is configure.ac's $version" test "$changelog" = "$version"

TAP_RC=0
(cd "$src" && dpkg-buildpackage -us -uc -b) </dev/null >"$S/build.log" 2>&1 || TAP_RC=$?
if [ "$TAP_RC" -ne 0 ]; then
	# which tests failed, then their logs (VERBOSE=1 prints test-suite.log)
	# without the passing lines, so CI's tail names the culprit
	grep -E '^(FAIL|ERROR): ' "$S/build.log" | sed 's/^/#   /' || true
	sed -n '/test-suite\.log$/,/^Testsuite summary/p' "$S/build.log" | grep -v -E '^(ok|PASS:) ' | head -n 150 |
		sed 's/^/#   /' || true
	tail -n 8 "$S/build.log" | sed 's/^/#   /'
	bail_out "dpkg-buildpackage -us -uc -b failed with status $TAP_RC"
fi
ok "dpkg-buildpackage -us -uc -b builds the package"
suite=$(grep -E '^# (PASS|FAIL|ERROR): ' "$S/build.log" | sed 's/^# //' | tr -s ' \n' ' ' | sed 's/ $//' || true)
check_that "the package build ran make check (${suite:-no summary})" grep -q '^# PASS: *[1-9]' "$S/build.log"

deb=$S/tbisect_${version}_$(dpkg-architecture -qDEB_HOST_ARCH).deb
changes=${deb%.deb}.changes
check_that "it writes ${deb##*/}" test -f "$deb"

lintian "$changes" >"$S/lintian.txt" 2>&1 || true
errors=$(grep -c '^E: ' "$S/lintian.txt" || true)
warnings=$(grep -c '^W: ' "$S/lintian.txt" || true)
if [ "$errors" -eq 0 ]; then
	ok "lintian: no error ($warnings warnings)"
else
	not_ok "lintian: no error" "$errors errors"
fi
grep -E '^[EW]: ' "$S/lintian.txt" | sed -n '1,30s/^/#   /p'

dpkg-deb -c "$deb" | awk '{ print $6 }' >"$S/files"
for f in usr/bin/tbisect usr/share/tbisect/rules.json usr/share/tbisect/mcp-skill.md usr/share/man/man1/tbisect.1.gz \
	usr/share/man/man5/tbisect-dumps.5.gz usr/share/man/man5/tbisect-rules.5.gz \
	usr/share/man/man7/tbisect-tutorial.7.gz usr/share/tbisect/dumpers/dump_hf.py \
	usr/share/tbisect/dumpers/dump_jax.py usr/share/bash-completion/completions/tbisect \
	usr/share/doc/tbisect/copyright; do
	check_that "the package holds /$f" grep -q -x -F "./$f" "$S/files"
done
# README's "Where to read more" points into doc/: shipped beside it (dh_compress may gzip).
check_that "the package holds README's doc/ files" grep -q -x -E './usr/share/doc/tbisect/doc/report\.md(\.gz)?' "$S/files"
depends=$(dpkg-deb -f "$deb" Depends)
check_that "Depends has the shared libraries (${depends})" sh -c \
	'for l in libc6 libcjson1 libncursesw6 libreadline8 zlib1g; do echo "$1" | grep -q -w "$l" || exit 1; done' x "$depends"

R=$S/root
dpkg -x "$deb" "$R"
bin=$R/usr/bin/tbisect
expect_exit 0 "the extracted tbisect --version runs" "$bin" --version || true
check_that "it prints tbisect $version" grep -q -x "tbisect $version" "$TAP_OUT"
pair=$src/_build/samples/pair
expect_exit 1 "the extracted tbisect check on the package build's sample pair exits 1" \
	env TBISECT_DATADIR="$R/usr/share/tbisect" XDG_STATE_HOME="$S/state" XDG_CONFIG_HOME="$S/config" \
	"$bin" check "$pair/ref" "$pair/cand" || true
check_that "with the packaged rules it names rope-style first" grep -q '^  1\. rope-style ' "$TAP_OUT"
if command -v bash >/dev/null 2>&1; then
	mkdir "$S/empty"
	got=$(cd "$S/empty" && bash -c '. "$1"; COMP_WORDS=(tbisect ch); COMP_CWORD=1; _tbisect; echo "${COMPREPLY[*]}"' x \
		"$R/usr/share/bash-completion/completions/tbisect" 2>&1 || true)
	check_that "the packaged completion completes 'tbisect ch' to check ('$got')" test "$got" = check
else
	skip "the packaged completion" "bash not installed"
fi

tap_done
