#!/bin/sh
# The bash completion the build writes (completion/tbisect, from
# `tbisect --completion bash`): sourced in bash, its function is called as
# bash would call it (COMP_WORDS, COMP_CWORD) and COMPREPLY must hold what
# the command line accepts there: a command only as the first word, the
# options of the mode being typed (as `tbisect --completion tsv` lists
# them), files for --map, dtype names for --npy-void2, trees otherwise.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP
SCRIPT=$(cd "$top_builddir" && pwd)/completion/tbisect

if ! command -v bash >/dev/null 2>&1; then
	skip "bash completion" "bash not installed (scripts/setup-deps.sh installs it)"
	tap_done
fi

"$TBISECT" --completion bash >"$T/want.bash"
check_that "the build's completion/tbisect is what tbisect --completion bash writes" cmp -s "$SCRIPT" "$T/want.bash"
check_that "the script parses (bash -n)" bash -n "$SCRIPT"
check_that "sourcing it registers _tbisect for tbisect" sh -c \
	'bash -c ". \"\$1\" && complete -p tbisect" x "$1" | grep -q -e "-F _tbisect tbisect\$"' x "$SCRIPT"

# A directory to complete paths in.
mkdir -p "$T/cwd/logs" "$T/cwd/maps" "$T/cwd/ref"
: >"$T/cwd/map.json"
: >"$T/cwd/cand.npz"

# complete_line WORD...: what the completion offers when the last WORD is
# being typed, sorted, one per line; errors and a failing status show up
# among the words, so that they never read as "nothing offered".
complete_line() {
	_rc=0
	_out=$(cd "$T/cwd" && bash -c '
		set -eu
		. "$1"
		shift
		COMP_WORDS=("$@")
		COMP_CWORD=$(($# - 1))
		COMPREPLY=()
		_tbisect
		if [ "${#COMPREPLY[@]}" -gt 0 ]; then printf "%s\n" "${COMPREPLY[@]}"; fi' x "$SCRIPT" "$@" 2>&1) || _rc=$?
	[ "$_rc" -eq 0 ] || _out="$_out
!exit $_rc"
	printf '%s\n' "$_out" | sed '/^$/d' | LC_ALL=C sort
}

# offers DESC WANT WORD...: the completion of WORD... is exactly WANT (space-separated, sorted).
offers() {
	_d=$1 _want=$2
	shift 2
	_got=$(complete_line "$@" | tr '\n' ' ' | sed 's/ $//')
	if [ "$_got" = "$_want" ]; then ok "$_d"; else not_ok "$_d" "offered '$_got', expected '$_want'"; fi
}

offers "tbisect ch<TAB>: check" "check" tbisect ch
offers "tbisect l<TAB>: the ls command and the paths" "logs ls" tbisect l
offers "tbisect check l<TAB>: a command only as the first word" "logs" tbisect check l
offers "tbisect check --ma<TAB>: --map, --markdown and --max-kl" "--map --markdown --max-kl" tbisect check --ma
offers "tbisect check --wa<TAB>: --watch belongs to the interactive view" "" tbisect check --wa
offers "tbisect --wa<TAB>: --watch" "--watch" tbisect --wa
offers "tbisect --atol 1 --wa<TAB>: the mode is the first word's" "--watch" tbisect --atol 1 --wa
offers "tbisect ls --fe<TAB>: --features belongs to check" "" tbisect ls --fe
offers "tbisect check --fe<TAB>: --features" "--features" tbisect check --fe
offers "tbisect --hi<TAB>: --history belongs to check" "" tbisect --hi
offers "tbisect check --history<TAB>: --history and --history-reset" "--history --history-reset" tbisect check --history
offers "tbisect ls --js<TAB>: --json" "--json" tbisect ls --js
offers "tbisect check --npy-void2 <TAB>: the 2-byte floats" "bf16 f16" tbisect check --npy-void2 ""
offers "tbisect check --npy-void1 <TAB>: the 1-byte floats" "f8_e4m3fn f8_e4m3fnuz f8_e5m2 f8_e5m2fnuz" \
	tbisect check --npy-void1 ""
offers "tbisect check --npy-void1=f8_e5<TAB> (bash splits at '=')" "f8_e5m2 f8_e5m2fnuz" \
	tbisect check --npy-void1 = f8_e5
offers "tbisect check --npy-void2=<TAB>" "bf16 f16" tbisect check --npy-void2 =
offers "tbisect check --map <TAB>: files and directories" "cand.npz logs map.json maps ref" tbisect check --map ""
offers "tbisect check --rules m<TAB>" "map.json maps" tbisect check --rules m
offers "tbisect check --atol <TAB>: nothing to offer for a number" "" tbisect check --atol ""
offers "tbisect check ref <TAB>: the trees" "cand.npz logs map.json maps ref" tbisect check ref ""
offers "tbisect check -- --m<TAB>: no options after --" "" tbisect check -- --m
offers "tbisect --completion <TAB>: the formats" "bash tsv" tbisect --completion ""

# Per mode, "--" completes to exactly the options the table gives that mode.
"$TBISECT" --completion tsv >"$T/tables.tsv"
for mode in "interactive view" check ls; do
	want=$(awk -F '\t' -v m="$mode" '$1 == "option" {
		n = split($4, a, ", "); for (i = 1; i <= n; i++) if (a[i] == m) print $2 }' "$T/tables.tsv" |
		LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')
	check_that "tbisect --completion tsv has options of the $mode" test -n "$want"
	if [ "$mode" = "interactive view" ]; then
		offers "tbisect --<TAB>: the options of the $mode" "$want" tbisect --
	else
		offers "tbisect $mode --<TAB>: the options of $mode" "$want" tbisect "$mode" --
	fi
done

# No option's argument is completed with options.
awk -F '\t' '$1 == "option" && $3 != "" { print $2 }' "$T/tables.tsv" >"$T/with-arg"
check_that "tbisect --completion tsv has options with an argument" test -s "$T/with-arg"
while read -r o; do
	if complete_line tbisect check "$o" "" | grep -q -e '^--' -e '^!'; then
		not_ok "tbisect check $o <TAB> offers no option"
	else
		ok "tbisect check $o <TAB> offers no option"
	fi
done <"$T/with-arg"

tap_done
