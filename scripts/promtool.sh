#!/usr/bin/env bash
# Prints the path of a promtool (Prometheus's linter, for `promtool check metrics`), installing
# one first where none is found: from Debian's prometheus package, unpacked under
# target/promtool/ (the package is only downloaded: no service is installed or started).
# crates/monitor/tests/metrics_format.rs runs it on the /metrics page of a simulated host.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${CARGO_TARGET_DIR:-target}/promtool
if command -v promtool > /dev/null; then
    command -v promtool
    exit 0
fi
if [ ! -x "$DIR/usr/bin/promtool" ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq > /dev/null
    mkdir -p "$DIR"
    # apt-get download writes to the working directory, as a user that may not write there.
    DEB=$(mktemp -d)
    chmod 777 "$DEB"
    (cd "$DEB" && apt-get download -qq prometheus > /dev/null 2>&1)
    dpkg-deb -x "$DEB"/prometheus_*.deb "$DIR"
    rm -rf "$DEB"
fi
echo "$(cd "$DIR/usr/bin" && pwd)/promtool"
