#!/usr/bin/env bash
# The EVM tools of the chain anchor and the on-chain scores (docs/ledger.md, "Chain anchoring"
# and "Scores on chain"), installed from npm into .tools/evm/ (gitignored) at pinned versions —
# solc, anvil and OpenZeppelin Contracts (the token's ERC-721 and the string helpers, imported as
# an npm dependency, never copied) — then every contracts/*.sol compiled by solc (solcjs, the
# `solc` npm package) into target/contracts/ (never committed):
#
#   target/contracts/NAME.abi.json   the ABI of each deployable contract, as solc wrote it
#   target/contracts/NAME.bin        its creation bytecode, hex
#
# for NAME in CheckpointRegistry, GpuScores, GpuToken, GpuEscrow and TestUsd (a test stablecoin).
#
# Idempotent: nothing is installed or compiled again when it is already there and current.
# Safe to run from several processes at once (a lock serializes them). Prints one KEY=PATH line
# for each of solc, anvil, abi and bin (the registry's), and contracts (the folder of all of
# them), which the Rust tests read, and nothing else on stdout.
#
# Usage: scripts/evm-tools.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SOLC_VERSION=0.8.30
ANVIL_VERSION=1.7.1
OPENZEPPELIN_VERSION=5.4.0
TOOLS="$ROOT/.tools/evm"
OUT="$ROOT/target/contracts"
SOURCES="$ROOT/contracts"
# paris: no PUSH0/MCOPY/transient storage, so the bytecode deploys on every EVM chain, including
# those that lag behind mainnet's hard forks.
EVM_VERSION=paris

mkdir -p "$TOOLS" "$OUT"
exec 9> "$TOOLS/.lock"
flock 9

installed() { # package version: whether node_modules holds exactly that version
    local manifest="$TOOLS/node_modules/$1/package.json"
    [ -f "$manifest" ] && node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
        "$manifest" "$2"
}

if ! installed solc "$SOLC_VERSION" || ! installed @foundry-rs/anvil-linux-amd64 "$ANVIL_VERSION" \
    || ! installed @openzeppelin/contracts "$OPENZEPPELIN_VERSION"; then
    command -v npm > /dev/null || { echo "evm-tools: npm is needed (apt-get install npm)" >&2; exit 1; }
    [ -f "$TOOLS/package.json" ] || printf '{"name":"pog-evm-tools","private":true}\n' > "$TOOLS/package.json"
    (cd "$TOOLS" && npm install --no-audit --no-fund --silent --save-exact \
        "solc@$SOLC_VERSION" "@foundry-rs/anvil-linux-amd64@$ANVIL_VERSION" \
        "@openzeppelin/contracts@$OPENZEPPELIN_VERSION" >&2)
fi
SOLC="$TOOLS/node_modules/solc/solc.js"
ANVIL="$TOOLS/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
[ -x "$ANVIL" ] || chmod +x "$ANVIL"

# Compiled again only when a source, the compiler, OpenZeppelin or the settings changed.
STAMP="$(cat "$SOURCES"/*.sol | sha256sum | cut -d' ' -f1) solc-$SOLC_VERSION oz-$OPENZEPPELIN_VERSION $EVM_VERSION optimizer-200"
CONTRACTS="CheckpointRegistry GpuScores GpuToken GpuEscrow TestUsd"
current() {
    [ "$(cat "$OUT/contracts.stamp" 2> /dev/null)" = "$STAMP" ] || return 1
    for name in $CONTRACTS; do
        [ -f "$OUT/$name.abi.json" ] && [ -f "$OUT/$name.bin" ] || return 1
    done
}
if ! current; then
    # solc's standard JSON interface through the npm package's own wrapper (solcjs); imports of
    # "@openzeppelin/contracts/..." are read from node_modules.
    TOOLS="$TOOLS" SOURCES="$SOURCES" OUT="$OUT" EVM_VERSION="$EVM_VERSION" CONTRACTS="$CONTRACTS" node - << 'EOF'
const fs = require('fs');
const path = require('path');
const solc = require(path.join(process.env.TOOLS, 'node_modules/solc'));
const sources = {};
for (const file of fs.readdirSync(process.env.SOURCES).filter((f) => f.endsWith('.sol')).sort()) {
  sources[file] = { content: fs.readFileSync(path.join(process.env.SOURCES, file), 'utf8') };
}
const input = {
  language: 'Solidity',
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: process.env.EVM_VERSION,
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
  },
};
function findImports(name) {
  if (!name.startsWith('@openzeppelin/contracts/')) return { error: `unknown import ${name}` };
  try {
    return { contents: fs.readFileSync(path.join(process.env.TOOLS, 'node_modules', name), 'utf8') };
  } catch (e) {
    return { error: `${name}: ${e.message}` };
  }
}
const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
let failed = false;
for (const e of output.errors || []) {
  process.stderr.write(e.formattedMessage || e.message);
  if (e.severity === 'error') failed = true;
}
if (failed) process.exit(1);
const out = process.env.OUT;
for (const name of process.env.CONTRACTS.split(' ')) {
  const c = output.contracts[`${name}.sol`][name];
  fs.writeFileSync(path.join(out, `${name}.abi.json.tmp`), JSON.stringify(c.abi, null, 1) + '\n');
  fs.writeFileSync(path.join(out, `${name}.bin.tmp`), c.evm.bytecode.object + '\n');
}
EOF
    for name in $CONTRACTS; do
        mv "$OUT/$name.abi.json.tmp" "$OUT/$name.abi.json"
        mv "$OUT/$name.bin.tmp" "$OUT/$name.bin"
    done
    echo "$STAMP" > "$OUT/contracts.stamp"
fi
ABI="$OUT/CheckpointRegistry.abi.json"
BIN="$OUT/CheckpointRegistry.bin"

echo "solc=$SOLC"
echo "anvil=$ANVIL"
echo "abi=$ABI"
echo "bin=$BIN"
echo "contracts=$OUT"
