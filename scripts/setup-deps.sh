#!/bin/sh
# Install the Debian packages tbisect needs to build and test, if missing.
# A no-op (no network, no root needed) when everything is already present.
set -eu

# The last line is for quickstart.sh test's packaging checks: man -l and
# the completion test (tests/pkg/install.sh, tests/e2e/completion.sh), and
# the Debian package built from git archive (tests/pkg/deb.sh).  The tests
# also load the HTML report in Debian's chromium (tests/e2e/html.sh); the
# demo (setup-deps.sh demo) has no use for it.
pkgs="build-essential autoconf automake libtool pkg-config
libcjson-dev libopenblas-dev libncurses-dev libreadline-dev zlib1g-dev
libcmocka-dev tmux python3 python3-numpy mandoc
man-db bash git debhelper dpkg-dev fakeroot lintian"
if [ "${1:-test}" != demo ]; then
    pkgs="$pkgs chromium"
fi

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
