#!/usr/bin/env bash
# Does fetchgate's cost depend on how much it holds? Two measurements, fetchgate's default
# configuration on loopback:
#
#   hits:      1 KiB hit throughput (wrk, 32 connections, random digests) with 1, 1,000 and
#              10,000 entries in the cache, interleaved over ROUNDS rounds, medians reported;
#   eviction:  a cache at its `max_bytes` under continuous fills of new 64 KiB objects: the
#              time per fill while the cache still has room, against the time per fill once
#              every fill must evict (eviction cost per fill = the difference), with the
#              evictions counted by fetchgate's own /metrics.
#
# Usage: benches/scaling.sh   (ROUNDS=3 DURATION=5 by default). Installs nginx and wrk with
# apt-get if missing; pins fetchgate alone to core 1 and load and upstream to core 0 when the
# machine has two cores (PIN=0 turns that off); only ever touches 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
PIN=${PIN:-1}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pin_cores
export PATH="/usr/sbin:$PATH"
need=()
for b in nginx wrk curl python3; do command -v "$b" >/dev/null || need+=("$b"); done
if ((${#need[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
cargo build --release -q
FG="$ROOT/target/release/fetchgate"

work_dir scaling

UP=127.0.0.1:18280      # nginx upstream: the mirror
HITS=127.0.0.1:18281    # fetchgate holding 10,000 entries
HITS_ADMIN=127.0.0.1:18282
FULL=127.0.0.1:18283    # fetchgate at its max_bytes
FULL_ADMIN=127.0.0.1:18284
ENTRIES=10000
FILL_SIZE=$((64 << 10))
MAX_BYTES=$((16 << 20))  # 256 of the 64 KiB objects
FILLS=1536

echo "# preparing $ENTRIES objects of 1 KiB and $FILLS of 64 KiB in $W" >&2
mkdir -p "$W/www/s" "$W/www/f"
python3 - "$W" "$ENTRIES" "$FILLS" "$FILL_SIZE" <<'PY'
import hashlib, os, sys
w, entries, fills, fill_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for kind, count, size in (("s", entries, 1024), ("f", fills, fill_size)):
    with open(f"{w}/{kind}.list", "w") as index:
        for i in range(count):
            data = os.urandom(size)
            open(f"{w}/www/{kind}/{i}", "wb").write(data)
            index.write(f"{i} {hashlib.sha256(data).hexdigest()}\n")
PY
chmod -R a+rX "$W"

cat > "$W/nginx.conf" <<EOF
worker_processes 1;
pid $W/nginx.pid;
error_log $W/nginx-error.log crit;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 100000; server { listen $UP; root $W/www; } }
EOF
"${LOAD[@]}" nginx -c "$W/nginx.conf"

fg_config() { # listen, admin, cache dir, extra [cache] lines
  cat <<EOF
[listen]
proxy = "$1"
admin = "$2"
[cache]
dir = "$3"
$4
[[egress.trust]]
cidrs = ["127.0.0.1/32"]
ports = [${UP##*:}]
EOF
}
fg_config "$HITS" "$HITS_ADMIN" "$W/cache-hits" "" > "$W/hits.toml"
fg_config "$FULL" "$FULL_ADMIN" "$W/cache-full" "max_bytes = $MAX_BYTES" > "$W/full.toml"
"${SUT[@]}" "$FG" serve --config "$W/hits.toml" 2>"$W/hits.log" & PIDS+=($!)
"${SUT[@]}" "$FG" serve --config "$W/full.toml" 2>"$W/full.log" & PIDS+=($!)
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null && return 0; sleep 0.1; done; echo "nothing listens on $1" >&2; exit 1; }
for a in $UP $HITS $FULL; do wait_port "$a"; done

# Fetches objects through by digest over one keep-alive connection; prints the seconds each
# slice of `step` fills took, one line per slice.
fill() { # fetchgate, kind (s|f), size, first, count, step
  python3 - "$@" "$W" "$UP" <<'PY'
import http.client, sys, time
fg, kind, size, first, count, step, w, up = sys.argv[1:9]
size, first, count, step = int(size), int(first), int(count), int(step)
lines = open(f"{w}/{kind}.list").read().split("\n")[first:first + count]
host, port = fg.split(":")
c = http.client.HTTPConnection(host, int(port))
t = time.perf_counter()
for n, line in enumerate(lines, 1):
    i, sha = line.split()
    c.request("GET", f"/sha256/{sha}?size={size}&url=http%3A%2F%2F{up}%2F{kind}%2F{i}")
    r = c.getresponse()
    body = r.read()
    if r.status != 200 or len(body) != size:
        sys.exit(f"fill {i}: status {r.status}, {len(body)} bytes")
    if n % step == 0:
        now = time.perf_counter()
        print(f"{now - t:.6f}")
        t = now
PY
}
metric() { # admin, name -> value
  curl -fsS "http://$1/metrics" | awk -v n="$2" '$1 == n {print $2}'
}

echo "# filling $ENTRIES entries" >&2
fill "$HITS" s 1024 0 "$ENTRIES" "$ENTRIES" >/dev/null

for n in 1 1000 $ENTRIES; do
  head -n "$n" "$W/s.list" | awk '{print $2}' > "$W/digests.$n"
  cat > "$W/hits.$n.lua" <<EOF
local digests = {}
for line in io.lines("$W/digests.$n") do digests[#digests + 1] = line end
math.randomseed(7)
request = function()
  return wrk.format("GET", "/sha256/" .. digests[math.random(#digests)])
end
EOF
done

RES="$W/results.tsv"; : > "$RES"
echo "# measuring: $ROUNDS rounds, interleaved" >&2
for _ in $(seq "$ROUNDS"); do
  for n in 1 1000 $ENTRIES; do
    rps=$("${LOAD[@]}" wrk -t1 -c32 -d"${DURATION}s" -s "$W/hits.$n.lua" "http://$HITS/" 2>/dev/null | awk '/Requests\/sec/ {print $2}')
    printf 'hits\t%s\t%s\n' "$n" "$rps" >> "$RES"
  done
done

# Fills: the first 256 fit (no eviction); from then on every fill evicts one object. The first
# slice warms up, the second slice (fills 64..255) has room, the last slices (fills 512..) evict.
echo "# filling a $((MAX_BYTES >> 20)) MiB cache with $FILLS objects of 64 KiB" >&2
before=$(metric "$FULL_ADMIN" fetchgate_cache_evictions_total)
fill "$FULL" f "$FILL_SIZE" 0 "$FILLS" 64 > "$W/fill-times"
after=$(metric "$FULL_ADMIN" fetchgate_cache_evictions_total)

python3 - "$RES" "$W/fill-times" "$ROUNDS" "$(( ${after:-0} - ${before:-0} ))" "$FILLS" <<'PY'
import statistics, sys
res, times, rounds, evictions, fills = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
hits = {}
for line in open(res):
    _, n, rps = line.split("\t")
    hits.setdefault(int(n), []).append(float(rps))
slices = [float(t) for t in open(times).read().split()]
room = statistics.median(slices[1:4]) / 64 * 1e6       # fills 64..255: below max_bytes
full = statistics.median(slices[8:]) / 64 * 1e6        # fills 512..: each one evicts
base = statistics.median(hits[1])
print()
print(f"fetchgate scaling, loopback, median of {rounds} interleaved rounds")
print()
print("| cache holds | 1 KiB hits/s (32 conns, random digests) | against 1 entry |")
print("|---|---|---|")
for n in sorted(hits):
    m = statistics.median(hits[n])
    print(f"| {n:,} entries | {m:.0f} | {m / base:.2f} |")
print()
print("| fills of new 64 KiB objects | µs per fill |")
print("|---|---|")
print(f"| below max_bytes (no eviction) | {room:.0f} |")
print(f"| at max_bytes (each fill evicts) | {full:.0f} |")
print(f"| eviction cost per fill | {full - room:.0f} ({evictions} evictions counted over {fills} fills) |")
PY
