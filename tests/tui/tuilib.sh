# tuilib.sh: the pinned environment and tmux helpers of the TUI tests (source it
# after tests/e2e/lib.sh).
#
#   tui_script_setup               # tap_setup + pinned env, for TBISECT_SCRIPT tests
#   tui_setup                      # the same; skips all when tmux is missing
#   tui_start NAME 80 24 ARGS...   # tbisect ARGS in a private tmux server, window NAME
#   keys NAME KEY...               # tmux send-keys
#   expect_screen NAME DESC TEXT   # ok when TEXT appears on the screen
#   screen NAME                    # the screen's text, in $TUI_SCREEN
#
# Every screen assertion waits (wait_until) for the screen to show what it
# wants: no fixed sleeps, and no check reads a screen captured for another
# one.  A wait fails after $TAP_WAIT seconds, or at once when tbisect has
# exited and the screen can no longer change.  After tbisect exits the pane
# prints "TBISECT_EXIT=N" and the terminal modes (icanon, echo, isig) it was
# left in.

# The variables set here are for the sourcing script.
# shellcheck disable=SC2034

set -eu

# The environment every TUI test runs in.
tui_pin_env() {
	TERM=xterm-256color
	LC_ALL=C
	ESCDELAY=25
	TZ=UTC
	HOME=$TAP_TMP/home
	# Every view records a pass: keep each test's history to itself.
	XDG_STATE_HOME=$TAP_TMP/state
	INPUTRC=/dev/null
	export TERM LC_ALL ESCDELAY TZ HOME XDG_STATE_HOME INPUTRC
	unset NO_COLOR LINES COLUMNS TBISECT_SCRIPT
	mkdir -p "$HOME"
}

# tui_script_setup: tap_setup with $TBISECT made absolute and the pinned
# env, for the tests that play TBISECT_SCRIPT (no tmux needed).
tui_script_setup() {
	tap_setup
	TBISECT=$(cd "$(dirname "$TBISECT")" && pwd)/$(basename "$TBISECT")
	tui_pin_env
}

tui_setup() {
	tui_script_setup
	if ! command -v tmux >/dev/null 2>&1; then
		echo "1..0 # SKIP tmux is not installed"
		TAP_ENDED=1
		exit 0
	fi
	TUI_SOCK=tbtest$$
	# kill-server leaves the socket file behind: remove it too.
	TUI_SOCK_FILE=${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$TUI_SOCK
	TAP_AT_EXIT='tmux -L "$TUI_SOCK" kill-server >/dev/null 2>&1 || :; rm -f "$TUI_SOCK_FILE"'
}

tm() {
	tmux -L "$TUI_SOCK" -f /dev/null "$@"
}

# tui_start NAME COLS LINES [ENV=VALUE...] -- ARGS...: start tbisect ARGS in window NAME.
tui_start() {
	_name=$1 _w=$2 _h=$3
	shift 3
	_envs=""
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		_envs="$_envs $1"
		shift
	done
	[ "${1:-}" = "--" ] && shift
	_run=$TAP_TMP/run-$_name.sh
	{
		echo "cd '$TAP_TMP' || exit 1"
		# tmux sets its own TERM in a pane: pin ours again.
		echo "TERM=$TERM; export TERM"
		printf "sh -c 'echo \$\$ > pid-%s; exec env%s \"\$0\" \"\$@\"' '%s'" "$_name" "$_envs" "$TBISECT"
		for _a in "$@"; do printf " '%s'" "$_a"; done
		echo " 2>'$TAP_TMP/stderr-$_name'"
		echo 'echo "TBISECT_EXIT=$?"'
		echo "stty -a | tr ' ;' '\\n\\n' | grep -E '^-?(icanon|echo|isig)\$' | tr '\\n' ' '; echo"
		echo "echo TBISECT_DONE"
		echo "sleep 600"
	} >"$_run"
	if tm has-session 2>/dev/null; then
		tm new-window -d -n "$_name" "sh '$_run'"
	else
		tm new-session -d -s tb -n "$_name" -x "$_w" -y "$_h" "sh '$_run'"
	fi
	tm resize-window -t "tb:$_name" -x "$_w" -y "$_h"
}

keys() {
	_name=$1
	shift
	tm send-keys -t "tb:$_name" "$@"
}

# keys_literal NAME TEXT: type TEXT as it is.
keys_literal() {
	tm send-keys -t "tb:$1" -l "$2"
}

# screen NAME: the screen's text, every line newline-terminated, in
# $TUI_SCREEN ("" when the pane is gone).  The "." keeps the trailing blank
# lines that $(...) would strip.
screen() {
	TUI_SCREEN=$(tm capture-pane -p -t "tb:$1" 2>/dev/null && echo .) || TUI_SCREEN=.
	TUI_SCREEN=${TUI_SCREEN%.}
}

# screen_escapes NAME: the screen with its attribute escapes, in $TUI_SCREEN.
screen_escapes() {
	TUI_SCREEN=$(tm capture-pane -p -e -t "tb:$1" 2>/dev/null && echo .) || TUI_SCREEN=.
	TUI_SCREEN=${TUI_SCREEN%.}
}

# on_screen CAPTURE NAME TEST [ARGS...]: capture NAME's screen (CAPTURE is
# screen or screen_escapes) and run TEST ARGS on $TUI_SCREEN: 0 when it
# holds, 1 when not yet, 2 when it never will (tbisect has exited, so the
# screen is final).
on_screen() {
	_os_capture=$1 _os_name=$2
	shift 2
	"$_os_capture" "$_os_name"
	if "$@"; then return 0; fi
	case $TUI_SCREEN in *TBISECT_DONE*) return 2 ;; esac
	return 1
}

# The tests on $TUI_SCREEN.
# shows TEXT: TEXT (a fixed string) is on the screen.
shows() {
	case $TUI_SCREEN in *"$1"*) return 0 ;; esac
	return 1
}

# lacks TEXT: TEXT is nowhere on the screen.
lacks() {
	! shows "$1"
}

# has_line REGEX: a screen line matches the extended REGEX.
has_line() {
	printf '%s' "$TUI_SCREEN" | grep -E -q -- "$1"
}

# line_at N REGEX: screen line N matches REGEX.
line_at() {
	printf '%s' "$TUI_SCREEN" | sed -n "$1p" | grep -E -q -- "$2"
}

# wait_for NAME TEXT: wait until the screen shows TEXT (fixed string); 1 when it does not.
wait_for() {
	wait_until on_screen screen "$1" shows "$2"
}

diag_screen() {
	printf '%s' "$TUI_SCREEN" | sed 's/^/#   | /'
}

# expect_on NAME DESC WHY TEST [ARGS...]: ok when TEST ARGS comes to hold on
# the screen; else not ok with WHY and the last screen seen.
expect_on() {
	_eo_name=$1 _eo_desc=$2 _eo_why=$3
	shift 3
	if wait_until on_screen screen "$_eo_name" "$@"; then
		ok "$_eo_desc"
	else
		not_ok "$_eo_desc" "$_eo_why"
		diag_screen
	fi
}

# expect_escapes NAME DESC WHY TEST [ARGS...]: expect_on, the screen with its attribute escapes.
expect_escapes() {
	_eo_name=$1 _eo_desc=$2 _eo_why=$3
	shift 3
	if wait_until on_screen screen_escapes "$_eo_name" "$@"; then
		ok "$_eo_desc"
	else
		not_ok "$_eo_desc" "$_eo_why"
		diag_screen
	fi
}

# expect_screen NAME DESC TEXT: ok when TEXT shows up.
expect_screen() {
	expect_on "$1" "$2" "screen never showed: $3" shows "$3"
}

# expect_gone NAME DESC TEXT: ok when TEXT goes away.
expect_gone() {
	expect_on "$1" "$2" "screen still shows: $3" lacks "$3"
}

# expect_line NAME DESC REGEX: ok when a screen line matches the extended REGEX.
expect_line() {
	expect_on "$1" "$2" "no screen line matches: $3" has_line "$3"
}

# expect_at NAME DESC N REGEX: ok when screen line N matches REGEX.
expect_at() {
	expect_on "$1" "$2" "line $3 does not match: $4" line_at "$3" "$4"
}

# tui_pid NAME: the pid of the tbisect running in window NAME.
tui_pid() {
	cat "$TAP_TMP/pid-$1" 2>/dev/null
}

# expect_clean_exit NAME DESC CODE: tbisect exited with CODE and left the terminal sane.
expect_clean_exit() {
	if ! wait_for "$1" "TBISECT_DONE"; then
		not_ok "$2" "tbisect did not exit"
		diag_screen
	elif ! has_line "^TBISECT_EXIT=$3\$"; then
		not_ok "$2" "exit status is not $3"
		diag_screen
		diag_file "$TAP_TMP/stderr-$1"
	elif grep -q -e "Sanitizer" -e "runtime error:" "$TAP_TMP/stderr-$1" 2>/dev/null; then
		not_ok "$2" "sanitizer report on stderr"
		diag_file "$TAP_TMP/stderr-$1"
	elif ! has_line "^isig icanon echo *\$"; then
		not_ok "$2" "terminal not restored (want isig icanon echo)"
		diag_screen
	else
		ok "$2"
	fi
}
