#!/bin/sh
# The iteration loop in a real terminal (tmux): the walkthrough chain's
# candidate is rewritten in place under a view opened with --watch; each
# pass is reloaded once the file has gone quiet, the banner says how the
# first divergence moved (regressions and stuck fixes in the error style),
# cells whose status changed are marked, the cursor and the open screen
# stay, a broken or half-written file keeps the last good view; the
# history survives a restart and a corrupt history file; r reloads by
# hand; a reload whose inputs are the last pass's records no pass;
# nothing is written into the trees.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_setup
JSONQ=$(cd "$top_builddir" && pwd)/tests/jsonq
W=$top_builddir/samples/walkthrough
[ -f "$W/pass4/activations.safetensors" ] || bail_out "$W: the build did not generate the walkthrough"
W=$(cd "$W" && pwd)
cd "$TAP_TMP" || bail_out "cd failed"
cp -R "$W/ref" ref && mkdir port || bail_out "cannot copy the reference"
F=port/activations.safetensors

# dump N: the port writes the dump of walkthrough pass N over the candidate,
# in place (a newer mtime even when the bytes are the last pass's).
dump() {
	rewrite "$F" <"$W/pass$1/activations.safetensors"
}

# styled TEXT STYLE: the screen line holding TEXT is drawn with SGR
# attribute STYLE (1: bold, 31: red) before it (a test for expect_escapes).
styled() {
	printf '%s' "$TUI_SCREEN" | grep -F -- "$1" | grep -q "\[\([0-9;]*;\)\?$2[;m]"
}

# not_red TEXT: the screen has a line holding TEXT, with no red (SGR 31) on it.
not_red() {
	_line=$(printf '%s' "$TUI_SCREEN" | grep -F -- "$1") || return 1
	case $_line in *31m*) return 1 ;; esac
}

history_file() {
	ls "$XDG_STATE_HOME"/tbisect/pair-*.json 2>/dev/null | head -n 1
}

ref_sum=$(cksum ref/* | sort)
dump 1
tui_start w 80 24 -- --watch ref port
expect_screen w "load: pass 1 recorded, in the banner" "pass 1: first divergence L0.attn"
expect_screen w "load: first divergence L0.attn" "first divergence L0.attn pos 1"
keys w f j
expect_screen w "the cursor is moved to L1.attn" "L1.attn diverged"

# --- a rewritten candidate is picked up once it has gone quiet ---
dump 2
expect_screen w "fix 1: the banner says the divergence moved later by 2 cells" \
	"pass 2: first divergence L0.attn -> L0.mlp (later by 2 cells)"
expect_screen w "fix 1: header follows" "first divergence L0.mlp pos 0"
expect_screen w "fix 1: the cursor stays on L1.attn" "L1.attn diverged: rel_l2 0.153"
expect_line w "fix 1: L0.attn and L0.mlp_norm marked as changed" '^L0 +\. 0\.0e\+00 \*\. 0\.0e\+00 \*\. 0\.0e\+00  X 1\.8e-01'
expect_screen w "fix 1: the banner counts the changed cells" "(later by 2 cells)  (* 2 changed)"
expect_screen w "fix 1: the reload is announced" "reloaded: 23 cells, 2 changed status (marked *)"
expect_escapes w "fix 1: changed cells are underlined" "no underlined changed cell" \
	has_line '(\[|;)4m[^*]*\*\. 0\.0e\+00'

# --- the open screen stays: the detail of L0.mlp follows into the new pass ---
keys w f Enter
expect_screen w "the detail of L0.mlp is open" "L0.mlp  diverged: rel_l2 0.178"
dump 3
expect_screen w "fix 2: the detail stays open and shows the new numbers" "L0.mlp  match: every element within allclose"
expect_screen w "fix 2: the detail's status line carries the movement" "pass 3: first divergence L0.mlp -> logits (later by 18 cells)"
keys w Escape
expect_screen w "fix 2: back on the heatmap" ".match<=1e-04"
expect_screen w "fix 2: the heatmap's banner" "pass 3: first divergence L0.mlp -> logits (later by 18 cells)"
expect_screen w "fix 2: only the logits diverge" "first divergence logits"

# --- a regression, then a fix that did not take ---
dump 2
expect_screen w "regression: flagged EARLIER" "pass 4: first divergence logits -> L0.mlp (EARLIER by 18 cells)"
expect_screen w "regression: the advice" "revert it and re-read the reference forward"
expect_escapes w "regression: the banner is in the error style (bold red)" "not drawn in red" styled "EARLIER by 18" 31
# The same bytes written again: reloaded, but the inputs are pass 4's, so no
# pass (a fix that did not take, "stuck", is history.sh's: the walkthrough
# has no two dumps with one first divergence).
dump 2
expect_screen w "same bytes rewritten: reloaded" "reloaded: 23 cells, none changed status"
check_that "same bytes rewritten: no pass recorded" test "$("$JSONQ" "$(history_file)" 'passes.#')" = 4

# --- a broken file keeps the last good view, with the error ---
head -c 1000 "$W/pass3/activations.safetensors" | rewrite "$F"
expect_screen w "broken file: the error is shown" "reload failed, showing the last good view: port/activations.safetensors:"
expect_screen w "broken file: the status line points to it, not repeats it" "reload failed: the last good view stays (the error is under the grid)"
expect_screen w "broken file: and what is wrong with it" "safetensors: header length 1936 runs past the end of the file"
expect_screen w "broken file: the last good view stays" "first divergence L0.mlp pos 0"
expect_at w "broken file: the header says the verdict is the last good one, and the reload failed" 1 \
	'^tbisect  DIVERGED  \(last good\) RELOAD FAILED  first divergence L0\.mlp'
expect_screen w "broken file: the last pass stays in the banner" "pass 4: first divergence logits -> L0.mlp"
keys w f Enter
expect_screen w "broken file: the detail is not re-read from the changed file" "the dump files changed since this view read them"
keys w Escape

# --- a file still being written is waited for ---
mkfifo go || bail_out "mkfifo failed"
# That the state stays "writing" however long the writer takes is
# test_watch's (it sets the clock); here, what the view does meanwhile.
{
	head -c 5000 "$W/pass4/activations.safetensors"
	read -r _ <go
	tail -c +5001 "$W/pass4/activations.safetensors"
} | rewrite "$F" &
writer=$!
expect_screen w "half-written: the view waits for the writer" "waiting for port/activations.safetensors to be written"
expect_at w "half-written: the status line names the file" 24 '^waiting for port/activations\.safetensors to be written$'
check_that "half-written: no pass recorded meanwhile" test "$("$JSONQ" "$(history_file)" 'passes.#')" = 4
echo done >go
wait "$writer"
expect_screen w "written: the port matches" "pass 5: first divergence L0.mlp -> none: nothing diverges (verdict match)"
expect_screen w "written: the error is gone, verdict MATCH" "tbisect  MATCH  no cell diverged"
expect_escapes w "matched: the banner is not drawn in red" "drawn in red" not_red "nothing diverges"

# --- the reference is watched too; rewritten as it was, it is no new input ---
cp ref/model.norm.npy ref/model.norm.npy.new && mv ref/model.norm.npy.new ref/model.norm.npy
expect_screen w "a rewritten reference reloads too" "reloaded: 23 cells, none changed status"
check_that "the same reference again: no pass recorded" test "$("$JSONQ" "$(history_file)" 'passes.#')" = 5
keys w q
expect_clean_exit w "quit: exit 0 (the port matches)" 0

check_that "nothing was written into the reference" test "$(cksum ref/* | sort)" = "$ref_sum"
check_that "nothing was written into the candidate tree" test "$(ls -A port)" = activations.safetensors
check_that "the candidate is the last dump as written" cmp -s "$F" "$W/pass4/activations.safetensors"

# --- the history survives a restart; H and :history show it ---
# A restart on the same dumps records nothing: the history still ends at pass 5.
tui_start h 80 24 -- ref port
expect_screen h "restart: the port still matches" "tbisect  MATCH  no cell diverged"
keys h H
expect_screen h "H: the history screen" "history: 5 passes of this pair, newest first"
expect_line h "H: newest first, pass 5 matched" '^ +5 [0-9-]+ [0-9:]+ match +none +matched +-$'
expect_line h "H: pass 4 moved earlier, with its cause" '^ +4 [0-9-]+ [0-9:]+ diverged +L0\.mlp +earlier -18 +mlp-activation$'
expect_screen h "H: pass 4's note" "pass 4: first divergence logits -> L0.mlp (EARLIER by 18 cells)"
keys h G
expect_line h "H: G scrolls to the oldest pass" '^ +1 [0-9-]+ [0-9:]+ diverged +L0\.attn +first +rope-style$'
keys h q
expect_screen h "q leaves the history for the heatmap" ".match<=1e-04"

# --- r reloads by hand; breaking a matching port is flagged ---
dump 1
keys h r
expect_screen h "r: reloaded by hand" "pass 6: nothing diverged in pass 5, now the first divergence is L0.attn"
expect_escapes h "r: a broken port is in the error style" "not drawn in red" styled "nothing diverged in pass 5" 31
keys h : "history" Enter
expect_screen h ":history opens the history" "history: 6 passes of this pair, newest first"
keys h q

# --- a `tbisect check` of the same dump in between: the banner keeps its movement ---
dump 2
expect_exit 1 "a check of the next dump records pass 7" "$TBISECT" check ref port
keys h r
expect_screen h "r after that check: the banner shows how the divergence moved" "pass 7: first divergence L0.attn -> L0.mlp (later by 2 cells)"
keys h H
expect_screen h "r after that check: the view's reload of the same dump is no pass" "history: 7 passes of this pair, newest first"
keys h q

# --- :history clear forgets the passes; the next reload is pass 1 ---
keys h : "history bogus" Enter
expect_screen h ":history with an unknown word: its usage" "usage: history [clear]"
keys h : "hist clear" Enter
expect_screen h ":history clear: said" "history cleared: the next load or reload with new inputs is pass 1"
check_that ":history clear: the pair's file is gone" test -z "$(history_file)"
keys h H
expect_screen h ":history clear: no pass left" "history: 0 passes of this pair, newest first"
keys h q r
expect_screen h "r after :history clear: pass 1" "pass 1: first divergence L0.mlp"
check_that "r after :history clear: one pass in the file" test "$("$JSONQ" "$(history_file)" 'passes.#')" = 1
keys h q
expect_clean_exit h "quit after r: exit 1" 1

# --- a corrupt history file is set aside with a message ---
hf=$(history_file)
printf '{"passes": [{"pass": ' >"$hf"
tui_start c 100 24 -- ref port
expect_screen c "corrupt history: a message" "history file $hf is corrupt"
expect_screen c "corrupt history: starts again at pass 1" "pass 1: first divergence L0.mlp"
keys c H
expect_screen c "corrupt history: the history screen has the warning" "warning: history file"
expect_screen c "corrupt history: set aside" "set aside as"
keys c q
check_that "corrupt history: the bad file is kept aside" sh -c 'ls "$1".corrupt-* >/dev/null' x "$hf"
keys c q
expect_clean_exit c "quit after a corrupt history" 1
check_that "corrupt history: a new file with one pass" test "$("$JSONQ" "$hf" 'passes.#')" = 1

# --- --no-history: the banner still moves, nothing is recorded ---
tui_start n 80 24 -- --no-history ref port
expect_screen n "--no-history: the banner counts this session's passes" "pass 1: first divergence L0.mlp"
dump 1
keys n r
expect_screen n "--no-history: r, a regression" "pass 2: first divergence L0.mlp -> L0.attn (EARLIER by 2 cells)"
dump 2
keys n r
expect_screen n "--no-history: r, later again" "pass 3: first divergence L0.attn -> L0.mlp (later by 2 cells)"
keys n H
expect_screen n "--no-history: the history screen says it is not kept" "not kept (--no-history): the passes of this session only"
keys n q q
expect_clean_exit n "quit after --no-history" 1
check_that "--no-history: the history file is untouched" test "$("$JSONQ" "$hf" 'passes.#')" = 1

tap_done
