#!/usr/bin/env bash
# Whole-system benchmarks of insitu against peer tools, side by side in one run. Appends dated results to
# bench/RESULTS.md. Installs what it needs (ripgrep) and builds the release binary first.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v rg >/dev/null; then
  echo "installing ripgrep (apt)"
  (apt-get update -qq && apt-get install -y -qq ripgrep) >/dev/null
fi
cargo build --release -p insitu-cli
python3 bench/bench.py "$@"
