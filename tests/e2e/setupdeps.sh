#!/bin/sh
# setupdeps: scripts/setup-deps.sh counts a package as installed in every
# dpkg state that is configured but for a step another apt job still runs
# (triggers-pending, triggers-awaited, half-configured), so it never calls
# apt-get then; a package absent or only unpacked is installed.  dpkg-query
# and apt-get are stand-ins on PATH: nothing is installed.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP
SCRIPT=$top_srcdir/scripts/setup-deps.sh
mkdir "$T/bin"
# dpkg-query -W -f=FMT PKG: every package in state $STATE (python3-numpy in $NUMPY).
cat >"$T/bin/dpkg-query" <<'SH'
#!/bin/sh
for a; do p=$a; done
if [ "$p" = python3-numpy ]; then printf '%s' "$NUMPY"; else printf 'install ok installed'; fi
SH
cat >"$T/bin/apt-get" <<'SH'
#!/bin/sh
echo "apt-get $*" >>"$CALLS"
SH
# root, so the script runs the stand-in apt-get, never sudo
printf '#!/bin/sh\necho 0\n' >"$T/bin/id"
chmod +x "$T/bin/dpkg-query" "$T/bin/apt-get" "$T/bin/id"
CALLS=$T/calls
export CALLS

for state in "install ok triggers-pending" "install ok triggers-awaited" "install ok half-configured" \
	"hold ok installed"; do
	: >"$CALLS"
	expect_exit 0 "'$state' counts as installed" env PATH="$T/bin:$PATH" NUMPY="$state" sh "$SCRIPT" demo
	check_that "... apt-get is not run" test ! -s "$CALLS"
done
for state in "install ok unpacked" "deinstall ok config-files" ""; do
	: >"$CALLS"
	run_cmd env PATH="$T/bin:$PATH" NUMPY="$state" sh "$SCRIPT" demo
	check_that "'$state' is missing" grep -q "installing: python3-numpy" "$TAP_OUT"
	check_that "... and installed" grep -q "install -y --no-install-recommends python3-numpy" "$CALLS"
done

# test mode: the MCP SDK with npm, into MCP_SDK_DIR; npm failing (no
# registry) is a warning, not a failure.
printf '#!/bin/sh\necho "npm $*" >>"$CALLS"\nexit "${NPM_RC:-0}"\n' >"$T/bin/npm"
chmod +x "$T/bin/npm"
: >"$CALLS"
expect_exit 0 "test mode installs the MCP SDK" env PATH="$T/bin:$PATH" MCP_SDK_DIR="$T/sdk" NUMPY="install ok installed" \
	sh "$SCRIPT"
check_that "... with npm, into MCP_SDK_DIR" grep -q "npm install --prefix $T/sdk .*@modelcontextprotocol/sdk@1" "$CALLS"
: >"$CALLS"
expect_exit 0 "... a registry out of reach is no failure" env PATH="$T/bin:$PATH" MCP_SDK_DIR="$T/sdk" NPM_RC=1 \
	NUMPY="install ok installed" sh "$SCRIPT"
check_that "... but a warning" grep -q "mcp_sdk.sh will be skipped" "$TAP_ERR"
: >"$CALLS"
expect_exit 0 "demo mode installs no SDK" env PATH="$T/bin:$PATH" MCP_SDK_DIR="$T/sdk" NUMPY="install ok installed" \
	sh "$SCRIPT" demo
check_that "... npm is not run" test ! -s "$CALLS"
tap_done
