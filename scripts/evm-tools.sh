#!/usr/bin/env bash
# The EVM tools of the chain anchor (docs/ledger.md, "Chain anchoring"), installed from npm into
# .tools/evm/ (gitignored) at pinned versions, then contracts/CheckpointRegistry.sol compiled by
# solc (solcjs, the `solc` npm package) into target/contracts/ (never committed):
#
#   target/contracts/CheckpointRegistry.abi.json   the ABI, as solc wrote it
#   target/contracts/CheckpointRegistry.bin        the creation bytecode, hex
#
# Idempotent: nothing is installed or compiled again when it is already there and current.
# Safe to run from several processes at once (a lock serializes them). Prints one KEY=PATH line
# for each of solc, anvil, abi and bin (the Rust tests read these), and nothing else on stdout.
#
# Usage: scripts/evm-tools.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SOLC_VERSION=0.8.30
ANVIL_VERSION=1.7.1
TOOLS="$ROOT/.tools/evm"
OUT="$ROOT/target/contracts"
SOURCE="$ROOT/contracts/CheckpointRegistry.sol"
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

if ! installed solc "$SOLC_VERSION" || ! installed @foundry-rs/anvil-linux-amd64 "$ANVIL_VERSION"; then
    command -v npm > /dev/null || { echo "evm-tools: npm is needed (apt-get install npm)" >&2; exit 1; }
    [ -f "$TOOLS/package.json" ] || printf '{"name":"pog-evm-tools","private":true}\n' > "$TOOLS/package.json"
    (cd "$TOOLS" && npm install --no-audit --no-fund --silent --save-exact \
        "solc@$SOLC_VERSION" "@foundry-rs/anvil-linux-amd64@$ANVIL_VERSION" >&2)
fi
SOLC="$TOOLS/node_modules/solc/solc.js"
ANVIL="$TOOLS/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
[ -x "$ANVIL" ] || chmod +x "$ANVIL"

# Compiled again only when the source, the compiler or the settings changed.
STAMP="$(sha256sum "$SOURCE" | cut -d' ' -f1) solc-$SOLC_VERSION $EVM_VERSION optimizer-200"
ABI="$OUT/CheckpointRegistry.abi.json"
BIN="$OUT/CheckpointRegistry.bin"
if [ ! -f "$ABI" ] || [ ! -f "$BIN" ] || [ "$(cat "$OUT/CheckpointRegistry.stamp" 2> /dev/null)" != "$STAMP" ]; then
    # solc's standard JSON interface through the npm package's own wrapper (solcjs).
    TOOLS="$TOOLS" SOURCE="$SOURCE" OUT="$OUT" EVM_VERSION="$EVM_VERSION" node - << 'EOF'
const fs = require('fs');
const path = require('path');
const solc = require(path.join(process.env.TOOLS, 'node_modules/solc'));
const input = {
  language: 'Solidity',
  sources: { 'CheckpointRegistry.sol': { content: fs.readFileSync(process.env.SOURCE, 'utf8') } },
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: process.env.EVM_VERSION,
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
  },
};
const output = JSON.parse(solc.compile(JSON.stringify(input)));
let failed = false;
for (const e of output.errors || []) {
  process.stderr.write(e.formattedMessage || e.message);
  if (e.severity === 'error') failed = true;
}
if (failed) process.exit(1);
const c = output.contracts['CheckpointRegistry.sol'].CheckpointRegistry;
const out = process.env.OUT;
fs.writeFileSync(path.join(out, 'CheckpointRegistry.abi.json.tmp'), JSON.stringify(c.abi, null, 1) + '\n');
fs.writeFileSync(path.join(out, 'CheckpointRegistry.bin.tmp'), c.evm.bytecode.object + '\n');
EOF
    mv "$ABI.tmp" "$ABI"
    mv "$BIN.tmp" "$BIN"
    echo "$STAMP" > "$OUT/CheckpointRegistry.stamp"
fi

echo "solc=$SOLC"
echo "anvil=$ANVIL"
echo "abi=$ABI"
echo "bin=$BIN"
