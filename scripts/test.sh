#!/usr/bin/env bash
# The test command (README.md's second command; .ci/run calls it after fmt and clippy): a
# check of the deployment files, every Rust test of the workspace, then the monitor's
# dashboard end to end in headless Chromium.
# What the tests need beyond cargo (Chromium, playwright-core, promtool, the EVM tools, PostgreSQL's
# server programs) the scripts they call install on first use; a machine without network
# access needs them installed already.
set -euo pipefail
cd "$(dirname "$0")/.."
# The deployment files first (seconds, and no build needed): the systemd units verified and
# scored, the Kubernetes overlays rendered and checked against the Kubernetes schemas
# (docs/deploy.md). A part whose tool is missing is skipped with a message, unless
# POG_REQUIRE_DEPLOY_CHECK=1.
scripts/check-deploy.sh
# The validator's store tests run on SQLite and on a throwaway PostgreSQL cluster
# (scripts/postgres.sh: its own temp dir and free port, removed on exit). A server that does
# not start fails the tests here; POG_REQUIRE_POSTGRES makes the store tests fail rather than
# skip their PostgreSQL half should the URL go missing on the way.
if [ -z "${POG_TEST_POSTGRES_URL:-}" ]; then
    pg_dir=$(mktemp -d /tmp/pog-postgres.XXXXXX)
    trap 'scripts/postgres.sh stop "$pg_dir"' EXIT
    POG_TEST_POSTGRES_URL=$(scripts/postgres.sh start "$pg_dir")
    export POG_TEST_POSTGRES_URL
fi
export POG_REQUIRE_POSTGRES=1
# The /metrics page is linted by Prometheus's promtool (crates/monitor/tests/metrics_format.rs;
# scripts/promtool.sh installs it under target/ on first use); without it that test skips.
POG_PROMTOOL=$(scripts/promtool.sh)
export POG_PROMTOOL POG_REQUIRE_PROMTOOL=1
cargo test --workspace --locked
# The validator's integration tests once more, each test validator's registry, records,
# market and settlements on a PostgreSQL database of its own. (The unit tests' PostgreSQL
# halves, such as the market's fleet tests of two validators on one database, ran above.)
POG_TEST_STORE=postgres cargo test -p pog-validator --tests --locked
scripts/dashboard_e2e.sh
