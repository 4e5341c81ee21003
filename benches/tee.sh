#!/usr/bin/env bash
# The tee against the hash bound: a 256 MiB miss streamed through fetchgate's proxy with the
# tee on (default configuration, the body kept in the cache as it passes), against SHA-256 of
# the same bytes alone, both on the same pinned core, interleaved over ROUNDS rounds (medians).
#
#   proxy:  curl (core 0) fetches a new 256 MiB file each round through fetchgate (core 1,
#           alone) from nginx (core 0); MiB/s as curl measures it;
#   hash:   `sha256sum` of the same file (in the page cache) on core 1, and fetchgate's own
#           SHA-256 (the sha2 crate, as the tee uses it) through `fetchgate cache verify` of
#           the kept entry, on core 1;
#   CPU:    fetchgate's user + system CPU seconds for each miss (from /proc, including the
#           commit) against the user CPU seconds of `cache verify` per entry (the hash alone):
#           the ratio a dedicated core would see, far less sensitive to other load than MiB/s.
#   floor:  what a kept copy costs this machine at least, each part alone on core 1: the
#           forwarding (the same file through the proxy with a query, which the tee never
#           keeps: fetchgate's CPU for the miss without the tee), the hash (above), and
#           writing SIZE_MIB into the page cache of a new, preallocated file with writes of
#           WRITE_KIB from one buffer, then `fsync` (python's user + system CPU). Their sum
#           is the least one core can do the tee in; `tee / floor` says how close it is.
#
#   limit:  the same file through `benches/floor.rs tee` on core 1: one thread, blocking
#           sockets, no HTTP library, each chunk read once, hashed, written to the client and to
#           a new preallocated file, then `fsync` and rename; and through `floor.rs tee-splice`,
#           the same with zero-copy forwarding (splice and tee through pipes; only the copy to
#           hash and keep is read into memory). The least a tee that hashes in user space can
#           cost a core; their MiB/s and CPU beside fetchgate's.
#
# One warm-up round (an extra file through fetchgate and both limits, not counted) goes first:
# on a freshly booted VM the first touch of guest memory is slow (the host backs it lazily),
# and the first round paid it alone.
#
# Each round's file is new to fetchgate, so every fetch is a real miss that publishes. The
# entry kept is then checked by digest (the tee published exactly those bytes).
#
# Usage: benches/tee.sh   (ROUNDS=3, SIZE_MIB=256, WRITE_KIB=320: the fill's writes are hyper's
# reads from the upstream, 300 to 400 KiB by `strace -c` here). PIN=0 turns pinning off. Installs nginx
# and curl if missing; loopback only; stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
ROUNDS=${ROUNDS:-3}
SIZE_MIB=${SIZE_MIB:-256}
WRITE_KIB=${WRITE_KIB:-320}
PIN=${PIN:-1}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pin_cores
FILES=$((ROUNDS + 1))
page_reporting_note
. benches/tee_env.sh
floor_bin
# The two limits: port, pid and kept directory by mode.
declare -A FLOOR_PORT=([tee]=18483 [tee-splice]=18484) FLOOR_PID=()
for mode in tee tee-splice; do
  mkdir -p "$W/kept-$mode"
  "${SUT[@]}" "$FLOOR" "$mode" "127.0.0.1:${FLOOR_PORT[$mode]}" "$UP" "$W/kept-$mode" 2>>"$W/floor.log" & PIDS+=($!); FLOOR_PID[$mode]=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/${FLOOR_PORT[$mode]}") 2>/dev/null && break; sleep 0.1; done
done
# The warm-up round, not counted.
for port in "${FGP##*:}" "${FLOOR_PORT[@]}"; do
  "${LOAD[@]}" curl -fsS -o /dev/null -x "http://127.0.0.1:$port" "http://$UP/$FILES"
done
sleep 1
# User plus system CPU ticks a process has used (fields 14 and 15 of /proc/PID/stat).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

RES="$W/results.tsv"; : > "$RES"
mib_s() { python3 -c "print(f'{$SIZE_MIB / $1:.1f}')"; }
for r in $(seq "$ROUNDS"); do
  sha=$(sha256sum "$W/www/$r" | cut -d' ' -f1)   # also brings the file into the page cache
  cpu0=$(cpu_ticks "$FG_PID")
  v=$("${LOAD[@]}" curl -fsS -o /dev/null -w '%{speed_download}' -x "http://$FGP" "http://$UP/$r" | awk '{printf "%.1f", $1 / 1048576}')
  printf 'proxy\t%s\n' "$v" >> "$RES"
  # The kept entry: published under the digest of exactly those bytes.
  for _ in $(seq 100); do [ -f "$W/cache/objects/sha256/${sha:0:2}/$sha" ] && break; sleep 0.1; done
  [ -f "$W/cache/objects/sha256/${sha:0:2}/$sha" ] || { echo "round $r: the tee kept nothing" >&2; exit 1; }
  sleep 1   # the commit (fsync, rename, index) is part of what the tee costs
  printf 'proxy_cpu_s\t%s\n' "$(python3 -c "print(($(cpu_ticks "$FG_PID") - $cpu0) / $(getconf CLK_TCK))")" >> "$RES"
  # The forwarding alone: a URL with a query (often a signed one) is never teed (admit()).
  cpu0=$(cpu_ticks "$FG_PID")
  v=$("${LOAD[@]}" curl -fsS -o /dev/null -w '%{speed_download}' -x "http://$FGP" "http://$UP/$r?tee=no" | awk '{printf "%.1f", $1 / 1048576}')
  sleep 1
  q=$(curl -fsS "http://127.0.0.1:18482/metrics" | awk '/^fetchgate_tee_skipped_total\{reason="query"\}/ {print $2}')
  [ "${q:-0}" = "$r" ] || { echo "round $r: the forwarding-only fetch was not kept out of the tee ($q)" >&2; exit 1; }
  printf 'forward\t%s\n' "$v" >> "$RES"
  printf 'forward_cpu_s\t%s\n' "$(python3 -c "print(($(cpu_ticks "$FG_PID") - $cpu0) / $(getconf CLK_TCK))")" >> "$RES"
  # The limits: the one-core floor programs, the same file, the same work.
  for mode in tee tee-splice; do
    cpu0=$(cpu_ticks "${FLOOR_PID[$mode]}")
    v=$("${LOAD[@]}" curl -fsS -o /dev/null -w '%{speed_download}' -x "http://127.0.0.1:${FLOOR_PORT[$mode]}" "http://$UP/$r" | awk '{printf "%.1f", $1 / 1048576}')
    # floor.rs keeps its copies in DIR/kept (DIR itself with FLOOR_SPREAD=0).
    kept="$W/kept-$mode/kept/$sha"; [ "${FLOOR_SPREAD:-1}" = 0 ] && kept="$W/kept-$mode/$sha"
    for _ in $(seq 100); do [ -f "$kept" ] && break; sleep 0.1; done
    [ -f "$kept" ] || { echo "round $r: floor $mode kept nothing" >&2; cat "$W/floor.log" >&2; exit 1; }
    printf '%s\t%s\n' "$mode" "$v" >> "$RES"
    printf '%s_cpu_s\t%s\n' "$mode" "$(python3 -c "print(($(cpu_ticks "${FLOOR_PID[$mode]}") - $cpu0) / $(getconf CLK_TCK))")" >> "$RES"
  done
  # Writing a kept copy alone: into a new file next to the cache's, then fsync.
  printf 'write_cpu_s\t%s\n' "$("${SUT[@]}" python3 - "$W/floor-$r" "$SIZE_MIB" "$WRITE_KIB" <<'PY'
import os, resource, sys
path, size, chunk = sys.argv[1], int(sys.argv[2]) << 20, int(sys.argv[3]) << 10
buf = memoryview(os.urandom(chunk))
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
before = resource.getrusage(resource.RUSAGE_SELF)
os.posix_fallocate(fd, 0, size)
left = size
while left:
    left -= os.write(fd, buf[: min(chunk, left)])
os.fsync(fd)
after = resource.getrusage(resource.RUSAGE_SELF)
print(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
PY
)" >> "$RES"
  sync
  /usr/bin/time -f '%e' -o "$W/t" "${SUT[@]}" sha256sum "$W/www/$r" >/dev/null
  printf 'sha256sum\t%s\n' "$(mib_s "$(cat "$W/t")")" >> "$RES"
  /usr/bin/time -f '%e %U' -o "$W/t" "${SUT[@]}" "$FG" cache verify --config "$W/fg.toml" >/dev/null 2>&1
  read -r t u < "$W/t"
  # verify hashes every entry kept so far: the warm-up's and r rounds', SIZE_MIB each.
  printf 'sha2_cpu_s\t%s\n' "$(python3 -c "print($u / ($r + 1))")" >> "$RES"
  printf 'sha2\t%s\n' "$(python3 -c "print(f'{($r + 1) * $SIZE_MIB / $t:.1f}')")" >> "$RES"
done

python3 - "$RES" "$ROUNDS" "$SIZE_MIB" "${#SUT[@]}" "$WRITE_KIB" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, v = line.split()
    rows[k].append(float(v))
m = {k: statistics.median(v) for k, v in rows.items()}
pinned = "fetchgate and the hashes on core 1, curl and nginx on core 0" if sys.argv[4] != "0" else "not pinned"
print()
print(f"tee against the hash bound, {sys.argv[3]} MiB misses, median of {sys.argv[2]} interleaved rounds, {pinned}")
print()
print("| measurement | MiB/s | / sha2 | fetchgate's tee / this |")
print("|---|---|---|---|")
print(f"| {sys.argv[3]} MiB miss via proxy, tee on | {m['proxy']:.0f} | **{m['proxy'] / m['sha2']:.2f}** | |")
print(f"| SHA-256 alone, sha256sum | {m['sha256sum']:.0f} | | {m['proxy'] / m['sha256sum']:.2f} |")
print(f"| SHA-256 alone, fetchgate's sha2 (cache verify): the bound | {m['sha2']:.0f} | 1 | {m['proxy'] / m['sha2']:.2f} |")
for mode in ("tee", "tee-splice"):
    print(f"| the limit: benches/floor.rs {mode} | {m[mode]:.0f} | **{m[mode] / m['sha2']:.2f}** | {m['proxy'] / m[mode]:.2f} |")
print()
print("CPU seconds per miss (user + system, drift-resistant: what a dedicated core would take):")
print()
print("| work | CPU s | hash / tee |")
print("|---|---|---|")
print(f"| fetchgate, whole tee (forward, hash, write, commit) | {m['proxy_cpu_s']:.3f} | {m['sha2_cpu_s'] / m['proxy_cpu_s']:.2f} |")
print(f"| fetchgate's sha2 alone (user time of cache verify per entry) | {m['sha2_cpu_s']:.3f} | |")
for mode in ("tee", "tee-splice"):
    print(f"| the limit: benches/floor.rs {mode} (forward, hash, write, fsync, rename) | {m[mode + '_cpu_s']:.3f} | {m['sha2_cpu_s'] / m[mode + '_cpu_s']:.2f} |")
floor = m['forward_cpu_s'] + m['sha2_cpu_s'] + m['write_cpu_s']
print()
print(f"The floor of a kept copy on one core (each part alone; {sys.argv[5]} KiB writes):")
print()
print("| part | CPU s | MiB/s |")
print("|---|---|---|")
print(f"| forwarding alone (fetchgate, the tee kept out by a query) | {m['forward_cpu_s']:.3f} | {m['forward']:.0f} |")
print(f"| SHA-256 alone (fetchgate's sha2) | {m['sha2_cpu_s']:.3f} | |")
print(f"| page-cache write of a preallocated file and fsync (python) | {m['write_cpu_s']:.3f} | |")
print(f"| floor: their sum | {floor:.3f} | |")
print()
print(f"tee / floor (CPU s): {floor / m['proxy_cpu_s']:.2f}; the most hash / tee this floor allows: {m['sha2_cpu_s'] / floor:.2f}")
PY
