#!/bin/sh
# mcp_size: tbisect mcp's answers fit an agent's context on deep models:
# 128 layers with sub-taps (tbgen, a fault at L120) and the 64-layer demo
# decoder with its replay taps (a RoPE bug from L0, so every cell after it
# differs).  Tokens are counted as bytes / 4 of the text the model reads;
# the summary answers stay under 2,000 tokens (first_divergence with its
# origin, top causes and coverage well under), detail under 10,000 (the
# size at which Claude Code warns), and no answer grows with the depth.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

"$TBGEN" --layers 128 --sub --seq 32 --hidden 64 --bug noise@L120.attn "$T/deep/ref" "$T/deep/cand" >/dev/null
"$MKDEMO" --layers 64 --replay --seq 64 --bug rope-style "$T/demo/ref" "$T/demo/cand" >/dev/null

call() { # ID TOOL ARGS
	printf '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s}}\n' "$1" "$2" "$3"
}
answer() {
	grep "^{\"jsonrpc\":\"2.0\",\"id\":$1," "$T/out" >"$TAP_OUT" || : >"$TAP_OUT"
}
# under ID LIMIT DESC: the text of answer ID is under LIMIT tokens (bytes / 4).
under() {
	answer "$1"
	_bytes=$("$JSONQ" "$TAP_OUT" result.content.0.text 2>/dev/null | wc -c)
	_tokens=$((_bytes / 4))
	if [ "$_bytes" -gt 1 ] && [ "$_tokens" -lt "$2" ]; then
		ok "$3: $_tokens tokens"
	else
		not_ok "$3: $_tokens tokens, limit $2" "$(head -c 300 "$TAP_OUT")"
	fi
}

for model in deep demo; do
	{
		call 1 open_pair "{\"ref\":\"$T/$model/ref\",\"cand\":\"$T/$model/cand\",\"heads\":8}"
		call 2 first_divergence '{"pair":"p1"}'
		call 3 causes '{"pair":"p1"}'
		call 4 cells '{"pair":"p1"}'
		call 5 cells '{"pair":"p1","filter":{"status":"bad"}}'
		call 6 compare_passes '{"pair":"p1","record":true}'
		call 7 suggest_map '{"pair":"p1"}'
		echo '{"jsonrpc":"2.0","id":9,"method":"tools/list"}'
		echo '{"jsonrpc":"2.0","id":10,"method":"resources/list"}'
	} >"$T/in"
	cell=$(
		"$TBISECT" mcp <"$T/in" | grep '"id":2,' | "$JSONQ" - result.structuredContent.first_divergence.cell
	)
	{
		cat "$T/in"
		call 8 explain_cell "{\"pair\":\"p1\",\"cell\":\"$cell\"}"
		call 11 explain_cell "{\"pair\":\"p1\",\"cell\":\"$cell\",\"detail\":true}"
		call 12 causes '{"pair":"p1","cell":"L1.mlp"}'
	} | "$TBISECT" mcp >"$T/out"
	answer 1
	json_is "$model: every tensor paired" result.structuredContent.coverage.paired \
		"$("$JSONQ" "$TAP_OUT" result.structuredContent.coverage.ref_tensors)"
	under 1 2000 "$model: open_pair"
	under 2 2000 "$model: first_divergence at $cell"
	under 3 2000 "$model: causes"
	under 4 2000 "$model: a page of cells"
	under 5 2000 "$model: a page of the cells that differ"
	under 6 2000 "$model: compare_passes"
	under 7 2000 "$model: suggest_map"
	under 8 2000 "$model: explain_cell"
	under 11 10000 "$model: explain_cell with detail"
	under 12 2000 "$model: causes of L1.mlp"
	answer 9
	_t=$(($(wc -c <"$TAP_OUT") / 4))
	check_that "$model: tools/list: $_t tokens" test "$_t" -lt 3000
	answer 10
	_t=$(($(wc -c <"$TAP_OUT") / 4))
	check_that "$model: a page of resources: $_t tokens" test "$_t" -lt 3000
done
tap_done
