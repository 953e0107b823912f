#!/bin/sh
# End to end: the pass history of the iteration loop (check --history and
# the JSON "history" array) over a chain of candidate dumps rewritten in place.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

# pass BUG...: rewrite the candidate with tbgen, then run check --history.
pass() {
	rm -rf "$T/cand"
	"$TBGEN" --layers 3 "$@" "$T/ref" "$T/cand" || bail_out "tbgen failed"
	run_cmd "$TBISECT" check --history "$T/ref" "$T/cand"
}

last_note() {
	grep '^  pass ' "$TAP_OUT" | tail -n 1
}

note_is() {
	_got=$(last_note)
	case "$_got" in
	*"$2"*) ok "$1" ;;
	*) not_ok "$1" "last pass line is '$_got', expected '$2'" ;;
	esac
}

pass --bug noise@L0.attn
note_is "pass 1 recorded" "pass 1: first divergence L0.attn"
pass --bug noise@L1.mlp
note_is "divergence moved later" "pass 2: first divergence L0.attn -> L1.mlp (later by 7 cells)"
# The same inputs again: nothing new to record, and the report says so.
run_cmd "$TBISECT" check --history "$T/ref" "$T/cand"
check_that "a re-run records no pass" test "$(grep -c '^  pass ' "$TAP_OUT")" -eq 2
check_that "a re-run says the inputs are the last pass's" grep -q '^  no new pass: the inputs are those of pass 2$' "$TAP_OUT"
# Both trees written again with the same bytes (new files, new mtimes): no change.
pass --bug noise@L1.mlp
check_that "identical bytes rewritten record no pass" test "$(grep -c '^  pass ' "$TAP_OUT")" -eq 2
# A new tolerance is a new input; the candidate did not change, so the port did not move.
run_cmd "$TBISECT" check --history --diverge 0.02 "$T/ref" "$T/cand"
note_is "a new tolerance: a pass, candidate unchanged" \
	"pass 3: candidate unchanged since pass 2 (the reference, the map or the tolerance changed); first divergence L1.mlp"
pass --bug noise@L1.mlp:0.5
note_is "changed candidate, same divergence: flagged" "pass 4: first divergence still L1.mlp although the candidate changed"
check_that "stuck pass carries the advice" grep -q 'revert and re-read the reference forward' "$TAP_OUT"
pass --bug noise@L0.mlp_norm
note_is "regression flagged" "pass 5: first divergence L1.mlp -> L0.mlp_norm (EARLIER by 6 cells)"
pass --bug precision
note_is "port matches" "pass 6: first divergence L0.mlp_norm -> none: nothing diverges (verdict close)"
pass --bug noise@L2.block
note_is "breaking a matching port is flagged" "pass 7: nothing diverged in pass 6, now the first divergence is L2.block"
check_that "history lists all seven passes" test "$(grep -c '^  pass ' "$TAP_OUT")" -eq 7

expect_exit 1 "JSON report carries the history" "$TBISECT" check --json "$T/ref" "$T/cand"
h=$(json_get 'history.#')
check_that "JSON history has the 7 passes, none added by the same inputs ($h)" test "$h" = 7
check_that "JSON history pass 2 moved later" test "$(json_get history.1.movement)" = later
check_that "JSON history pass 2 delta 7" test "$(json_get history.1.delta)" = 7
check_that "JSON history pass 3: candidate unchanged" test "$(json_get history.2.movement)" = unchanged
check_that "JSON history pass 5 moved earlier" test "$(json_get history.4.movement)" = earlier
check_that "JSON history keeps the top cause" test -n "$(json_get history.0.top_cause)"
check_that "JSON history: a pass carries its input digest" test "$(json_get history.6.input_digest | wc -c)" -eq 17

# A --no-history run at a new tolerance records nothing: the next run at
# the last pass's inputs finds them unchanged.
expect_exit 1 "--no-history" "$TBISECT" check --json --no-history --atol 2e-4 "$T/ref" "$T/cand"
check_that "--no-history: no history key" sh -c "! '$JSONQ' '$TAP_OUT' history >/dev/null"
run_cmd "$TBISECT" check --json "$T/ref" "$T/cand"
check_that "--no-history recorded nothing (7 passes)" test "$(json_get 'history.#')" = 7
expect_exit 2 "--history with --no-history is a usage error" "$TBISECT" check --history --no-history "$T/ref" "$T/cand"

# --- a corrupt history file is set aside, not fatal ---
f=$(ls "$XDG_STATE_HOME"/tbisect/pair-*.json)
printf '{"passes": [{"pass": "x"' >"$f"
expect_exit 1 "corrupt history: the check still runs" "$TBISECT" check --history "$T/ref" "$T/cand"
check_that "corrupt history: warned on stderr" grep -q '^tbisect: warning: history file .* is corrupt' "$TAP_ERR"
check_that "corrupt history: set aside" sh -c "ls '$XDG_STATE_HOME'/tbisect/ | grep -q 'corrupt-'"
note_is "corrupt history: starts again at pass 1" "pass 1: first divergence L2.block"

# --- bounded ---
# Each recorded check has new inputs: atol alternates between two values.
i=0 odd=0
while [ $i -lt 205 ]; do
	run_cmd "$TBISECT" check --no-history "$T/ref" "$T/cand"
	[ "$TAP_RC" -eq 1 ] || odd=$((odd + 1))
	run_cmd "$TBISECT" check --atol "$((2 + i % 2))e-4" "$T/ref" "$T/cand"
	[ "$TAP_RC" -eq 1 ] || odd=$((odd + 1))
	i=$((i + 1))
done
check_that "410 checks of the diverged pair, each exits 1 ($odd did not)" test "$odd" -eq 0
run_cmd "$TBISECT" check --json "$T/ref" "$T/cand"
check_that "history is bounded to 200 passes" test "$(json_get 'history.#')" = 200
check_that "oldest passes dropped, numbering kept" test "$(json_get history.199.pass)" = 207

# --- never inside a dump tree, never writes the trees ---
before=$(find "$T/ref" "$T/cand" -type f -exec cksum {} + | sort)
XDG_STATE_HOME=$T/cand/.state expect_exit 1 "state directory inside the candidate tree" "$TBISECT" check "$T/ref" "$T/cand"
check_that "history refused inside a dump tree" grep -q 'history not kept: the state directory .* is inside a dump tree' "$TAP_ERR"
after=$(find "$T/ref" "$T/cand" -type f -exec cksum {} + | sort)
check_that "dump trees unchanged" test "$before" = "$after"
check_that "nothing created in the candidate tree" test ! -e "$T/cand/.state"

# --- the walkthrough chain, each pass copied over one candidate path ---
W=$top_builddir/samples/walkthrough
[ -f "$W/pass4/activations.safetensors" ] || bail_out "$W: the build did not generate the walkthrough"
mkdir "$T/port"
# chain N EXIT NOTE: the port now holds walkthrough pass N; check --history must say NOTE.
chain() {
	cp "$W/pass$1/activations.safetensors" "$T/port/"
	expect_exit "$2" "chain pass $1: exit $2" "$TBISECT" check --history "$W/ref" "$T/port"
	note_is "chain pass $1: $3" "$3"
}
chain 1 1 "pass 1: first divergence L0.attn"
chain 2 1 "pass 2: first divergence L0.attn -> L0.mlp (later by 2 cells)"
chain 3 1 "pass 3: first divergence L0.mlp -> logits (later by 18 cells)"
chain 4 0 "pass 4: first divergence logits -> none: nothing diverges (verdict match)"
expect_exit 0 "chain: the JSON report" "$TBISECT" check --json "$W/ref" "$T/port"
check_that "chain: movements first, later, later, matched" test "$(json_get history.0.movement) $(json_get history.1.movement) $(json_get history.2.movement) $(json_get history.3.movement)" = "first later later matched"
check_that "chain: the walkthrough itself is untouched" cmp -s "$T/port/activations.safetensors" "$W/pass4/activations.safetensors"

# --- --history-reset: the tutorial replayed from the start ---
cp "$W/pass1/activations.safetensors" "$T/port/"
expect_exit 1 "replay: pass 1 of the walkthrough again" "$TBISECT" check --history "$W/ref" "$T/port"
note_is "replay without a reset: the old passes stay, and mislead" "pass 5: nothing diverged in pass 4, now the first divergence is L0.attn: the last change broke it"
expect_exit 1 "--history-reset" "$TBISECT" check --history --history-reset "$W/ref" "$T/port"
check_that "--history-reset: the history starts again with this run" test "$(grep -c '^  pass ' "$TAP_OUT")" -eq 1
note_is "--history-reset: pass 1" "pass 1: first divergence L0.attn"
expect_exit 1 "--history-reset --no-history" "$TBISECT" check --json --history-reset --no-history "$W/ref" "$T/port"
run_cmd "$TBISECT" check --json "$W/ref" "$T/port"
check_that "--history-reset --no-history: cleared, this run not recorded" test "$(json_get 'history.#')" = 1
expect_exit 2 "--history-reset belongs to check" "$TBISECT" --history-reset "$W/ref" "$T/port"

# --- files unchanged since the last pass are not read again for the digest ---
# A pass keeps a key of each tree's files (paths, inodes, sizes, times);
# files changed in the last 2 s get none (the file clock is coarse: they
# could change again within its tick and keep their key).
mkdir "$T/settled"
cp -R "$W/ref" "$T/settled/ref"
cp -R "$W/pass2" "$T/settled/cand"
last_pass() { run_cmd "$TBISECT" check --json "$T/settled/ref" "$T/settled/cand"; L=$(($(json_get 'history.#') - 1)); }
last_pass
check_that "fresh files: a pass" test "$L" -eq 0
check_that "fresh files: no file key, so their values are read every time" test -z "$(json_get history.0.cand_stat)"
# settled: no file of either tree changed in the last 3 seconds.
settled() { ! find "$T/settled" -type f -newerct "@$(($(date +%s) - 3))" | grep -q .; }
wait_until settled || bail_out "the copied trees never settled"
last_pass
key=$(json_get history.0.cand_stat)
check_that "settled files: no new pass, the pass gains their keys" test "$L" -eq 0 -a "${#key}" -eq 16
check_that "settled files: the reference's key too" test "$(json_get history.0.ref_stat | wc -c)" -eq 17
last_pass
check_that "a re-run: the same keys" test "$L" -eq 0 -a "$(json_get history.0.cand_stat)" = "$key"
touch "$T/settled/cand/activations.safetensors"
last_pass
check_that "touched, not changed: read again, no new pass, no key while fresh" test "$L" -eq 0 -a -z "$(json_get history.0.cand_stat)"
cp "$W/pass3/activations.safetensors" "$T/settled/cand/"
last_pass
check_that "changed: a new pass" test "$L" -eq 1
check_that "changed: the digest moved" test "$(json_get history.1.cand_digest)" != "$(json_get history.0.cand_digest)"

# --- a history an older tbisect wrote (digests of format 1) ---
# Its digests are not of this format: they are dropped, the files' keys
# stay, and a re-run on settled, unchanged files is "unchanged", never
# "stuck".
wait_until settled || bail_out "the candidate never settled"
last_pass
hist=$(grep -l "settled/cand" "$XDG_STATE_HOME"/tbisect/pair-*.json)
check_that "the settled pair has a history file" test -f "$hist"
sed -i -e '/"digest_format"/d' -e 's/_digest":\([[:space:]]*\)"[0-9a-f]*"/_digest":\1"0123456789abcdef"/' "$hist"
last_pass
check_that "old digests: a pass" test "$L" -eq 2
check_that "old digests, unchanged files: unchanged" test "$(json_get history.2.movement)" = unchanged
check_that "old digests: dropped" test -z "$(json_get history.1.cand_digest)"
check_that "old digests: this format's recorded" test "$(json_get history.2.cand_digest | wc -c)" -eq 17

tap_done
