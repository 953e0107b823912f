#!/bin/sh
# tbisect-tutorial(7) replayed in a real terminal (tmux), so the tutorial
# cannot drift from the program: its ".Dl $ COMMAND" lines run in order
# from a copy of the build's samples (the interactive view's commands start
# it in an 80x20 pane), and comment lines in the page drive the rest:
#
#   .\" keys: K...     send these tmux keys to the view
#   .\" screen         the .Bd -literal block that follows is the whole screen
#   .\" shows          every line of the block that follows is a screen line
#   .\" exit: N        the view has exited with status N
#
# Times (YYYY-MM-DD HH:MM) and the history file's path are compared as
# such, not by value.
# TUTORIAL_CAPTURE=1 prints each screen instead of comparing (to write the page).
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup
PAGE=$(cd "$top_srcdir" && pwd)/man/tbisect-tutorial.7
S=$top_builddir/samples
[ -f "$S/walkthrough/pass4/activations.safetensors" ] || bail_out "$S: the build did not generate the samples"
bin=$(cd "$top_builddir" && pwd)
mkdir -p "$TAP_TMP/samples" && cp -R "$S/walkthrough" "$TAP_TMP/samples/" || bail_out "cannot copy the samples"
ln -s "$bin/samples/mkdemo" "$TAP_TMP/samples/mkdemo"
PATH=$bin:$PATH
export PATH
cd "$TAP_TMP" || bail_out "cd failed"

# The page as steps, one a line: KIND, then its argument, separated by \037;
# literal blocks go to block.N with the page's escapes undone.
US=$(printf '\037')
awk -v dir="$TAP_TMP" '
function unescape(s) { gsub(/\\&/, "", s); gsub(/\\e/, "\\", s); return s }
/^\.\\" test: exit [0-9]+/ { code = $4; next }
/^\.Dl \$ / { sub(/^\.Dl \$ /, ""); printf "run\037%s\037%s\n", code == "" ? 0 : code, $0; code = ""; next }
/^\.\\" keys: / { sub(/^\.\\" keys: /, ""); printf "keys\037%s\n", $0; next }
/^\.\\" exit: [0-9]+$/ { printf "exit\037%s\n", $3; next }
/^\.\\" (screen|shows)$/ { want = $2; next }
/^\.Bd -literal/ && want != "" { n++; file = dir "/block." n; printf "" > file; inblock = 1; next }
/^\.Ed/ && inblock { close(file); printf "%s\037%s\n", want, file; inblock = 0; want = ""; next }
inblock { print unescape($0) > file }
' "$PAGE" >steps || bail_out "cannot read $PAGE"
check_that "the tutorial has steps to replay" grep -q '^screen' steps

# mask: times and the history file as placeholders.
mask() {
	sed -E -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}/YYYY-MM-DD HH:MM/g' \
		-e 's#^  file /[^ ]*/tbisect/pair-[0-9a-f]{16}\.json$#  file STATE/tbisect/pair-HASH.json#'
}

# The tests on $TUI_SCREEN against the page's block, masked in want.txt.
# same_screen: the pane's text is the block.
same_screen() {
	printf '%s' "$TUI_SCREEN" | mask >got.txt
	cmp -s want.txt got.txt
}

# every_line_shown: each line of want.txt is a line of the pane.
every_line_shown() {
	printf '%s' "$TUI_SCREEN" | mask >got.txt
	! grep -v -x -F -f got.txt want.txt >missing.txt
}

# Each view runs in a window of its own (tut1, tut2, ...), left to the end.
view=0
win=
while IFS=$US read -r kind a b; do
	case $kind in
	run)
		case $b in
		"tbisect check "* | "tbisect ls "*) ;;
		"tbisect "*)
			view=$((view + 1))
			win=tut$view
			# shellcheck disable=SC2086
			tui_start "$win" 80 20 -- ${b#tbisect }
			expect_at "$win" "view $view: $b comes up" 1 '^tbisect  [A-Za-z]'
			continue
			;;
		esac
		run_cmd sh -c "$b"
		if [ "$TAP_RC" -eq "$a" ]; then ok "$b"; else not_ok "$b" "exit status $TAP_RC, expected $a"; diag_file "$TAP_ERR"; fi
		;;
	keys)
		# shellcheck disable=SC2086
		keys "$win" $a
		;;
	screen | shows)
		if [ "${TUTORIAL_CAPTURE:-}" = 1 ]; then
			sleep 1.5
			echo "# --- $a"
			tm capture-pane -p -t "tb:$win" | sed 's/^/# /'
			continue
		fi
		if [ "$kind" = screen ]; then check=same_screen; else check=every_line_shown; fi
		mask <"$a" >want.txt
		if wait_until on_screen screen "$win" "$check"; then
			ok "view $view: $kind $(basename "$a") ($(head -n 1 "$a" | cut -c1-40))"
		else
			not_ok "view $view: $kind $(basename "$a")" "the screen differs from the page"
			diff want.txt got.txt | sed -n '1,30s/^/#   /p'
		fi
		;;
	exit)
		expect_clean_exit "$win" "view $view: exits with status $a, terminal restored" "$a"
		;;
	esac
done <steps

tap_done
