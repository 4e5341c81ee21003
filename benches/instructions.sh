#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: a figure that does not drift with
# machine noise, for the two paths benches/compare.sh times.
#
#   proxy: 1,000 sequential 1 KiB GETs through the proxy on one keep-alive connection,
#          fetchgate (default config, tee on) against Squid (caching off);
#   hit:   1,000 sequential 1 KiB GETs of a cached object, fetchgate `/sha256/<hex>` against
#          nginx serving the same file.
#
# Each server runs under callgrind with instrumentation off through start-up and a 20-request
# warm-up, on for exactly the N requests, and off again before it stops. Every thread of the
# process is counted.
#
# Usage: benches/instructions.sh   (N=1000 by default). Installs valgrind, nginx and squid with
# apt-get if missing; only ever touches 127.0.0.1; stops everything it started. FG=/path
# measures that fetchgate binary instead of building one; ONLY=hit counts the hit path alone;
# KEEP=1 keeps the callgrind files (for callgrind_annotate) in the printed directory.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
N=${N:-1000}
export PATH="/usr/sbin:$PATH"

need=()
for b in valgrind nginx squid python3; do command -v "$b" >/dev/null || need+=("$b"); done
if ((${#need[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ -z "${FG:-}" ]; then
  cargo build --release -q
  FG="$ROOT/target/release/fetchgate"
fi

W=$(mktemp -d /tmp/fetchgate-instructions.XXXXXX)
UP=127.0.0.1:18180        # nginx upstream (not measured)
SUT=127.0.0.1:18181       # the server under callgrind
ADMIN=127.0.0.1:18182
cleanup() {
  [ -f "$W/up.pid" ] && kill "$(cat "$W/up.pid")" 2>/dev/null || true
  [ -n "${SUT_PID:-}" ] && kill "$SUT_PID" 2>/dev/null || true
  sleep 0.3
  [ -n "${KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT

mkdir -p "$W/www" "$W/cg"
chmod 777 "$W/cg"   # Squid runs as its own user here: its pid, log and counts go there
head -c 1024 /dev/urandom > "$W/www/1k"
chmod 755 "$W" "$W/www"; chmod 644 "$W/www/1k"
SHA=$(sha256sum "$W/www/1k" | cut -d' ' -f1)

nginx_conf() { # listen, pid file, master_process
  cat <<EOF
worker_processes 1;
master_process $3;
daemon $3;
pid $2;
error_log $W/nginx-error.log crit;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on; tcp_nopush on; keepalive_requests 100000;
  server { listen $1; root $W/www; }
}
EOF
}
nginx_conf "$UP" "$W/up.pid" on > "$W/up.conf"
nginx -c "$W/up.conf"

cat > "$W/squid.conf" <<EOF
http_port $SUT
pid_filename $W/cg/squid.pid
cache deny all
cache_mem 8 MB
cache_dir null /tmp
access_log none
cache_log $W/cg/squid-cache.log
cache_store_log none
visible_hostname fetchgate-instructions
acl localnet src 127.0.0.0/8
http_access allow localnet
http_access deny all
shutdown_lifetime 0 seconds
pinger_enable off
EOF
cat > "$W/fetchgate.toml" <<EOF
[listen]
proxy = "$SUT"
admin = "$ADMIN"
[cache]
dir = "$W/cache"
[[egress.trust]]
cidrs = ["127.0.0.1/32"]
ports = [${UP##*:}]
EOF
nginx_conf "$SUT" "$W/sut-nginx.pid" off > "$W/sut-nginx.conf"

# Sends `count` GETs for `target` (absolute-form when `host` is given) over one connection
# and checks each answer is a 200 with 1,024 bytes.
client() { # count, request-target
  python3 - "$1" "$2" "${SUT%:*}" "${SUT##*:}" <<'PY'
import socket, sys
count, target, host, port = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
s = socket.create_connection((host, port))
f = s.makefile("rb")
req = f"GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
for _ in range(count):
    s.sendall(req)
    status = f.readline()
    length = None
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode("latin-1").partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
    body = f.read(length or 0)
    if b" 200 " not in status or len(body) != 1024:
        sys.exit(f"unexpected answer: {status!r}, {len(body)} bytes")
PY
}

wait_port() { for _ in $(seq 600); do (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null && return 0; sleep 0.1; done; echo "nothing listens on $1" >&2; exit 1; }
wait_gone() { for _ in $(seq 600); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done; kill -9 "$1" 2>/dev/null || true; }

# Runs one server under callgrind with instrumentation off, warms it up, counts only while
# the N requests run (callgrind_control turns instrumentation on and off), stops it and prints
# the instructions per request.
per_request() { # name, request-target, stop-signal
  local name=$1 target=$2 sig=$3 out="$W/cg/callgrind.$1" vg=(valgrind --tool=callgrind --instr-atstart=no)
  case $name in
    fetchgate) rm -rf "$W/cache"
       "${vg[@]}" --callgrind-out-file="$out" "$FG" serve --config "$W/fetchgate.toml" 2>"$W/$name.log" & ;;
    squid) runuser -u proxy -- "${vg[@]}" --callgrind-out-file="$out" squid -N -f "$W/squid.conf" 2>"$W/$name.log" & ;;
    nginx) "${vg[@]}" --callgrind-out-file="$out" nginx -c "$W/sut-nginx.conf" 2>"$W/$name.log" & ;;
  esac
  SUT_PID=$!
  wait_port "$SUT"
  if [ "$name" = fetchgate ] && [[ $target == /sha256/* ]]; then
    curl -fsS -o /dev/null "http://$SUT/sha256/$SHA?size=1024&url=http%3A%2F%2F$UP%2F1k"
  fi
  client 20 "$target"
  local vpid; vpid=$(pgrep -f -n -- "--callgrind-out-file=$out")
  local ctl=(callgrind_control); [ "$name" = squid ] && ctl=(runuser -u proxy -- callgrind_control)
  "${ctl[@]}" -i on "$vpid" >/dev/null
  client "$N" "$target"
  "${ctl[@]}" -i off "$vpid" >/dev/null
  kill -"$sig" "$vpid"; wait_gone "$vpid"; SUT_PID=
  awk -v n="$N" '/^totals:/ {printf "%d\n", $2 / n; exit}' "$out"
}

echo "# callgrind: $N requests per server (this takes a few minutes)" >&2
if [ -n "${KEEP:-}" ]; then echo "# callgrind files in $W/cg" >&2; fi
if [ "${ONLY:-}" != hit ]; then
  FG_PROXY=$(per_request fetchgate "http://$UP/1k" TERM)
  SQUID_PROXY=$(per_request squid "http://$UP/1k" TERM)
fi
FG_HIT=$(per_request fetchgate "/sha256/$SHA" TERM)
NGINX_HIT=$(per_request nginx "/1k" TERM)

ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
echo
echo "Instructions per request (callgrind, every thread, $N sequential requests on one connection, counted only while they ran):"
echo
echo "| path | fetchgate | peer | fetchgate/peer |"
echo "|---|---|---|---|"
if [ "${ONLY:-}" != hit ]; then echo "| 1 KiB via proxy, default config (tee on) vs Squid | $FG_PROXY | $SQUID_PROXY | $(ratio "$FG_PROXY" "$SQUID_PROXY") |"; fi
echo "| 1 KiB cache hit vs nginx | $FG_HIT | $NGINX_HIT | $(ratio "$FG_HIT" "$NGINX_HIT") |"
