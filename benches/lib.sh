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
