#!/bin/sh
# Endurance of the interactive view, bounded by count: a --watch view
# reloads 1,000 times (r) while the candidate is rewritten between batches
# of reloads, so that passes are recorded too; its open file descriptors
# stay the same and its resident memory stays flat.  The view runs in
# script mode, its script a FIFO the test writes: each script step waits for
# the reload before it, and a :save-display file appearing is the event
# that says every reload before it is done.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_script_setup
T=$TAP_TMP
BATCHES=10
PER_BATCH=100
# Resident memory may grow by this much over the run (allocator slack), not
# by what 1,000 reloads of leaked trees would take.
RSS_SLACK_KB=4096

if [ ! -r /proc/self/status ]; then
	echo "1..0 # SKIP no /proc to read file descriptors and memory from"
	TAP_ENDED=1
	exit 0
fi

"$TBGEN" --bug noise@L1.attn "$T/ref" "$T/a" || bail_out "tbgen failed"
"$TBGEN" --bug noise@L2.mlp "$T/same-ref" "$T/b" || bail_out "tbgen failed"
cp -R "$T/a" "$T/cand"

mkfifo "$T/script"
# Under AddressSanitizer freed memory waits in a quarantine (256 MB) that
# would read as growth: none here (LeakSanitizer checks leaks at exit, and
# "nothing on stderr" below sees its report).
(cd "$T" && LINES=24 COLUMNS=80 TBISECT_SCRIPT="$T/script" \
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0" \
	exec "$TBISECT" --watch ref cand) \
	>"$T/out" 2>"$T/err" &
pid=$!
exec 3>"$T/script"
TAP_AT_EXIT='exec 3>&-; kill "$pid" 2>/dev/null || :'

# settle N: wait until the view has run every step written so far.
settle() {
	echo ":save-display $T/done-$1" >&3
	wait_until test -s "$T/done-$1"
}

fds() { ls "/proc/$pid/fd" | wc -l; }
rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$pid/status"; }

# reloads N: N r steps.
reloads() {
	_n=0
	while [ "$_n" -lt "$1" ]; do
		echo r >&3
		_n=$((_n + 1))
	done
}

# A first batch, so that what the loop allocates once is allocated.
reloads "$PER_BATCH"
settle warm || bail_out "the view did not run its first $PER_BATCH reloads"
fd0=$(fds)
rss0=$(rss_kb)

b=0
while [ "$b" -lt "$BATCHES" ]; do
	if [ $((b % 2)) -eq 0 ]; then src=b; else src=a; fi
	for f in "$T/$src"/*; do
		cp "$f" "$T/cand/$(basename "$f").new"
		mv "$T/cand/$(basename "$f").new" "$T/cand/$(basename "$f")"
	done
	reloads "$PER_BATCH"
	settle "$b" || bail_out "the view stopped after batch $b"
	b=$((b + 1))
done
fd1=$(fds)
rss1=$(rss_kb)
diag "$((BATCHES * PER_BATCH)) reloads: fds $fd0 -> $fd1, VmRSS $rss0 kB -> $rss1 kB"

check_that "1,000 reloads: the open file descriptors stay $fd0 ($fd1)" test "$fd1" -eq "$fd0"
check_that "1,000 reloads: resident memory stays flat ($rss0 kB -> $rss1 kB, slack $RSS_SLACK_KB kB)" \
	test "$rss1" -le $((rss0 + RSS_SLACK_KB))
check_that "the screen after the last batch is the view of a candidate" grep -q "first divergence" "$T/done-$((BATCHES - 1))"
exec 3>&-
rc=0
wait "$pid" || rc=$?
check_that "the script ends: the view exits with the batch status (1: diverged)" test "$rc" -eq 1
passes=$("$JSONQ" "$(ls "$XDG_STATE_HOME"/tbisect/pair-*.json | head -n 1)" 'passes.#')
check_that "a pass per rewrite of the candidate, none per reload of the same inputs ($passes)" test "$passes" -eq $((BATCHES + 1))
check_that "nothing on stderr" test ! -s "$T/err"

tap_done
