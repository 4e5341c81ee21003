#!/usr/bin/env bash
# End-to-end latency of `fetchgate check` on literal addresses (process start, profile load
# and check, decision, output), with hyperfine. Literals are never resolved or connected to.
# Usage: benches/check-latency.sh   (installs hyperfine with apt-get if it is missing)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine; }
cargo build --release -q
bin=target/release/fetchgate
hyperfine -N --warmup 20 --runs 300 -i \
  "$bin check http://2130706433/" \
  "$bin check --json https://[::ffff:169.254.169.254]/" \
  "$bin check http://192.0.0.9/pkg.tgz"
