#!/bin/sh
# Install the Debian packages tbisect needs to build and test, if missing.
# A no-op (no network, no root needed) when everything is already present.
set -eu

# The last line is for quickstart.sh test's packaging checks: man -l and
# the completion test (tests/pkg/install.sh, tests/e2e/completion.sh), and
# the Debian package built from git archive (tests/pkg/deb.sh).  The tests
# also load the HTML report in Debian's chromium (tests/e2e/html.sh), and
# drive tbisect mcp with the official TypeScript SDK's client
# (tests/e2e/mcp_sdk.sh): Debian's Node and npm when there is no node on
# the PATH, and the SDK from npm into build-aux/mcp-sdk (or $MCP_SDK_DIR;
# never committed), skipped with a warning when the registry is out of
# reach (the test is then skipped too).  The demo (setup-deps.sh demo) has
# no use for any of them.
mode=${1:-test}
pkgs="build-essential autoconf automake libtool pkg-config
libcjson-dev libopenblas-dev libncurses-dev libreadline-dev zlib1g-dev
libcmocka-dev tmux python3 python3-numpy mandoc
man-db bash git debhelper dpkg-dev fakeroot lintian"
if [ "$mode" != demo ]; then
    pkgs="$pkgs chromium"
    command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
    command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
fi
sdk_dir=${MCP_SDK_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build-aux/mcp-sdk}

install_sdk() {
    if [ "$mode" = demo ] || [ -f "$sdk_dir/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
        return 0
    fi
    echo "setup-deps: installing @modelcontextprotocol/sdk into $sdk_dir"
    mkdir -p "$sdk_dir"
    if ! npm install --prefix "$sdk_dir" --no-audit --no-fund '@modelcontextprotocol/sdk@1'; then
        echo "setup-deps: warning: cannot install @modelcontextprotocol/sdk from npm;" \
            "tests/e2e/mcp_sdk.sh will be skipped" >&2
    fi
}

# Installed: unpacked and configured, or configured but for triggers or a
# configure step that another apt job (unattended-upgrades) still has to
# run.  Only a package absent or merely unpacked is missing; installing it
# again then would wait on, or fight, that job's lock.
installed() {
    case $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) in
    *" ok installed" | *" ok triggers-pending" | *" ok triggers-awaited" | *" ok half-configured") return 0 ;;
    *) return 1 ;;
    esac
}

missing=""
for p in $pkgs; do
    if ! installed "$p"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "setup-deps: all build and test packages are present"
    install_sdk
    exit 0
fi

echo "setup-deps: installing:$missing"
if [ "$(id -u)" -eq 0 ]; then
    run=""
elif command -v sudo >/dev/null 2>&1; then
    run="sudo"
else
    echo "setup-deps: need root (or sudo) to install:$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$run apt-get update
# shellcheck disable=SC2086
$run apt-get install -y --no-install-recommends $missing
install_sdk
