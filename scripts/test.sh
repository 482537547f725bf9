#!/usr/bin/env bash
# The test command (README.md's second command; .ci/run calls it after fmt and clippy): every
# Rust test of the workspace, then the monitor's dashboard end to end in headless Chromium.
# What the tests need beyond cargo (Chromium, playwright-core, the EVM tools) the scripts they
# call install on first use; a machine without network access needs them installed already.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked
scripts/dashboard_e2e.sh
