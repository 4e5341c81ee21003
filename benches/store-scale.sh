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
#               ratio against one entry is reported too (median and range);
#   CPU a hit:  fetchgate's user + system CPU during a round over the hits it served (from
#               /proc): what a dedicated core would take, far less moved by the machine's drift
#               than hits/s while fetchgate keeps its core busy (its share of the core is shown).
#
# FG_BEFORE=/path/to/fetchgate also runs that build at every size at the same time, on its own
# copy of each cache (the object files hard-linked, the index copied), its rounds interleaved
# with the others', and adds a before / after table.
#
# Usage: benches/store-scale.sh   (SIZES="1 10000 100000 1000000" ROUNDS=3 DURATION=5 SOAK=0;
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
BUILDS=(after); declare -A BIN=([after]=$FG)
if [ -n "${FG_BEFORE:-}" ]; then BUILDS+=(before); BIN[before]=$FG_BEFORE; fi

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
  if [ ! -f "$d/index.redb" ]; then
    echo "# building the index of $n entries" >&2
    printf '[cache]\ndir = "%s"\nmax_bytes = 10737418240\n' "$d" > "$W/index$n.toml"
    "$FG" cache stats --config "$W/index$n.toml" >/dev/null
  fi
  for b in "${BUILDS[@]}"; do
    c=$d
    if [ "$b" = before ]; then
      # Its own copy: the same object files, its own index (hits write use times to it).
      c="$W/c$n-before"; rm -rf "$c"; mkdir -p "$c"
      cp -al "$d/objects" "$c/objects"; cp "$d/index.redb" "$d/hot" "$c/"
    fi
    cat > "$W/$b$n.toml" <<EOF
[listen]
proxy = "127.0.0.1:$port"
admin = "127.0.0.1:$((port + 1))"
[cache]
dir = "$c"
max_bytes = 10737418240
EOF
    echo "$port" > "$W/$b$n.port"
    port=$((port + 2))
  done
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
# User plus system CPU ticks a process has used (fields 14 and 15 of /proc/PID/stat).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
RES="$W/results.tsv"; : > "$RES"
for n in $SIZES; do
  for b in "${BUILDS[@]}"; do
    p=$(cat "$W/$b$n.port")
    start=$(date +%s.%N)
    RUST_LOG=info "${SUT[@]}" "${BIN[$b]}" serve --config "$W/$b$n.toml" 2>"$W/$b$n.log" & pid=$!; PIDS+=($pid)
    echo "$pid" > "$W/$b$n.pid"
    until (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do sleep 0.005; done
    listen=$(python3 -c "import time; print(f'{time.time() - $start:.3f}')")
    until grep -q "reconciled" "$W/$b$n.log"; do sleep 0.01; kill -0 "$pid" || exit 1; done
    reconcile=$(python3 -c "import time; print(f'{time.time() - $start:.3f}')")
    printf '%s\tlisten\t%s\t%s\n%s\treconcile\t%s\t%s\n%s\trss_idle\t%s\t%s\n' \
      "$b" "$n" "$listen" "$b" "$n" "$reconcile" "$b" "$n" "$(rss_mib "$pid")" >> "$RES"
    # Warm-up: every hot entry once (adopted entries are hashed before their first serve).
    while read -r h; do echo "url = \"http://127.0.0.1:$p/sha256/$h\""; echo "output = /dev/null"; done < "$W/c$n/hot" > "$W/$b$n.curl"
    curl -fsS -K "$W/$b$n.curl"
  done
done
for _ in $(seq "$ROUNDS"); do
  for n in $SIZES; do
    for b in "${BUILDS[@]}"; do
      p=$(cat "$W/$b$n.port"); pid=$(cat "$W/$b$n.pid")
      cpu0=$(cpu_ticks "$pid")
      rps=$("${LOAD[@]}" wrk -t1 -c32 -d"${DURATION}s" -s "$W/c$n.lua" "http://127.0.0.1:$p/" 2>/dev/null | awk '/Requests\/sec/ {print $2}')
      cpu=$(python3 -c "print(($(cpu_ticks "$pid") - $cpu0) / $(getconf CLK_TCK))")
      printf '%s\thits\t%s\t%s\n%s\tcpu_s\t%s\t%s\n' "$b" "$n" "$rps" "$b" "$n" "$cpu" >> "$RES"
    done
  done
done
for n in $SIZES; do
  for b in "${BUILDS[@]}"; do printf '%s\trss_after\t%s\t%s\n' "$b" "$n" "$(rss_mib "$(cat "$W/$b$n.pid")")" >> "$RES"; done
done

python3 - "$RES" "$ROUNDS" "${#SUT[@]}" "$DURATION" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    b, k, n, v = line.rstrip("\n").split("\t")
    rows[(b, k, int(n))].append(float(v))
builds = [b for b in ("after", "before") if any(k[0] == b for k in rows)]
sizes = sorted({n for _, _, n in rows})
duration = float(sys.argv[4])
m = lambda b, k, n: statistics.median(rows[(b, k, n)])
# CPU microseconds a hit, per round, and the share of its core fetchgate kept busy.
us = lambda b, n: [c * 1e6 / (h * duration) for h, c in zip(rows[(b, "hits", n)], rows[(b, "cpu_s", n)])]
busy = lambda b, n: statistics.median(c / duration for c in rows[(b, "cpu_s", n)])
spread = lambda xs: f"{statistics.median(xs):.2f} ({min(xs):.2f} to {max(xs):.2f})"
pinned = "fetchgate on core 1, wrk on core 0" if sys.argv[3] != "0" else "not pinned"
for b in builds:
    base = m(b, "hits", sizes[0])
    name = "fetchgate" if b == "after" else "fetchgate, the before build"
    print()
    print(f"{name}: store scale, 1 KiB entries, {pinned}, hits median of {sys.argv[2]} interleaved rounds")
    print()
    print("| entries | listening (s) | repair done (s) | RSS after repair (MiB) | RSS after hits (MiB) | 1 KiB hits/s (hot set of 1,000) | hits against 1 entry | CPU µs a hit (share of its core) |")
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        print(f"| {n:,} | {m(b, 'listen', n):.2f} | {m(b, 'reconcile', n):.2f} | {m(b, 'rss_idle', n):.0f} | {m(b, 'rss_after', n):.0f} | {m(b, 'hits', n):.0f} | {m(b, 'hits', n) / base:.2f} | {statistics.median(us(b, n)):.2f} ({busy(b, n):.2f}) |")
    # Each round measures every size back to back, so a round's own ratio is spared most of
    # the drift between rounds: their median and range show how far the ratio above can be
    # trusted. CPU a hit is steadier still while fetchgate keeps its core busy.
    print()
    print("| entries | hits against 1 entry, per round: median (lowest to highest) | the same in CPU a hit (1 entry's over this size's) |")
    print("|---|---|---|")
    for n in sizes[1:]:
        per_round = [h / o for h, o in zip(rows[(b, "hits", n)], rows[(b, "hits", sizes[0])])]
        cpu_ratio = [o / h for h, o in zip(us(b, n), us(b, sizes[0]))]
        print(f"| {n:,} | {spread(per_round)} | {spread(cpu_ratio)} |")
if "before" in builds:
    print()
    print("Before / after in the same rounds (after's hits over before's; before's CPU a hit over after's):")
    print()
    print("| entries | hits, after / before, per round | CPU a hit, before / after, per round |")
    print("|---|---|---|")
    for n in sizes:
        hits = [a / b for a, b in zip(rows[("after", "hits", n)], rows[("before", "hits", n)])]
        cpu = [b / a for a, b in zip(us("after", n), us("before", n))]
        print(f"| {n:,} | {spread(hits)} | {spread(cpu)} |")
PY

# SOAK=seconds: then hits on the largest size for that long per build, in 30 s slices (each
# build's slice in turn), with RSS after each: whether memory levels off once the use-time
# flushes (every 30 s) have run a few times, or keeps growing.
if [ "${SOAK:-0}" -gt 0 ]; then
  n=$(printf '%s\n' $SIZES | sort -n | tail -1)
  echo
  echo "RSS (MiB) of the $n-entry server under hits, every 30 s for $SOAK s:"
  echo
  printf '| seconds of hits |'; for b in "${BUILDS[@]}"; do printf ' %s |' "$b"; done; echo
  printf '|---|'; for _ in "${BUILDS[@]}"; do printf -- '---|'; done; echo
  for t in $(seq 30 30 "$SOAK"); do
    printf '| %s |' "$t"
    for b in "${BUILDS[@]}"; do
      "${LOAD[@]}" wrk -t1 -c32 -d30s -s "$W/c$n.lua" "http://127.0.0.1:$(cat "$W/$b$n.port")/" >/dev/null 2>&1
      printf ' %s |' "$(rss_mib "$(cat "$W/$b$n.pid")")"
    done
    echo
  done
fi
