#!/usr/bin/env bash
# Scale of the store: start-up, memory and hits with 1, 10^4, 10^5 and 10^6 entries.
#
# For each size N a cache directory is made directly on disk (N files of 1 KiB under
# objects/sha256/, no fetch), `fetchgate cache stats` builds its index once (the adoption a
# first start does), then `fetchgate serve` is started on it and measured:
#
#   listen:     seconds from exec until the proxy port accepts (the index loaded);
#   reconcile:  seconds from exec until the background repair logged that it finished;
#   RSS:        VmRSS once the repair finished, and after the hits;
#   hits:       1 KiB hits/s (wrk, 32 connections) on random digests from a hot set of 1,000
#               entries (1 for N = 1), after one warm-up pass over the hot set; the servers run
#               at once and the wrk rounds are interleaved, medians of ROUNDS; each round's own
#               ratio against one entry is reported too (median and range).
#
# Usage: benches/store-scale.sh   (SIZES="1 10000 100000 1000000" ROUNDS=3 DURATION=5;
# KEEP_DIR=/some/dir keeps and reuses the generated caches between runs).
# fetchgate runs pinned to core 1, wrk to core 0 (PIN=0 turns that off). Loopback only; stops
# everything it started. Needs ~1.1 GiB of disk per million entries (under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SIZES=${SIZES:-1 10000 100000 1000000}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
PIN=${PIN:-1}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pin_cores
for b in wrk python3; do command -v "$b" >/dev/null || { apt-get install -y -qq "$b" >/dev/null; }; done
# FG=/path/to/fetchgate measures another build (a saved "before" binary, say).
if [ -z "${FG:-}" ]; then cargo build --release -q; FG="$ROOT/target/release/fetchgate"; fi

W=${KEEP_DIR:-$(mktemp -d /tmp/fetchgate-store-scale.XXXXXX)}
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.3
  [ -n "${KEEP_DIR:-}" ] || rm -rf "$W"
}
trap cleanup EXIT

port=18380
for n in $SIZES; do
  d="$W/c$n"
  if [ ! -f "$d/hot" ]; then
    echo "# making $n entries of 1 KiB in $d" >&2
    python3 - "$d" "$n" <<'PY'
import hashlib, os, sys
d, n = sys.argv[1], int(sys.argv[2])
objects = f"{d}/objects/sha256"
for i in range(256):
    os.makedirs(f"{objects}/{i:02x}", exist_ok=True)
hot = []
seed = os.urandom(1016)
for i in range(n):
    data = i.to_bytes(8, "little") + seed
    h = hashlib.sha256(data).hexdigest()
    p = f"{objects}/{h[:2]}/{h}"
    with open(p, "wb") as f:
        f.write(data)
    os.chmod(p, 0o444)
    if len(hot) < 1000:
        hot.append(h)
open(f"{d}/hot", "w").write("\n".join(hot) + "\n")
PY
  fi
  cat > "$W/c$n.toml" <<EOF
[listen]
proxy = "127.0.0.1:$port"
admin = "127.0.0.1:$((port + 1))"
[cache]
dir = "$d"
max_bytes = 10737418240
EOF
  echo "$port" > "$W/c$n.port"
  port=$((port + 2))
  if [ ! -f "$d/index.redb" ]; then
    echo "# building the index of $n entries" >&2
    "$FG" cache stats --config "$W/c$n.toml" >/dev/null
  fi
  cat > "$W/c$n.lua" <<EOF
local digests = {}
for line in io.lines("$d/hot") do digests[#digests + 1] = line end
math.randomseed(7)
request = function()
  return wrk.format("GET", "/sha256/" .. digests[math.random(#digests)])
end
EOF
done

rss_mib() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
RES="$W/results.tsv"; : > "$RES"
for n in $SIZES; do
  p=$(cat "$W/c$n.port")
  start=$(date +%s.%N)
  RUST_LOG=info "${SUT[@]}" "$FG" serve --config "$W/c$n.toml" 2>"$W/c$n.log" & pid=$!; PIDS+=($pid)
  echo "$pid" > "$W/c$n.pid"
  until (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do sleep 0.005; done
  listen=$(python3 -c "import time; print(f'{time.time() - $start:.3f}')")
  until grep -q "reconciled" "$W/c$n.log"; do sleep 0.01; kill -0 "$pid" || exit 1; done
  reconcile=$(python3 -c "import time; print(f'{time.time() - $start:.3f}')")
  printf 'listen\t%s\t%s\nreconcile\t%s\t%s\nrss_idle\t%s\t%s\n' "$n" "$listen" "$n" "$reconcile" "$n" "$(rss_mib "$pid")" >> "$RES"
  # Warm-up: every hot entry once (adopted entries are hashed before their first serve).
  while read -r h; do echo "url = \"http://127.0.0.1:$p/sha256/$h\""; echo "output = /dev/null"; done < "$W/c$n/hot" > "$W/c$n.curl"
  curl -fsS -K "$W/c$n.curl"
done
for _ in $(seq "$ROUNDS"); do
  for n in $SIZES; do
    p=$(cat "$W/c$n.port")
    rps=$("${LOAD[@]}" wrk -t1 -c32 -d"${DURATION}s" -s "$W/c$n.lua" "http://127.0.0.1:$p/" 2>/dev/null | awk '/Requests\/sec/ {print $2}')
    printf 'hits\t%s\t%s\n' "$n" "$rps" >> "$RES"
  done
done
for n in $SIZES; do printf 'rss_after\t%s\t%s\n' "$n" "$(rss_mib "$(cat "$W/c$n.pid")")" >> "$RES"; done

python3 - "$RES" "$ROUNDS" "${#SUT[@]}" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, n, v = line.rstrip("\n").split("\t")
    rows[(k, int(n))].append(float(v))
sizes = sorted({n for _, n in rows})
m = lambda k, n: statistics.median(rows[(k, n)])
base = m("hits", sizes[0])
pinned = "fetchgate on core 1, wrk on core 0" if sys.argv[3] != "0" else "not pinned"
print()
print(f"fetchgate store scale, 1 KiB entries, {pinned}, hits median of {sys.argv[2]} interleaved rounds")
print()
print("| entries | listening (s) | repair done (s) | RSS after repair (MiB) | RSS after hits (MiB) | 1 KiB hits/s (hot set of 1,000) | hits against 1 entry |")
print("|---|---|---|---|---|---|---|")
for n in sizes:
    print(f"| {n:,} | {m('listen', n):.2f} | {m('reconcile', n):.2f} | {m('rss_idle', n):.0f} | {m('rss_after', n):.0f} | {m('hits', n):.0f} | {m('hits', n) / base:.2f} |")
# Each round measures every size back to back, so a round's own ratio is spared most of the
# drift between rounds: their median and range show how far the ratio above can be trusted.
print()
print("| entries | hits against 1 entry, per round: median (lowest to highest) |")
print("|---|---|")
for n in sizes[1:]:
    per_round = sorted(h / b for h, b in zip(rows[("hits", n)], rows[("hits", sizes[0])]))
    print(f"| {n:,} | {statistics.median(per_round):.2f} ({per_round[0]:.2f} to {per_round[-1]:.2f}) |")
PY
