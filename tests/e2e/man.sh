#!/bin/sh
# The manual pages: each lints clean with mandoc and renders; tbisect(1)
# documents every command and option the program's tables hold (as
# `tbisect --completion tsv` prints them); tbisect-dumps(5) lists every
# naming convention of src/model/naming.c; and every ".Dl $ COMMAND" example runs
# from a copy of the build's samples with the exit status the page's
# preceding ".\" test: exit N [grep TEXT]" comment gives (0 when absent),
# TEXT in its output, and nothing on standard error (the manual's
# examples are tests).  The code cites these pages and doc/, nothing
# outside the repository.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
M=$top_srcdir/man
# Every page in man/, so a new page is linted and its examples run too.
PAGES=$(cd "$M" && ls -- *.[1-9])
T=$TAP_TMP

# Citations: a comment or message that points the reader somewhere must
# point into the repository: the manual pages, README or doc/, never a
# document it does not ship (a contract, a style guide) nor a sibling
# folder.  Split so that this file does not match itself.
outside='CONTR''ACT|STY''LE\.md|\.\./shar''ed'
(cd "$top_srcdir" && grep -r -I -n -E "$outside" src ui samples data man tests README doc) >"$T/outside" 2>/dev/null || true
if [ -s "$T/outside" ]; then
	not_ok "the code cites no document outside the repository" "$(wc -l <"$T/outside") citations"
	diag_file "$T/outside"
else
	ok "the code cites no document outside the repository"
fi
(cd "$top_srcdir" && grep -r -I -o -h -E 'doc/[a-z]+\.md' src ui samples data man tests README doc | sort -u) >"$T/docs" || true
check_that "the code cites doc/ files ($(wc -l <"$T/docs"))" test -s "$T/docs"
while read -r d; do
	check_that "$d, cited, is in the repository" test -f "$top_srcdir/$d"
done <"$T/docs"

if ! command -v mandoc >/dev/null 2>&1; then
	skip "manual pages" "mandoc not installed (scripts/setup-deps.sh installs it)"
	tap_done
fi

BS=$(printf '\b')

# render PAGE: the page as plain text (no overstrike), wide enough that no table wraps.
render() {
	mandoc -Tascii -O width=200 "$M/$1" | sed "s/.$BS//g"
}

for page in $PAGES; do
	expect_exit 0 "$page: mandoc -Tlint exits 0" mandoc -Tlint -W warning "$M/$page"
	check_that "$page: no lint messages" test ! -s "$TAP_OUT" -a ! -s "$TAP_ERR"
	render "$page" >"$T/$page.txt"
	check_that "$page: renders with its NAME section" grep -q '^NAME$' "$T/$page.txt"
	check_that "$page: renders SEE ALSO" grep -q '^SEE ALSO$' "$T/$page.txt"
done

# tbisect.1's key list is the keymap and command table, exactly: man/keymap.sh
# writes it from `tbisect --keys`, so the page cannot drift from the view.
"$TBISECT" --keys | sh "$M/keymap.sh" >"$T/keymap.want"
awk '/^\.\\" BEGIN KEYMAP/ { f = 1; next } /^\.\\" END KEYMAP/ { f = 0 } f' "$M/tbisect.1" >"$T/keymap.got"
check_that "man/keymap.sh writes a key list" grep -q '^\.It Li "\\&f" Pq Cm first-divergence$' "$T/keymap.want"
if [ -s "$T/keymap.got" ] && cmp -s "$T/keymap.want" "$T/keymap.got"; then
	ok "tbisect.1 lists the keys and commands exactly as tbisect --keys"
else
	not_ok "tbisect.1 lists the keys and commands exactly as tbisect --keys" \
		"update it: ./tbisect --keys | sh man/keymap.sh, between BEGIN KEYMAP and END KEYMAP"
	diff "$T/keymap.want" "$T/keymap.got" | sed -n '1,20s/^/#   /p'
fi
check_that "tbisect.1 renders every action of the keymap" sh -c '
	"$1" --keys | awk -F "\t" "\$1 == \"key\" { print \$2 \" (\" \$3 \")\" }" | while read -r line; do
		grep -q -F -- "     $line" "$2" || { echo "missing: $line"; exit 1; }
	done' x "$TBISECT" "$T/tbisect.1.txt"

# Every command and long option is documented: the program prints the
# tables its parser, usage text and completion are made from.
"$TBISECT" --completion tsv >"$T/tables.tsv"
awk -F '\t' '$1 == "option" { print $2 }' "$T/tables.tsv" >"$T/options"
awk -F '\t' '$1 == "command" { print $2 }' "$T/tables.tsv" >"$T/commands"
check_that "tbisect --completion tsv lists options" test -s "$T/options"
check_that "tbisect --completion tsv lists commands" test -s "$T/commands"
while read -r o; do
	check_that "tbisect.1 documents $o" grep -q -e "$o\\b" "$T/tbisect.1.txt"
done <"$T/options"
while read -r c; do
	check_that "tbisect.1 documents the $c command" grep -q "^     tbisect $c \\[options\\]" "$T/tbisect.1.txt"
done <"$T/commands"

# Every format of the readers' table (the usage text lists their labels)
# heads an entry of tbisect-dumps(5) FORMATS, as its .It line reads.
"$TBISECT" --help | sed -n '/^The formats read/,/^$/s/^  //p' >"$T/formats"
sed -n '/^\.Sh FORMATS/,/^\.Sh RANKS AND STEPS/s/^\.It //p' "$M/tbisect-dumps.5" |
	sed -e 's/ Pq \(.*\)/ (\1)/' -e 's/Pa //g' -e 's/No //g' -e 's/ ,/,/g' >"$T/format.items"
check_that "tbisect --help lists the readers' formats" test "$(wc -l <"$T/formats")" -ge 13
while read -r f; do
	check_that "tbisect-dumps.5 FORMATS has an entry for $f" grep -q -x -F -- "$f" "$T/format.items"
done <"$T/formats"

# Every convention of the naming tables (the text decoder's, the towers')
# is listed, in its order.
for table in tb_conventions tower_conventions; do
	awk -v t="$table" '$0 ~ t "\\[\\] = \\{" {f=1;next} f&&/^};/{f=0} f' "$top_srcdir/src/model/naming.c" |
		sed -n 's/^[[:space:]]*{"\([^"]*\)",.*/\1/p' |
		sed -e 's/{N}/N/g' -e 's/{M}/M/g' -e 's/{S}//g' -e 's/{T}/TAP/g' -e 's/{\*}/*/g' >"$T/conv"
	check_that "src/model/naming.c has $table to check" test -s "$T/conv"
	awk 'NR == FNR { want[++n] = $0; next }
		$1 == want[i + 1] { i++ }
		END { if (i < n) { print want[i + 1]; exit 1 } }' "$T/conv" "$T/tbisect-dumps.5.txt" >"$T/conv.missing"
	check_that "tbisect-dumps.5 lists all $(wc -l <"$T/conv") $table of src/model/naming.c in order" \
		test ! -s "$T/conv.missing"
	[ -s "$T/conv.missing" ] && diag "first one missing: $(cat "$T/conv.missing")"
done

# The examples, run where the pages say: the build directory (a copy of its
# samples).  The interactive view's commands run in script mode with an
# empty script (load, compare, record the pass, exit with the batch status);
# the tutorial's keys and screens are replayed in tmux by
# tests/tui/tutorial.sh.  The history of passes is this run's own.
bin=$(cd "$top_builddir" && pwd)
: >"$T/empty.script"
TBISECT_SCRIPT=$T/empty.script
XDG_STATE_HOME=$T/state
TERM=xterm
LINES=24
COLUMNS=80
export TBISECT_SCRIPT XDG_STATE_HOME TERM LINES COLUMNS
US=$(printf '\037')
mkdir -p "$T/run/samples"
cp -R "$top_builddir/samples/pair" "$top_builddir/samples/walkthrough" "$T/run/samples/" ||
	bail_out "no generated samples in $top_builddir/samples"
ln -s "$bin/samples/mkdemo" "$T/run/samples/mkdemo"
for page in $PAGES; do
	# One line per example: CODE, GREP and COMMAND separated by \037.
	awk '/^\.\\" test: exit [0-9]+/ { code = $0; sub(/^\.\\" test: exit /, "", code)
		want = ""; if (code ~ / grep /) { want = code; sub(/^[0-9]+ grep /, "", want) }
		sub(/ .*/, "", code); next }
	/^\.Dl \$ / { sub(/^\.Dl \$ /, ""); printf "%s\037%s\037%s\n", code == "" ? 0 : code, want, $0; code = want = "" }' \
		"$M/$page" >"$T/$page.examples"
	check_that "$page has tested examples" test -s "$T/$page.examples"
	while IFS=$US read -r code want cmd; do
		case $cmd in
		*\\*) not_ok "$page: example has an escape, the reader would not see it: $cmd"; continue ;;
		esac
		TAP_RC=0
		(cd "$T/run" && PATH=$bin:$PATH sh -c "$cmd") </dev/null >"$TAP_OUT" 2>"$TAP_ERR" || TAP_RC=$?
		if [ "$TAP_RC" -ne "$code" ]; then
			not_ok "$page: $cmd" "exit status $TAP_RC, expected $code"
			diag_file "$TAP_ERR"
		elif [ -n "$want" ] && ! grep -F -q -- "$want" "$TAP_OUT"; then
			not_ok "$page: $cmd" "output does not say '$want'"
			diag_file "$TAP_OUT"
		elif [ -s "$TAP_ERR" ]; then
			not_ok "$page: $cmd" "wrote to standard error"
			diag_file "$TAP_ERR"
		else
			ok "$page: $cmd"
		fi
	done <"$T/$page.examples"
done

tap_done
