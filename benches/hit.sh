#!/usr/bin/env bash
# The 1 KiB cache hit against nginx on the same core, and against another fetchgate build:
# nginx serving the file, and each fetchgate binary serving it as `GET /sha256/<hex>` from its
# cache, all alone on core 1 in turn, wrk (1 thread, 32 connections) on core 0; rounds
# interleaved, medians reported. A shorter form of the hit row of benches/compare.sh, for
# comparing builds in one run.
#
# Usage: FG=/path/fetchgate [FG_BEFORE=/path/fetchgate] benches/hit.sh   (ROUNDS=5 DURATION=5)
# Needs nginx and wrk (apt-get install -y nginx wrk). Only touches 127.0.0.1; stops what it
# started.
set -euo pipefail
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
export PATH="/usr/sbin:$PATH"
: "${FG:?FG=/path/to/fetchgate}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pin_cores
work_dir hit
REF=127.0.0.1:18381
mkdir -p "$W/www"
head -c 1024 /dev/urandom > "$W/www/1k"
chmod 755 "$W" "$W/www"; chmod 644 "$W/www/1k"
SHA=$(sha256sum "$W/www/1k" | cut -d' ' -f1)
# As benches/compare.sh runs it: a master and one worker (measured 15-20% faster here than
# one process with master_process off).
cat > "$W/nginx.conf" <<EOF
worker_processes 1;
pid $W/nginx.pid;
error_log $W/nginx-error.log crit;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on; tcp_nopush on; keepalive_requests 100000;
  server { listen $REF; root $W/www; }
}
EOF
"${SUT[@]}" nginx -e "$W/nginx-error.log" -c "$W/nginx.conf"

wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null && return 0; sleep 0.1; done; echo "nothing listens on $1" >&2; exit 1; }
wait_port "$REF"

start_fg() { # name, binary, port
  cat > "$W/$1.toml" <<EOF
[listen]
proxy = "127.0.0.1:$3"
admin = "127.0.0.1:$(( $3 + 1 ))"
[cache]
dir = "$W/cache-$1"
[[egress.trust]]
cidrs = ["127.0.0.1/32"]
ports = [${REF##*:}]
EOF
  "${SUT[@]}" "$2" serve --config "$W/$1.toml" 2>"$W/$1.log" & PIDS+=($!)
  wait_port "127.0.0.1:$3"
  curl -fsS -o /dev/null "http://127.0.0.1:$3/sha256/$SHA?size=1024&url=http%3A%2F%2F$REF%2F1k"
}
names=(nginx); targets=("http://$REF/1k")
start_fg after "$FG" 18383; names+=(fetchgate); targets+=("http://127.0.0.1:18383/sha256/$SHA")
if [ -n "${FG_BEFORE:-}" ]; then
  start_fg before "$FG_BEFORE" 18385; names+=(fetchgate-before); targets+=("http://127.0.0.1:18385/sha256/$SHA")
fi

declare -A got
for ((r = 1; r <= ROUNDS; r++)); do
  for i in "${!names[@]}"; do
    rps=$("${LOAD[@]}" wrk -t1 -c32 -d"${DURATION}s" "${targets[$i]}" | awk '/Requests\/sec/ {print $2}')
    got[${names[$i]}]+="$rps "
    echo "round $r: ${names[$i]} $rps req/s" >&2
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
n=$(echo "${got[nginx]}" | median)
echo "1 KiB hit, 32 connections, wrk on core 0, servers alone on core 1, median of $ROUNDS interleaved rounds of ${DURATION}s"
echo
echo "| server | req/s | against nginx |"
echo "|---|---|---|"
for name in "${names[@]}"; do
  v=$(echo "${got[$name]}" | median)
  echo "| $name | $v | $(python3 -c "print(f'{$v / $n:.2f}')") |"
done
