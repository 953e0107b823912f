# tuilib.sh: the pinned environment and tmux helpers of the TUI tests (source it
# after tests/e2e/lib.sh).
#
#   tui_setup                      # tap_setup + pinned env; skips all when tmux is missing
#   tui_start NAME 80 24 ARGS...   # tbisect ARGS in a private tmux server, window NAME
#   keys NAME KEY...               # tmux send-keys
#   expect_screen NAME DESC TEXT   # ok when TEXT appears on the screen within $TUI_WAIT s
#   screen NAME                    # the screen's text, in $TUI_SCREEN
#
# Every screen assertion polls capture-pane until the text appears (or the
# timeout passes): no fixed sleeps.  After tbisect exits the pane prints
# "TBISECT_EXIT=N" and the terminal modes (icanon, echo, isig) it was left in.

# The variables set here are for the sourcing script.
# shellcheck disable=SC2034

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

TUI_WAIT=${TUI_WAIT:-5}

tui_setup() {
	tap_setup
	TBISECT=$(cd "$(dirname "$TBISECT")" && pwd)/$(basename "$TBISECT")
	tui_pin_env
	if ! command -v tmux >/dev/null 2>&1; then
		echo "1..0 # SKIP tmux is not installed"
		exit 0
	fi
	TUI_SOCK=tbtest$$
	# kill-server leaves the socket file behind: remove it too.
	TUI_SOCK_FILE=${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$TUI_SOCK
	trap 'tmux -L "$TUI_SOCK" kill-server >/dev/null 2>&1; rm -f "$TUI_SOCK_FILE"; rm -rf "$TAP_TMP"' EXIT
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
	tm resize-window -t "tb:$_name" -x "$_w" -y "$_h" 2>/dev/null
	TUI_PID=
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

screen() {
	TUI_SCREEN=$(tm capture-pane -p -t "tb:$1" 2>/dev/null)
}

# wait_for NAME TEXT: poll the screen until it shows TEXT (fixed string); 1 on timeout.
wait_for() {
	_n=0
	_max=$((TUI_WAIT * 20))
	while [ "$_n" -lt "$_max" ]; do
		screen "$1"
		case $TUI_SCREEN in *"$2"*) return 0 ;; esac
		sleep 0.05
		_n=$((_n + 1))
	done
	return 1
}

# wait_gone NAME TEXT: poll until the screen no longer shows TEXT.
wait_gone() {
	_n=0
	_max=$((TUI_WAIT * 20))
	while [ "$_n" -lt "$_max" ]; do
		screen "$1"
		case $TUI_SCREEN in *"$2"*) ;; *) return 0 ;; esac
		sleep 0.05
		_n=$((_n + 1))
	done
	return 1
}

diag_screen() {
	printf '%s\n' "$TUI_SCREEN" | sed 's/^/#   | /'
}

# expect_screen NAME DESC TEXT: ok when TEXT shows up.
expect_screen() {
	if wait_for "$1" "$3"; then
		ok "$2"
	else
		not_ok "$2" "screen never showed: $3"
		diag_screen
	fi
}

# expect_gone NAME DESC TEXT: ok when TEXT goes away.
expect_gone() {
	if wait_gone "$1" "$3"; then
		ok "$2"
	else
		not_ok "$2" "screen still shows: $3"
		diag_screen
	fi
}

# expect_line NAME DESC REGEX: ok when a screen line matches the extended REGEX.
expect_line() {
	_n=0
	_max=$((TUI_WAIT * 20))
	while [ "$_n" -lt "$_max" ]; do
		screen "$1"
		if printf '%s\n' "$TUI_SCREEN" | grep -E -q -- "$3"; then
			ok "$2"
			return 0
		fi
		sleep 0.05
		_n=$((_n + 1))
	done
	not_ok "$2" "no screen line matches: $3"
	diag_screen
	return 1
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
		return 1
	fi
	if ! printf '%s\n' "$TUI_SCREEN" | grep -q "^TBISECT_EXIT=$3\$"; then
		not_ok "$2" "exit status is not $3"
		diag_screen
	elif grep -q -e "Sanitizer" -e "runtime error:" "$TAP_TMP/stderr-$1" 2>/dev/null; then
		not_ok "$2" "sanitizer report on stderr"
		diag_file "$TAP_TMP/stderr-$1"
	elif ! printf '%s\n' "$TUI_SCREEN" | grep -q "^isig icanon echo *\$"; then
		not_ok "$2" "terminal not restored (want isig icanon echo)"
		diag_screen
	else
		ok "$2"
	fi
}

# expect_at NAME DESC N REGEX: ok when screen line N matches REGEX.
expect_at() {
	_n=0
	_max=$((TUI_WAIT * 20))
	while [ "$_n" -lt "$_max" ]; do
		screen "$1"
		if printf '%s\n' "$TUI_SCREEN" | sed -n "$3p" | grep -E -q -- "$4"; then
			ok "$2"
			return 0
		fi
		sleep 0.05
		_n=$((_n + 1))
	done
	not_ok "$2" "line $3 does not match: $4"
	diag_screen
	return 1
}

# screen_escapes NAME: the screen with its attribute escapes, in $TUI_SCREEN.
screen_escapes() {
	TUI_SCREEN=$(tm capture-pane -p -e -t "tb:$1" 2>/dev/null)
}
