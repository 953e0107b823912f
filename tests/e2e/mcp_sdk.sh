#!/bin/sh
# mcp_sdk: tbisect mcp through the official TypeScript SDK's stdio client
# (@modelcontextprotocol/sdk, tests/e2e/mcp_sdk.mjs): the tool list, each
# tool's answer against check --json of the demo pair, the resources, the
# error paths, progress and cancellation.  scripts/setup-deps.sh installs
# Node from Debian and the SDK from npm into build-aux/mcp-sdk (or set
# MCP_SDK_DIR to a folder holding node_modules/@modelcontextprotocol/sdk);
# without either the test is skipped.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

SDK=${MCP_SDK_DIR:-$top_srcdir/build-aux/mcp-sdk}/node_modules/@modelcontextprotocol/sdk
skip_all() {
	echo "1..0 # SKIP $1"
	TAP_ENDED=1
	exit 0
}
command -v node >/dev/null 2>&1 || skip_all "no node (scripts/setup-deps.sh installs Debian's nodejs)"
[ -f "$SDK/package.json" ] ||
	skip_all "no @modelcontextprotocol/sdk in $SDK (scripts/setup-deps.sh installs it from npm)"
node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)' ||
	skip_all "node $(node --version) is older than the SDK needs (18)"

"$MKDEMO" --replay --bug rope-theta "$T/ref" "$T/cand" >/dev/null
rc=0
"$TBISECT" check --json --no-history "$T/ref" "$T/cand" >"$T/check.json" || rc=$?
[ "$rc" -eq 1 ] || bail_out "check on the demo pair exited $rc"
"$TBGEN" --layers 8 --seq 256 --hidden 256 --sub "$T/big/ref" "$T/big/cand" >/dev/null
bin=$(cd "$(dirname "$TBISECT")" && pwd)/$(basename "$TBISECT")
tap_end_by node "$top_srcdir/tests/e2e/mcp_sdk.mjs" "$(cd "$SDK" && pwd)" "$bin" "$T/ref" "$T/cand" "$T/check.json" \
	"$T/big/ref" "$T/big/cand"
