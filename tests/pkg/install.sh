#!/bin/sh
# make install and make uninstall with DESTDIR, from the build directory:
# the program, the rule table, the manual pages, the dumpers and the bash
# completion land where configure put them and nothing else does; the
# installed program runs and reads the installed rule table; man -l
# renders the installed pages; uninstall leaves no file behind.
# make check passes the directories (TB_BINDIR, TB_PKGDATADIR, TB_MANDIR,
# TB_COMPLETIONDIR) and MAKE; nothing outside the scratch root is written.
# expect_* return non-zero after recording a failure: "|| true" carries on.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
D=$TAP_TMP/root
: "${MAKE:=make}" "${TB_BINDIR:?}" "${TB_PKGDATADIR:?}" "${TB_MANDIR:?}" "${TB_COMPLETIONDIR:?}"
build=$(cd "$top_builddir" && pwd)

# make TARGET: make TARGET DESTDIR=$D in the build directory, as its own
# top-level make (no jobserver of make check's), output in $TAP_OUT.
make_destdir() {
	TAP_RC=0
	MAKEFLAGS='' MFLAGS='' "$MAKE" -C "$build" "$1" DESTDIR="$D" </dev/null >"$TAP_OUT" 2>&1 || TAP_RC=$?
}

make_destdir install
if [ "$TAP_RC" -ne 0 ]; then
	tail -n 20 "$TAP_OUT" | sed 's/^/#   /'
	bail_out "make install DESTDIR=$D failed with status $TAP_RC"
fi
ok "make install DESTDIR=... exits 0"

# What must be installed, and nothing more.
{
	echo "$TB_BINDIR/tbisect"
	echo "$TB_PKGDATADIR/rules.json"
	echo "$TB_PKGDATADIR/mcp-skill.md"
	for f in "$top_srcdir"/samples/dumpers/*.py; do echo "$TB_PKGDATADIR/dumpers/${f##*/}"; done
	for f in "$top_srcdir"/man/*.[1-9]; do echo "$TB_MANDIR/man${f##*.}/${f##*/}"; done
	echo "$TB_COMPLETIONDIR/tbisect"
} | LC_ALL=C sort >"$TAP_TMP/want"
(cd "$D" && find . ! -type d | sed 's|^\.||' | LC_ALL=C sort) >"$TAP_TMP/got"
if cmp -s "$TAP_TMP/want" "$TAP_TMP/got"; then
	ok "installs the program, rules.json, the MCP skill, $(grep -c '/man[0-9]/' "$TAP_TMP/want") pages, the dumpers and the completion"
else
	not_ok "installs exactly the expected files"
	diff "$TAP_TMP/want" "$TAP_TMP/got" | sed -n '1,20s/^/#   /p'
fi

bin=$D$TB_BINDIR/tbisect
data=$D$TB_PKGDATADIR
check_that "the dumpers are executable" test -x "$data/dumpers/dump_hf.py" -a -x "$data/dumpers/dump_jax.py"
check_that "the installed rules.json is data/rules.json" cmp -s "$top_srcdir/data/rules.json" "$data/rules.json"
check_that "the installed skill is what tbisect mcp --skill prints" sh -c '"$1" mcp --skill | cmp -s - "$2"' x \
	"$build/tbisect" "$data/mcp-skill.md"
check_that "the installed completion is the build's" cmp -s "$build/completion/tbisect" "$D$TB_COMPLETIONDIR/tbisect"

expect_exit 0 "the installed tbisect --version runs" "$bin" --version || true
"$build/tbisect" --version >"$TAP_TMP/version"
check_that "it prints the build's version" cmp -s "$TAP_TMP/version" "$TAP_OUT"

# The rule table: the program looks in pkgdatadir (TB_PKGDATADIR is
# compiled in), which a test can only reach through TBISECT_DATADIR.
check_that "the installed program looks for its rules in $TB_PKGDATADIR" grep -a -q -F "$TB_PKGDATADIR" "$bin"
pair=$build/samples/pair
expect_exit 1 "the installed tbisect check on the sample pair exits 1" \
	env TBISECT_DATADIR="$data" XDG_STATE_HOME="$TAP_TMP/state" "$bin" check "$pair/ref" "$pair/cand" || true
check_that "with the installed rules it names rope-style first" grep -q '^  1\. rope-style ' "$TAP_OUT"
printf '[' >"$data/rules.json"
expect_error 2 "$data/rules.json" "a broken installed rules.json is refused, by its path: it is the one read" \
	env TBISECT_DATADIR="$data" XDG_STATE_HOME="$TAP_TMP/state" "$bin" check "$pair/ref" "$pair/cand" || true

if command -v man >/dev/null 2>&1; then
	for page in "$D$TB_MANDIR"/man*/*; do
		run_cmd env MANPAGER=cat MANWIDTH=80 man --warnings -l "$page"
		if grep -q '^NAME' "$TAP_OUT" && [ ! -s "$TAP_ERR" ]; then
			ok "man -l renders the installed ${page##*/}"
		else
			not_ok "man -l renders the installed ${page##*/}" "no NAME section, or warnings"
			diag_file "$TAP_ERR"
		fi
	done
else
	skip "man -l renders the installed pages" "man-db not installed (scripts/setup-deps.sh installs it)"
fi

make_destdir uninstall
if [ "$TAP_RC" -eq 0 ]; then ok "make uninstall DESTDIR=... exits 0"; else not_ok "make uninstall DESTDIR=... exits 0" "status $TAP_RC"; fi
(cd "$D" && find . ! -type d) >"$TAP_TMP/left"
if [ ! -s "$TAP_TMP/left" ]; then
	ok "make uninstall leaves no file behind"
else
	not_ok "make uninstall leaves no file behind" "$(wc -l <"$TAP_TMP/left") left"
	diag_file "$TAP_TMP/left"
fi

tap_done
