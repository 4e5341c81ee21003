#!/usr/bin/env bash
# Side-by-side comparison of fetchgate with Squid (caching off), tinyproxy and nginx, in one
# run, interleaved, each measurement repeated ROUNDS times with the median reported.
#
# Installs what it needs with apt-get (nginx, squid, tinyproxy, wrk, curl), builds fetchgate
# in release mode, and only ever touches loopback (127.0.0.1). Everything it starts, it stops.
#
# Usage: benches/compare.sh            (ROUNDS=3 DURATION=5 by default; override via env)
#        EXTRA=0 skips the callgrind figures (benches/instructions.sh) and the scaling rows
#        (benches/scaling.sh) that follow the table.
#
# Pinning: on a machine with two cores or more, every server under test (fetchgate, Squid,
# tinyproxy, and the reference nginx for hits) runs alone on core 1, and the load generator and
# the upstream nginx on core 0, so the ratios compare per-core work. PIN=0 turns it off.
# fetchgate runs its default configuration (the tee on) for the headline rows; the tee-off
# instance is the second row.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
PIN=${PIN:-1}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pin_cores

need=()
for b in nginx squid tinyproxy wrk curl python3; do command -v "$b" >/dev/null || need+=("$b"); done
if ((${#need[@]})); then
  pkgs=()
  for b in "${need[@]}"; do [ "$b" = python3 ] && pkgs+=(python3) || pkgs+=("$b"); done
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi
export PATH="/usr/sbin:$PATH"

cargo build --release -q
FG="$ROOT/target/release/fetchgate"

W=$(mktemp -d /tmp/fetchgate-compare.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$W/nginx.pid" ] && kill "$(cat "$W/nginx.pid")" 2>/dev/null || true
  [ -f "$W/nginx-ref.pid" ] && kill "$(cat "$W/nginx-ref.pid")" 2>/dev/null || true
  sleep 0.5
  rm -rf "$W"
}
trap cleanup EXIT
fail_logs() { echo "--- fetchgate logs" >&2; for f in "$W"/fg-*.log; do tail -n 5 "$f"; done >&2 || true; }
trap fail_logs ERR

UP=127.0.0.1:18080        # nginx: the upstream (on the load core)
REF=127.0.0.1:18081       # nginx: the reference for cache hits (on the server core)
SQUID=127.0.0.1:13128
TINY=127.0.0.1:13129
FGT=127.0.0.1:13130       # fetchgate, cache tee on
FGN=127.0.0.1:13131       # fetchgate, cache tee off

for a in $UP $REF $SQUID $TINY $FGT $FGN 127.0.0.1:19130 127.0.0.1:19131; do
  if (exec 3<>"/dev/tcp/${a%:*}/${a##*:}") 2>/dev/null; then
    echo "something already listens on $a; stop it and run again" >&2; exit 1
  fi
done

echo "# preparing files in $W"
mkdir -p "$W/www"
head -c 1024 /dev/urandom > "$W/www/1k"
head -c $((1 << 20)) /dev/urandom > "$W/www/1m"
head -c $((256 << 20)) /dev/urandom > "$W/www/256m"
head -c $((256 << 20)) /dev/urandom > "$W/www/256m-kept"
truncate -s 1G "$W/www/1g"
chmod 755 "$W" "$W/www"; chmod 644 "$W"/www/*   # nginx workers run unprivileged
SHA_1K=$(sha256sum "$W/www/1k" | cut -d' ' -f1)
SHA_256M=$(sha256sum "$W/www/256m" | cut -d' ' -f1)
SHA_KEPT=$(sha256sum "$W/www/256m-kept" | cut -d' ' -f1)

nginx_conf() { # listen, pid file
  cat <<EOF
worker_processes 1;
pid $2;
error_log $W/nginx-error.log crit;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on; tcp_nopush on; keepalive_requests 100000;
  server { listen $1; root $W/www; }
}
EOF
}
nginx_conf "$UP" "$W/nginx.pid" > "$W/nginx.conf"
nginx_conf "$REF" "$W/nginx-ref.pid" > "$W/nginx-ref.conf"
"${LOAD[@]}" nginx -c "$W/nginx.conf"
"${SUT[@]}" nginx -c "$W/nginx-ref.conf"

cat > "$W/squid.conf" <<EOF
http_port $SQUID
pid_filename $W/squid.pid
cache deny all
cache_mem 8 MB
cache_dir null /tmp
access_log none
cache_log $W/squid-cache.log
cache_store_log none
visible_hostname fetchgate-compare
acl localnet src 127.0.0.0/8
http_access allow localnet
http_access deny all
max_filedescriptors 8192
shutdown_lifetime 0 seconds
EOF
"${SUT[@]}" squid -N -f "$W/squid.conf" >/dev/null 2>&1 & PIDS+=($!)

cat > "$W/tinyproxy.conf" <<EOF
User nobody
Group nogroup
Port ${TINY##*:}
Listen 127.0.0.1
Timeout 600
MaxClients 2048
LogLevel Critical
PidFile "$W/tinyproxy.pid"
Allow 127.0.0.1
EOF
"${SUT[@]}" tinyproxy -d -c "$W/tinyproxy.conf" >/dev/null 2>&1 & PIDS+=($!)

fg_config() { # listen, admin, cache dir, tee max bytes
  cat <<EOF
[listen]
proxy = "$1"
admin = "$2"
[proxy]
max_connections = 8192
[cache]
dir = "$3"
max_object_bytes = $4
memory_bytes = 67108864
[[egress.trust]]
cidrs = ["127.0.0.1/32"]
ports = [${UP##*:}]
EOF
}
fg_config "$FGT" 127.0.0.1:19130 "$W/cache-tee" 1073741824 > "$W/fg-tee.toml"
fg_config "$FGN" 127.0.0.1:19131 "$W/cache-notee" 1 > "$W/fg-notee.toml"
"${SUT[@]}" "$FG" serve --config "$W/fg-tee.toml" 2>"$W/fg-tee.log" & PIDS+=($!); FG_TEE_PID=$!
"${SUT[@]}" "$FG" serve --config "$W/fg-notee.toml" 2>"$W/fg-notee.log" & PIDS+=($!); FG_NOTEE_PID=$!

wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null && return 0; sleep 0.1; done; echo "nothing listens on $1" >&2; exit 1; }
for a in $UP $REF $SQUID $TINY $FGT $FGN; do wait_port "$a"; done

# Warm fetchgate's cache: 1 KiB (memory tier) and 256 MiB (disk) by digest.
curl -fsS -o /dev/null "http://$FGT/sha256/$SHA_1K?size=1024&url=http%3A%2F%2F$UP%2F1k"
curl -fsS -o /dev/null "http://$FGT/sha256/$SHA_256M?size=$((256 << 20))&url=http%3A%2F%2F$UP%2F256m"
# Sanity: every path returns the right bytes.
for p in $SQUID $TINY $FGT $FGN; do
  [ "$(curl -fsS -x "http://$p" "http://$UP/1k" | sha256sum | cut -d' ' -f1)" = "$SHA_1K" ] || { echo "wrong bytes via $p" >&2; exit 1; }
done

cat > "$W/absolute.lua" <<EOF
wrk.path = "http://$UP/1k"
EOF
RES="$W/results.tsv"; : > "$RES"
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$RES"; }

wrk_rps() { # proxy-or-server, connections, mode(abs|direct|hit) -> "rps p50_ms p99_ms"
  local target=$1 conns=$2 mode=$3 out
  case $mode in
    abs) out=$("${LOAD[@]}" wrk -t1 -c"$conns" -d"${DURATION}s" --latency -s "$W/absolute.lua" "http://$target/" 2>/dev/null) ;;
    direct) out=$("${LOAD[@]}" wrk -t1 -c"$conns" -d"${DURATION}s" --latency "http://$target/1k" 2>/dev/null) ;;
    hit) out=$("${LOAD[@]}" wrk -t1 -c"$conns" -d"${DURATION}s" --latency "http://$target/sha256/$SHA_1K" 2>/dev/null) ;;
  esac
  python3 - "$out" <<'PY'
import re, sys
t = sys.argv[1]
def ms(label):
    m = re.search(r'^\s*' + label + r'\s+([\d.]+)(us|ms|s)\s*$', t, re.M)
    if not m: return float('nan')
    v, u = float(m.group(1)), m.group(2)
    return v / 1000 if u == 'us' else v * 1000 if u == 's' else v
rps = re.search(r'Requests/sec:\s+([\d.]+)', t)
errs = re.search(r'Non-2xx or 3xx responses:\s+(\d+)', t)
print(f"{float(rps.group(1)) if rps else float('nan'):.0f} {ms('50%'):.3f} {ms('99%'):.3f} {errs.group(1) if errs else 0}")
PY
}

mib_s() { # url [proxy] -> MiB/s
  local args=(-fsS -o /dev/null -w '%{speed_download}')
  [ -n "${2:-}" ] && args+=(-x "http://$2")
  "${LOAD[@]}" curl "${args[@]}" "$1" | awk '{printf "%.1f", $1 / 1048576}'
}

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

echo "# measuring: $ROUNDS rounds, interleaved"
for round in $(seq "$ROUNDS"); do
  for c in 32 256; do
    for who in fetchgate fetchgate-notee squid tinyproxy; do
      case $who in fetchgate) t=$FGT ;; fetchgate-notee) t=$FGN ;; squid) t=$SQUID ;; tinyproxy) t=$TINY ;; esac
      read -r rps p50 p99 bad < <(wrk_rps "$t" "$c" abs)
      [ "$bad" = 0 ] || echo "warning: $who returned $bad non-2xx responses at c=$c" >&2
      record "small_rps_c$c" "$who" "$rps"; record "small_p50_ms_c$c" "$who" "$p50"; record "small_p99_ms_c$c" "$who" "$p99"
    done
  done
  for who in fetchgate-tee fetchgate-notee squid tinyproxy; do
    case $who in fetchgate-tee) t=$FGT ;; fetchgate-notee) t=$FGN ;; squid) t=$SQUID ;; tinyproxy) t=$TINY ;; esac
    record stream_256m_mib_s "$who" "$(mib_s "http://$UP/256m" "$t")"
  done
  read -r rps _ _ _ < <(wrk_rps "$FGT" 32 hit); record hit_1k_rps fetchgate "$rps"
  read -r rps _ _ _ < <(wrk_rps "$REF" 32 direct); record hit_1k_rps nginx "$rps"
  record hit_256m_mib_s fetchgate "$(mib_s "http://$FGT/sha256/$SHA_256M")"
  record hit_256m_mib_s nginx "$(mib_s "http://$REF/256m")"
done

# A 256 MiB artifact proxied once at full speed with the default config is kept: afterwards
# it is served by digest.
record stream_256m_kept_mib_s fetchgate-tee "$(mib_s "http://$UP/256m-kept" "$FGT")"
sleep 1
KEPT=$(curl -s -o /dev/null -w '%{http_code}' "http://$FGT/sha256/$SHA_KEPT")

echo "# memory"
record rss_idle_mib fetchgate "$(( $(rss_kib "$FG_NOTEE_PID") / 1024 ))"
python3 - "$FGN" "$UP" > "$W/idle.out" <<'PY' &
import socket, sys, time
proxy, up = sys.argv[1], sys.argv[2]
host, port = proxy.split(':')
conns = []
for _ in range(1000):
    s = socket.create_connection((host, int(port)))
    s.sendall(f"GET http://{up}/1k HTTP/1.1\r\nHost: {up}\r\n\r\n".encode())
    conns.append(s)
for s in conns:
    s.settimeout(10)
    got = b""
    while b"\r\n\r\n" not in got:
        got += s.recv(4096)
print("open", len(conns), flush=True)
time.sleep(6)
PY
CLIENTS=$!
for _ in $(seq 100); do grep -q open "$W/idle.out" 2>/dev/null && break; sleep 0.1; done
sleep 1
record rss_1000_clients_mib fetchgate "$(( $(rss_kib "$FG_NOTEE_PID") / 1024 ))"
wait "$CLIENTS" || true
before=$(rss_kib "$FG_TEE_PID")
curl -fsS -o /dev/null -x "http://$FGT" "http://$UP/1g" & STREAM=$!
peak=$before
while kill -0 "$STREAM" 2>/dev/null; do r=$(rss_kib "$FG_TEE_PID"); ((r > peak)) && peak=$r; sleep 0.05; done
record rss_stream_1g_growth_mib fetchgate-tee "$(( (peak - before) / 1024 ))"
record rss_stream_1g_peak_mib fetchgate-tee "$(( peak / 1024 ))"

python3 - "$RES" "$ROUNDS" "${KEPT:-?}" "${#SUT[@]}" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, who, v = line.rstrip("\n").split("\t")
    try: rows[(k, who)].append(float(v))
    except ValueError: pass
med = {k: statistics.median(v) for k, v in rows.items() if v}
def m(k, who): return med.get((k, who), float('nan'))
def ratio(a, b): return a / b if b else float('nan')
print()
pinned = "servers under test on core 1, load and upstream on core 0" if sys.argv[4] != "0" else "not pinned"
print(f"fetchgate side-by-side, median of {sys.argv[2]} interleaved rounds, 2-core machine, loopback only, {pinned}")
print()
print("| measurement | fetchgate | Squid | tinyproxy | nginx | fetchgate/Squid | fetchgate/tinyproxy | fetchgate-hit/nginx |")
print("|---|---|---|---|---|---|---|---|")
for c in (32, 256):
    f, s, t = m(f"small_rps_c{c}", "fetchgate"), m(f"small_rps_c{c}", "squid"), m(f"small_rps_c{c}", "tinyproxy")
    print(f"| 1 KiB via proxy, {c} conns, default config (tee on) (req/s) | {f:.0f} | {s:.0f} | {t:.0f} | | {ratio(f,s):.2f} | {ratio(f,t):.2f} | |")
    f = m(f"small_rps_c{c}", "fetchgate-notee")
    print(f"| 1 KiB via proxy, {c} conns, tee off (req/s) | {f:.0f} | {s:.0f} | {t:.0f} | | {ratio(f,s):.2f} | {ratio(f,t):.2f} | |")
    for q in ("p50", "p99"):
        f, s, t = (m(f"small_{q}_ms_c{c}", w) for w in ("fetchgate", "squid", "tinyproxy"))
        print(f"| 1 KiB via proxy, {c} conns, {q} (ms) | {f:.2f} | {s:.2f} | {t:.2f} | | {ratio(s,f):.2f} (Squid/fetchgate) | {ratio(t,f):.2f} (tinyproxy/fetchgate) | |")
ft, fn, s, t = (m("stream_256m_mib_s", w) for w in ("fetchgate-tee", "fetchgate-notee", "squid", "tinyproxy"))
print(f"| 256 MiB miss via proxy, tee on (MiB/s) | {ft:.0f} | {s:.0f} | {t:.0f} | | {ratio(ft,s):.2f} | {ratio(ft,t):.2f} | |")
print(f"| 256 MiB miss via proxy, tee off (MiB/s) | {fn:.0f} | {s:.0f} | {t:.0f} | | {ratio(fn,s):.2f} | {ratio(fn,t):.2f} | |")
print(f"| 256 MiB proxied once, tee on, then GET /sha256/<hex> (status) | {sys.argv[3]} | | | | | | |")
f, n = m("hit_1k_rps", "fetchgate"), m("hit_1k_rps", "nginx")
print(f"| 1 KiB hit, 32 conns (req/s) | {f:.0f} | | | {n:.0f} | | | {ratio(f,n):.2f} |")
f, n = m("hit_256m_mib_s", "fetchgate"), m("hit_256m_mib_s", "nginx")
print(f"| 256 MiB hit from disk (MiB/s) | {f:.0f} | | | {n:.0f} | | | {ratio(f,n):.2f} |")
print()
print("| fetchgate memory | MiB |")
print("|---|---|")
print(f"| RSS idle | {m('rss_idle_mib','fetchgate'):.0f} |")
print(f"| RSS with 1,000 open keep-alive clients | {m('rss_1000_clients_mib','fetchgate'):.0f} |")
print(f"| RSS growth while streaming 1 GiB (tee on) | {m('rss_stream_1g_growth_mib','fetchgate-tee'):.0f} |")
print(f"| RSS peak while streaming 1 GiB (tee on) | {m('rss_stream_1g_peak_mib','fetchgate-tee'):.0f} |")
PY

# One figure per path that does not drift with machine noise (callgrind instructions per
# request), and whether hits and fills depend on how much the cache holds.
if [ "${EXTRA:-1}" != 0 ]; then
  bash benches/instructions.sh
  PIN=$PIN ROUNDS=$ROUNDS DURATION=$DURATION bash benches/scaling.sh
fi
