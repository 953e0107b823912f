#!/bin/sh
# README's "Samples" section and doc/samples.md, which it points to, are
# true: the table of bugs says what `mkdemo --expect` says, and their
# commands, README's first, run as written from a copy of the build
# directory, with the output their comments announce.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

sed -n '/^Samples$/,/^Dumping your own models$/p' "$top_srcdir/README" >"$T/samples"
check_that "README has a Samples section" test -s "$T/samples"
check_that "README's Samples points to doc/samples.md" grep -q 'doc/samples\.md' "$T/samples"
cat "$top_srcdir/doc/samples.md" >>"$T/samples"

# The table: "    NAME   CELL[, CELL with --sub | , CELL at --seq 128]", or
# for a bug of the MoE model "    NAME   CELL with --moe[, CELL with --moe --sub]".
"$MKDEMO" --list | awk '{print $1}' >"$T/bugs"
while read -r bug; do
	row=$(grep -E "^ {2,4}$bug {2,}" "$T/samples" | sed -E "s/^ *$bug +//")
	want=$("$MKDEMO" --expect "$bug")
	sub=$("$MKDEMO" --expect "$bug" --sub)
	long=$("$MKDEMO" --expect "$bug" --seq 128)
	line=$want
	[ "$sub" != "$want" ] && line="$want, $sub with --sub"
	[ "$long" != "$want" ] && line="$want, $long at --seq 128"
	moe=$("$MKDEMO" --expect "$bug" --moe)
	moesub=$("$MKDEMO" --expect "$bug" --moe --sub)
	if [ "$want" = match ] && [ "$moe" != match ]; then
		line="$moe with --moe"
		[ "$moesub" != "$moe" ] && line="$line, $moesub with --moe --sub"
	fi
	if [ "$row" = "$line" ]; then ok "README table: $bug $line"; else not_ok "README table: $bug" "README says '$row', mkdemo --expect '$line'"; fi
done <"$T/bugs"

# The commands (4-space indented), run in a copy of the build directory.
bin=$(cd "$top_builddir" && pwd)
mkdir -p "$T/build/samples"
ln -s "$bin/tbisect" "$T/build/tbisect"
ln -s "$bin/samples/mkdemo" "$T/build/samples/mkdemo"
cp -R "$top_builddir/samples/pair" "$top_builddir/samples/walkthrough" "$T/build/samples/"
cwd=$T
sed -n 's/^    \(cd build\|\.\/tbisect .*\|samples\/mkdemo .*\)$/\1/p' "$T/samples" >"$T/cmds"
check_that "README's Samples and doc/samples.md have commands" test "$(wc -l <"$T/cmds")" -ge 8
while read -r cmd; do
	case $cmd in
	"cd "*)
		# Run as written; the directory it leaves is where the next commands run.
		TAP_RC=0
		(cd "$cwd" && sh -c "$cmd && pwd") </dev/null >"$TAP_OUT" 2>"$TAP_ERR" || TAP_RC=$?
		if [ "$TAP_RC" -eq 0 ] && [ ! -s "$TAP_ERR" ] && [ -x "$(cat "$TAP_OUT")/tbisect" ]; then
			cwd=$(cat "$TAP_OUT")
			ok "README: $cmd (to the build directory, tbisect there)"
		else
			not_ok "README: $cmd" "exit status $TAP_RC, or no tbisect in $(cat "$TAP_OUT")"
			diag_file "$TAP_ERR"
		fi
		continue
		;;
	esac
	says=$(printf '%s\n' "$cmd" | sed -n 's/.*# \(first divergence: .*\|verdict: .*\)$/\1/p')
	# The exit status the comment implies; a check without one may find either.
	case $cmd:$says in
	*:"first divergence: "*) codes=1 ;;
	*:"verdict: "*) codes=0 ;;
	"./tbisect check "*) codes="0 1" ;;
	*) codes=0 ;;
	esac
	TAP_RC=0
	(cd "$cwd" && sh -c "$cmd") </dev/null >"$TAP_OUT" 2>"$TAP_ERR" || TAP_RC=$?
	case " $codes " in
	*" $TAP_RC "*) exited_as_said=1 ;;
	*) exited_as_said=0 ;;
	esac
	if [ "$exited_as_said" = 0 ] || [ -s "$TAP_ERR" ]; then
		not_ok "README: $cmd" "exit status $TAP_RC (expected $codes), or output on stderr"
		diag_file "$TAP_ERR"
	elif [ -n "$says" ] && ! grep -q "^$says\$" "$TAP_OUT"; then
		not_ok "README: $cmd" "output does not say '$says'"
	else
		ok "README: $cmd"
	fi
done <"$T/cmds"

tap_done
