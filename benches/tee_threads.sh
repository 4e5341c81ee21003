#!/usr/bin/env bash
# Where one teed miss spends its CPU, per thread: a 256 MiB file through fetchgate's proxy
# (alone on core 1; curl and nginx on core 0), after one warm-up miss, with each thread's
# run time from /proc/PID/task/*/schedstat (nanoseconds, not ticks) and user/system ticks.
# The forwarding task's worker has almost no user time, the fill's writer thread has the
# hash's user time, and the commit usually runs on a third (blocking) thread.
#
# Usage: benches/tee_threads.sh   (SIZE_MIB=256; FG=/path/to/fetchgate; MODE=strace adds
# `strace -c -f` of the measured miss to $OUT/strace.txt, MODE=perf a `perf record -g` of the
# process to $OUT/perf.data; QUERY='?x=1' measures the forwarding alone, the tee kept out).
# Needs taskset and two cores; loopback only; stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${SIZE_MIB:-256}
MODE=${MODE:-plain}
OUT=${OUT:-/tmp}
command -v taskset >/dev/null || { echo "needs taskset" >&2; exit 1; }
SUT=(taskset -c 1); LOAD=(taskset -c 0)
FILES=2
. benches/tee_env.sh
cat "$W"/www/* > /dev/null
"${LOAD[@]}" curl -fsS -o /dev/null -x "http://$FGP" "http://$UP/1"
sleep 1.5
# Thread id, user ticks, system ticks, run time in ns.
threads() {
  for t in /proc/"$FG_PID"/task/*; do
    echo "${t##*/} $(awk '{print $14, $15}' "$t/stat") $(cut -d' ' -f1 "$t/schedstat")"
  done
}
threads > "$W/t0"
case $MODE in
  strace) strace -c -f -p "$FG_PID" -o "$OUT/strace.txt" & SP=$!; sleep 1 ;;
  perf) perf record -q -g -p "$FG_PID" -o "$OUT/perf.data" & SP=$!; sleep 1 ;;
  *) SP= ;;
esac
"${LOAD[@]}" curl -fsS -o /dev/null -w 'MiB/s %{speed_download}\n' -x "http://$FGP" "http://$UP/2${QUERY:-}" \
  | awk '{printf "%s %.0f\n", $1, $2 / 1048576}'
sleep 1.5   # the commit
if [ -n "$SP" ]; then kill -INT "$SP"; wait "$SP" || true; fi
threads > "$W/t1"
join "$W/t0" "$W/t1" | awk '
  { ms = ($7 - $4) / 1e6; if (ms >= 5) printf "thread %s  user %d  sys %d ticks  %.1f ms\n", $1, $5 - $2, $6 - $3, ms; t += ms }
  END { printf "total %.1f ms\n", t }'
