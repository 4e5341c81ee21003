# Shared by the bench scripts (sourced): where each process runs, and a work directory that is
# removed, with everything started in it stopped, on exit.

# SUT (the server under test: core 1) and LOAD (its peers and the load: core 0) as `taskset`
# prefixes; both empty with PIN=0, without taskset, or on one core.
pin_cores() {
  SUT=(); LOAD=()
  if [ "${PIN:-1}" != 0 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    SUT=(taskset -c 1); LOAD=(taskset -c 0)
  fi
}

# W, a new directory /tmp/fetchgate-$1.XXXXXX, and PIDS, the processes to stop: at exit each of
# them and the nginx of $W/nginx.pid, if any, is stopped and W removed.
work_dir() {
  W=$(mktemp -d "/tmp/fetchgate-$1.XXXXXX")
  PIDS=()
  trap stop_work EXIT
}

stop_work() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$W/nginx.pid" ] && kill "$(cat "$W/nginx.pid")" 2>/dev/null || true
  sleep 0.3
  chmod -R u+w "$W" 2>/dev/null || true # Go's module caches are read-only
  rm -rf "$W"
}

# FLOOR, the path of the one-core limit program (benches/floor.rs), built if needed.
floor_bin() {
  FLOOR=$(cargo bench --bench floor --no-run -q --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "floor" and m.get("executable"):
        print(m["executable"])')
  [ -x "$FLOOR" ] || { echo "could not build benches/floor.rs" >&2; exit 1; }
}

# On a VM whose balloon reports free pages to its host (free page reporting), the host takes
# free guest memory back and backs it again only when it is next touched, so each new
# page-cache page a fill writes may cost a host fault: measured here, a 256 MiB write and
# fsync took 0.05 CPU s in one hour and 0.5 to 0.7 s in another, and touching 16 GiB first did
# not hold it down for a whole run. Every column of a round pays the same, so the ratios stand;
# the absolute figures move with it. Says so when the machine reports free pages.
page_reporting_note() {
  local reported=/sys/module/page_reporting/parameters/reported_kib
  if [ -r "$reported" ] && [ "$(cat "$reported")" -gt 0 ]; then
    echo "note: this machine reports free pages to its host ($(($(cat "$reported") >> 20)) GiB so far): a new page-cache page may cost a host fault, so absolute write costs drift; compare within a run" >&2
  fi
}

# CHURN=N: a neighbour's cleanup just before the rounds, N one-byte files made in a new
# directory under /tmp and deleted (a CI runner's disk sees one after every job). On ext4
# without a journal, creating a file then skips every inode freed in the last minute or more
# in its directory's block group, so whatever each system creates in /tmp's group costs more
# for a few minutes. Off (0) by default.
neighbour_churn() {
  [ "${CHURN:-0}" -gt 0 ] || return 0
  local d
  d=$(mktemp -d /tmp/fetchgate-churn.XXXXXX)
  python3 - "$d" "$CHURN" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(0, n, 100):
    sub = os.path.join(d, str(i))
    os.mkdir(sub)
    for j in range(min(100, n - i)):
        with open(os.path.join(sub, str(j)), "wb") as f:
            f.write(b"x")
PY
  rm -rf "$d"
  echo "churn: $CHURN files made and deleted beside the bench's directory" >&2
}

# Waits until something listens on ADDR (host:port); otherwise says so, with the end of LOG
# when one is named, and exits.
wait_port() {
  for _ in $(seq 1 200); do
    (echo >/dev/tcp/${1%:*}/${1#*:}) 2>/dev/null && return 0
    sleep 0.05
  done
  echo "$(basename "$0"): nothing listens on $1${2:+; the end of $2:}" >&2
  [ -n "${2:-}" ] && tail -20 "$2" >&2
  exit 1
}

# Stops the server under test, SERVER (a PID), and reaps it.
stop_server() {
  kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
}

# CPU seconds (user + system) and peak RSS (KiB) of the server under test, SERVER.
server_usage() {
  awk '{print ($14 + $15) / 100}' "/proc/$SERVER/stat" | tr '\n' ' '
  awk '/VmHWM/ {print $2}' "/proc/$SERVER/status"
}

# The squid.conf lines both squid benches share: its files under DIR (pid, logs, a 4 GiB aufs
# cache), running as the proxy user, objects up to 512 MiB kept, 200 MiB in memory.
squid_common_conf() {
  cat <<EOF
pid_filename $1/pid
cache_effective_user proxy
coredump_dir $1
cache_dir aufs $1/cache 4096 16 256
maximum_object_size 512 MB
cache_mem 200 MB
access_log stdio:$1/access.log
cache_log $1/cache.log
cache_store_log none
EOF
}

# start_weed BASE VOLUME_MIB VOLUMES: SeaweedFS on the load core, its data in $W/weed, ports BASE
# to BASE+7 (S3 on BASE+6), one identity, and the bucket made (the script fails, showing the
# log, if it never is). Sets S3, KEY, SECRET, BUCKET and SIGV4 (curl's signing arguments).
# stop_weed stops it: weed is a wrapper whose server child can outlive a TERM, so it is
# found by its data directory and killed after three seconds.
start_weed() {
  local base=$1 volume_mib=$2 volumes=$3
  S3=127.0.0.1:$((base + 6)) KEY=fetchgate-bench SECRET=fetchgate-bench-secret BUCKET=bench
  SIGV4=(--aws-sigv4 "aws:amz:us-east-1:s3" --user "$KEY:$SECRET")
  if curl -s -o /dev/null "http://$S3/" 2>/dev/null; then
    echo "something already listens on $S3 (a SeaweedFS from an earlier run?); stop it first" >&2
    exit 1
  fi
  mkdir -p "$W/weed"
  printf '%s' "{\"identities\":[{\"name\":\"bench\",\"credentials\":[{\"accessKey\":\"$KEY\",\"secretKey\":\"$SECRET\"}],\"actions\":[\"Admin\",\"Read\",\"Write\",\"List\"]}]}" >"$W/identities.json"
  "${LOAD[@]}" weed server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$W/weed" \
    -master.port="$base" -master.port.grpc=$((base + 1)) -volume.port=$((base + 2)) \
    -volume.port.grpc=$((base + 3)) -filer.port=$((base + 4)) -filer.port.grpc=$((base + 5)) \
    -s3 -s3.port=$((base + 6)) -s3.port.grpc=$((base + 7)) -s3.port.iceberg=0 -s3.port.lance=0 \
    -s3.config="$W/identities.json" -master.volumeSizeLimitMB="$volume_mib" -volume.max="$volumes" \
    -volume.minFreeSpace=1 -master.telemetry=false >"$W/weed.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 300); do
    curl -fsS -o /dev/null "${SIGV4[@]}" -X PUT "http://$S3/$BUCKET" 2>/dev/null && break
    sleep 0.3
  done
  curl -fsS -o /dev/null "${SIGV4[@]}" "http://$S3/$BUCKET?list-type=2" || {
    echo "SeaweedFS never made the bucket; the end of $W/weed.log:" >&2
    tail "$W/weed.log" >&2
    exit 1
  }
}

stop_weed() {
  pkill -f -- "-dir=$W/weed" || true
  for _ in $(seq 30); do pgrep -f -- "-dir=$W/weed" >/dev/null || return 0; sleep 0.1; done
  pkill -9 -f -- "-dir=$W/weed" || true
  for _ in $(seq 30); do pgrep -f -- "-dir=$W/weed" >/dev/null || return 0; sleep 0.1; done
}
