#!/bin/sh
# mcp: tbisect mcp driven with hand-written JSON-RPC lines on a demo pair
# (RoPE theta bug, replay taps): the handshake and the stateless revision,
# every tool against check --json of the same pair, the resources, and the
# bad input of tbisect(1) MCP SERVER: parse errors, unknown methods and
# tools, bad params, a missing pair, tree or cell, a line over 1 MB, input
# cut short.  Then a live session through a fifo: the candidate re-dumped
# between two calls is compared again, and a cancelled comparison sends
# progress and no answer.  Standard output carries JSON-RPC lines only.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

"$MKDEMO" --replay --bug rope-theta "$T/ref" "$T/cand" >/dev/null
rc=0
"$TBISECT" check --json --no-history "$T/ref" "$T/cand" >"$T/check.json" || rc=$?
[ "$rc" -eq 1 ] || bail_out "check on the demo pair exited $rc"
check_get() { "$JSONQ" "$T/check.json" "$1"; }

# serve: run tbisect mcp on standard input; its output in $T/out, status in $TAP_RC.
serve() {
	TAP_RC=0
	"$TBISECT" mcp >"$T/out" 2>"$T/err" || TAP_RC=$?
}
# answer ID: the response to request ID (one line) in $TAP_OUT, for json_is.
answer() {
	grep "^{\"jsonrpc\":\"2.0\",\"id\":$1," "$T/out" >"$TAP_OUT" || : >"$TAP_OUT"
}
call() { # ID TOOL ARGS: a tools/call line
	printf '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s}}\n' "$1" "$2" "$3"
}
# absent PATH: the answer in $TAP_OUT has no PATH.
absent() { ! "$JSONQ" "$TAP_OUT" "$1" >/dev/null 2>&1; }
# only_protocol: every line of $T/out is a JSON-RPC 2.0 message.
only_protocol() {
	while IFS= read -r l; do
		[ "$(printf '%s' "$l" | "$JSONQ" - jsonrpc 2>/dev/null)" = 2.0 ] || return 1
	done <"$T/out"
}

P='{"pair":"p1"}'
touch "$T/before"
sleep 0.01
{
	echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}'
	echo '{"jsonrpc":"2.0","method":"notifications/initialized"}'
	echo '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
	call 3 open_pair "{\"ref\":\"$T/ref\",\"cand\":\"$T/cand\"}"
	call 4 first_divergence "$P"
	call 5 cells '{"pair":"p1","limit":200}'
	call 7 causes "$P"
	call 8 replay '{"pair":"p1","cell":"L0.attn.q_rope"}'
	call 9 cells '{"pair":"p1","limit":3}'
	call 10 cells '{"pair":"p1","limit":3,"cursor":"3"}'
	call 11 cells '{"pair":"p1","filter":{"status":"diverged"}}'
	call 12 suggest_map "$P"
	call 13 compare_passes "$P"
	call 14 compare_passes '{"pair":"p1","record":true}'
	call 15 open_pair "{\"ref\":\"$T/ref\",\"cand\":\"$T/cand\"}"
	echo '{"jsonrpc":"2.0","id":16,"method":"resources/templates/list"}'
	echo '{"jsonrpc":"2.0","id":17,"method":"resources/read","params":{"uri":"tbisect://pair/p1/cell/L0.attn"}}'
	echo '{"jsonrpc":"2.0","id":18,"method":"resources/list"}'
	echo '{"jsonrpc":"2.0","id":19,"method":"ping"}'
} | serve
expect_rc() { if [ "$TAP_RC" -eq "$1" ]; then ok "$2"; else not_ok "$2" "exit status $TAP_RC"; fi; }
expect_rc 0 "the server exits 0 when its input ends"
check_that "... its output is JSON-RPC lines only" only_protocol
check_that "... nothing on stderr" test ! -s "$T/err"
check_that "... nothing written in either tree" test -z "$(find "$T/ref" "$T/cand" -newer "$T/before")"
answer 1
json_is "initialize answers revision 2025-11-25" result.protocolVersion 2025-11-25
json_is "... with the tools capability" result.capabilities.tools '{}'
json_is "... and its name" result.serverInfo.name tbisect
answer 2
json_is "tools/list lists the eight tools" result.tools.# 8
json_is "... open_pair first" result.tools.0.name open_pair
json_is "... compare_passes last" result.tools.7.name compare_passes
json_is "... each with an output schema" result.tools.4.outputSchema.type object
json_is "... read-only tools say so" result.tools.1.annotations.readOnlyHint true
json_is "... recording a pass is not read-only" result.tools.7.annotations.readOnlyHint false
answer 3
json_is "open_pair gives the pair id" result.structuredContent.pair p1
json_is "... the verdict of check --json" result.structuredContent.verdict "$(check_get verdict)"
json_is "... its coverage" result.structuredContent.coverage.paired "$(check_get coverage.paired)"
check_that "... is no error" absent result.isError
text=$("$JSONQ" "$TAP_OUT" result.content.0.text)
check_that "... the same JSON as text" test "$text" = "$("$JSONQ" "$TAP_OUT" result.structuredContent)"
answer 4
json_is "first_divergence: the cell of check --json" result.structuredContent.first_divergence.cell \
	"$(check_get first_divergence.cell)"
json_is "... its first bad position" result.structuredContent.first_divergence.first_bad_position \
	"$(check_get first_divergence.first_bad_position)"
json_is "... the origin" result.structuredContent.origin.cell "$(check_get origin.cell)"
json_is "... the top cause" result.structuredContent.causes.0.id "$(check_get causes.0.id)"
json_is "... at most three causes" result.structuredContent.causes_total "$(check_get causes.#)"
json_is "... the tolerance" result.structuredContent.tolerance.diverge "$(check_get tolerance.diverge)"
check_that "... no per-position arrays" absent result.structuredContent.first_divergence.pos_rel_l2
json_is "... but the profile summarised" result.structuredContent.first_divergence.profile.bad_runs.0 '[1,15]'
answer 5
json_is "cells: the grid of check --json, in its order" result.structuredContent.total "$(check_get cells.#)"
json_is "... cell 9's status" result.structuredContent.cells.9.status "$(check_get cells.9.status)"
json_is "... and rel_l2" result.structuredContent.cells.9.rel_l2 "$(check_get cells.9.rel_l2)"
cell9=$("$JSONQ" "$TAP_OUT" result.structuredContent.cells.9.cell)
answer 7
json_is "causes: the ranked causes of check --json" result.structuredContent.causes.0.id "$(check_get causes.0.id)"
json_is "... the top one confirmed by replay" result.structuredContent.causes.0.confirmed.variant \
	"$(check_get causes.0.confirmed.variant)"
json_is "... the replay of the first divergence" result.structuredContent.replay.tried true
answer 8
json_is "replay: the variant that reproduces the candidate" result.structuredContent.replay.cause rope-theta
json_is "... no tap missing to confirm it" result.structuredContent.dump_to_confirm.# 0
answer 9
json_is "cells pages: the next cursor" result.structuredContent.next_cursor 3
answer 10
json_is "... the next page starts there" result.structuredContent.cells.0.tap "$(check_get cells.3.tap)"
answer 11
json_is "... filtered by status" result.structuredContent.total "$(check_get counts.diverged)"
answer 12
json_is "suggest_map: nothing to map on a pair that pairs" result.structuredContent.map.rules.# 0
answer 13
json_is "compare_passes records nothing unless asked" result.structuredContent.recorded null
answer 14
json_is "... record: true records a pass" result.structuredContent.recorded true
json_is "... and says where the divergence stands" result.structuredContent.history.0.first_divergence \
	"$(check_get first_divergence.cell)"
answer 15
json_is "open_pair of the same trees gives the same id" result.structuredContent.pair p1
answer 16
json_is "resources: cells by URI template" result.resourceTemplates.0.uriTemplate 'tbisect://pair/{pair}/cell/{cell}'
answer 17
json_is "... a cell read as a resource" result.contents.0.uri tbisect://pair/p1/cell/L0.attn
answer 18
json_is "... and listed, 50 at a time" result.resources.# 50
json_is "... with a cursor to the next page" result.nextCursor 50

# explain_cell of that cell, in a session of its own
{ call 3 open_pair "{\"ref\":\"$T/ref\",\"cand\":\"$T/cand\"}"; call 6 explain_cell "{\"pair\":\"p1\",\"cell\":\"$cell9\"}"; } | serve
answer 6
json_is "explain_cell: the keys and values of check --json's cell" result.structuredContent.rel_l2 "$(check_get cells.9.rel_l2)"
json_is "... its worst element" result.structuredContent.worst.index "$(check_get cells.9.worst.index)"
json_is "... five worst channels" result.structuredContent.worst_channels.# 5
json_is "... the profile's positions" result.structuredContent.profile.positions "$(check_get cells.9.positions)"

# --- the stateless revision: no handshake, _meta on every request ---
M='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
{
	echo "{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"server/discover\",\"params\":{$M}}"
	echo "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{$M,\"name\":\"open_pair\",\"arguments\":{\"ref\":\"$T/ref\",\"cand\":\"$T/cand\"}}}"
} | serve
grep '"id":"d"' "$T/out" >"$TAP_OUT" || :
json_is "server/discover: the stateless revision" result.supportedVersions.0 2026-07-28
json_is "... a complete result" result.resultType complete
json_is "... the capabilities" result.capabilities.resources '{}'
answer 2
json_is "a tool call without a handshake is answered" result.structuredContent.pair p1
json_is "... its result complete" result.resultType complete

# --- the command line's options are every pair's defaults ---
{
	call 1 open_pair "{\"ref\":\"$T/ref\",\"cand\":\"$T/cand\"}"
	call 2 open_pair "{\"ref\":\"$T/ref\",\"cand\":\"$T/cand\",\"tol\":{\"atol\":0.5}}"
} | "$TBISECT" mcp --diverge 0.75 >"$T/out"
answer 1
json_is "tbisect mcp --diverge: the pairs' tolerance" result.structuredContent.tolerance.diverge 0.75
answer 2
json_is "... which open_pair's tol refines" result.structuredContent.tolerance.atol 0.5
json_is "... keeping the rest" result.structuredContent.tolerance.diverge 0.75
json_is "... another pair" result.structuredContent.pair p2

# --- cells no comparison could read again: a sketch, a cell missing on one side ---
"$TBISECT" sketch "$T/ref" -o "$T/ref.tbsk" >/dev/null 2>&1
"$TBGEN" --layers 2 --sub --bug missing@L1.attn.q "$T/miss/ref" "$T/miss/cand" >/dev/null
{
	call 1 open_pair "{\"ref\":\"$T/ref.tbsk\",\"cand\":\"$T/cand\",\"heads\":8,\"kv_heads\":2}"
	call 2 explain_cell '{"pair":"p1","cell":"L0.attn.q"}'
	call 3 replay '{"pair":"p1","cell":"L0.attn.q_rope"}'
	call 4 open_pair "{\"ref\":\"$T/miss/ref\",\"cand\":\"$T/miss/cand\",\"heads\":4}"
	call 5 explain_cell '{"pair":"p2","cell":"L1.attn.q"}'
	call 6 replay '{"pair":"p2","cell":"L1.attn.q"}'
	call 7 causes '{"pair":"p2","cell":"L1.attn.q"}'
} | serve
expect_rc 0 "a sketch and a missing cell: the server exits 0"
check_that "... its output is JSON-RPC lines only" only_protocol
answer 2
json_is "explain_cell of a sketched cell answers" result.structuredContent.cell L0.attn.q
answer 3
json_is "... replay of a sketched cell too" result.structuredContent.cell L0.attn.q_rope
answer 5
json_is "explain_cell of a cell missing on one side" result.structuredContent.status missing
answer 6
json_is "... its replay" result.structuredContent.replay.tried false
answer 7
json_is "... its causes" result.structuredContent.cell L1.attn.q

# --- bad input: protocol errors and tool errors, never a crash ---
big=$T/big.json
awk 'BEGIN { printf "{\"jsonrpc\":\"2.0\",\"id\":30,\"method\":\"ping\",\"params\":{\"x\":\""; for (i = 0; i < 1100; i++) printf "%01024d", 0; print "\"}}" }' >"$big"
{
	echo 'this is not json'
	call 20 open_pair "{\"ref\":\"$T/ref\",\"cand\":\"$T/cand\"}"
	echo '{"jsonrpc":"2.0","id":21,"method":"no/such"}'
	echo '{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"no_such_tool"}}'
	echo '{"jsonrpc":"2.0","id":23,"method":"tools/call","params":[1]}'
	echo '{"id":24,"method":"ping"}'
	call 25 first_divergence '{"pair":"p9"}'
	call 26 open_pair "{\"ref\":\"$T/no-such-tree\",\"cand\":\"$T/cand\"}"
	call 27 open_pair "{\"ref\":\"$T/ref\",\"cand\":\"$T/cand\",\"heads\":\"eight\"}"
	call 28 explain_cell '{"pair":"p1","cell":"L99.attn"}'
	call 29 cells '{"pair":"p1","cursor":"nonsense"}'
	cat "$big"
	echo '{"jsonrpc":"2.0","id":31,"method":"ping"}'
	echo '{"jsonrpc":"2.0","id":32,"method":"resources/read","params":{"uri":"tbisect://pair/p7/cell/L0.attn"}}'
	printf '{"jsonrpc":"2.0","id":33,"method":"pi'
} | serve
expect_rc 0 "bad input: the server exits 0"
check_that "... writes JSON-RPC lines only" only_protocol
grep '"code":-32700' "$T/out" >"$TAP_OUT" || :
json_is "a line that is not JSON: parse error" error.code -32700
json_is "... answered with a null id" id null
answer 21
json_is "an unknown method: method not found" error.code -32601
answer 22
json_is "an unknown tool: invalid params" error.code -32602
answer 23
json_is "params that are no object: invalid params" error.code -32602
answer 24
json_is "no jsonrpc member: invalid request" error.code -32600
answer 25
json_is "a pair that is not open: a tool error" result.isError true
check_that "... naming the pair" grep -q "no pair 'p9'" "$TAP_OUT"
answer 26
json_is "a tree that does not exist: a tool error" result.isError true
check_that "... naming the path" grep -q "no-such-tree" "$TAP_OUT"
answer 27
json_is "an argument of the wrong type: a tool error" result.isError true
check_that "... naming the argument" grep -q "argument 'heads'" "$TAP_OUT"
answer 28
json_is "an unknown cell: a tool error" result.isError true
check_that "... naming the cell" grep -q "L99.attn" "$TAP_OUT"
answer 29
json_is "a cursor it never gave: a tool error" result.isError true
check_that "a request over 1 MB: invalid request" grep -q 'larger than 1 MB' "$T/out"
answer 30
check_that "... and not run" test ! -s "$TAP_OUT"
answer 31
json_is "... the next request is answered" result '{}'
answer 32
json_is "a resource of a pair never opened: not found" error.code -32002
answer 33
check_that "a request cut short by the end of input is dropped" test ! -s "$TAP_OUT"

# --- a live session: the candidate re-dumped between calls; a cancelled comparison ---
"$TBGEN" --layers 8 --seq 256 --hidden 256 --sub "$T/big/ref" "$T/big/cand" >/dev/null
mkfifo "$T/in"
"$TBISECT" mcp <"$T/in" >"$T/out" 2>"$T/err" &
server=$!
exec 3>"$T/in"
has_answer() { grep -q "^{\"jsonrpc\":\"2.0\",\"id\":$1," "$T/out"; }
call 1 open_pair "{\"ref\":\"$T/ref\",\"cand\":\"$T/cand\"}" >&3
wait_until has_answer 1 || bail_out "no answer to open_pair"
answer 1
json_is "live: the pair diverges" result.structuredContent.verdict diverged
"$MKDEMO" --replay --cand-only "$T/cand" >/dev/null
call 2 first_divergence "$P" >&3
wait_until has_answer 2 || bail_out "no answer to first_divergence"
answer 2
json_is "... a candidate re-dumped without the bug is compared again" result.structuredContent.verdict match
json_is "... nothing diverges" result.structuredContent.first_divergence null
# one write: the request and its cancellation arrive together
{
	printf '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":"tok"},"name":"open_pair","arguments":{"ref":"%s","cand":"%s"}}}\n' "$T/big/ref" "$T/big/cand"
	echo '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"test"}}'
	echo '{"jsonrpc":"2.0","id":4,"method":"ping"}'
} >&3
wait_until has_answer 4 || bail_out "no answer to the ping after a cancellation"
answer 3
check_that "a cancelled request is not answered" test ! -s "$TAP_OUT"
check_that "... it sent progress with the client's token" grep -q '"method":"notifications/progress","params":{"progressToken":"tok"' "$T/out"
call 5 first_divergence '{"pair":"p2"}' >&3
wait_until has_answer 5 || bail_out "no answer to first_divergence"
answer 5
json_is "... and opened no pair" result.isError true
exec 3>&-
rc=0
wait "$server" || rc=$?
check_that "the server exits 0 when its input closes" test "$rc" -eq 0
check_that "... its output is JSON-RPC lines only" only_protocol
tap_done
