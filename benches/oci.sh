#!/usr/bin/env bash
# Container image pulls, side by side, in one run: skopeo pulling an image of a few hundred MiB
# of layers (generated here: incompressible random data, gzip'd tar layers in an OCI layout)
# directly from Debian's docker-registry (CNCF distribution 2.8), and through distribution's
# own proxy mode (a second docker-registry with `proxy: remoteurl:` pointing at the first),
# cold (the proxy's storage empty) and warm (a second pull), then CONCURRENT cold pulls at
# once (8 by default; 0 skips them) on empty storage again and the same pulls warm (the clients'
# floor: N skopeo processes on one core cost that much whatever serves them), and through fetchgate's
# `kind = "oci"` registry the same way (an empty cache directory each time). Each round
# alternates which of the two goes first. A warm figure is the median of WARM warm pulls (3
# by default). The floor of a warm pull: the same image's files served by nginx alone on the
# server core (sendfile, no registry logic), pulled WARM times a round; what skopeo costs on
# its own core whatever serves it. Printed: medians and ranges of the times, the
# server's CPU (cold and warm pull) and peak RSS, the upstream's request counts from its access
# log, and the ratios of fetchgate's times to the proxy's round by round and to the direct pull.
#
# Installs what it needs with apt-get (docker-registry, skopeo, nginx), and only ever touches
# loopback (127.0.0.1). Everything it starts, it stops.
#
# Usage: benches/oci.sh          (LAYERS=4 LAYER_MIB=64 ROUNDS=3 CONCURRENT=8 WARM=3 by default;
#                                 via env; FG=/path/to/fetchgate measures another build, else
#                                 target/release/fetchgate is built)
#
# Pinning: on a machine with two cores or more, the server under test (the proxy, or
# fetchgate) runs alone on core 1, and the upstream registry and skopeo on core 0. PIN=0 turns
# it off.
set -euo pipefail
cd "$(dirname "$0")/.."
LAYERS=${LAYERS:-4}
LAYER_MIB=${LAYER_MIB:-64}
ROUNDS=${ROUNDS:-3}
CONCURRENT=${CONCURRENT:-8}
WARM=${WARM:-3}
PIN=${PIN:-1}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pin_cores

need=()
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v skopeo >/dev/null || need+=(skopeo)
command -v nginx >/dev/null || need+=(nginx)
command -v python3 >/dev/null || need+=(python3)
if ((${#need[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ -z "${FG:-}" ]; then cargo build --release -q; FG="$PWD/target/release/fetchgate"; fi

UP=127.0.0.1:15500      # docker-registry: the upstream (on the load core)
PROXY=127.0.0.1:15501   # docker-registry in proxy mode (on the server core)
FGP=127.0.0.1:15502     # fetchgate's proxy listener (on the server core)
FGM=127.0.0.1:15503     # fetchgate's oci registry listener
FGA=127.0.0.1:15504     # fetchgate's admin listener (/metrics)
FLOOR=127.0.0.1:15505   # nginx serving the image's files (on the server core): the warm floor
for a in $UP $PROXY $FGP $FGM $FGA $FLOOR; do
  if (echo >/dev/tcp/${a%:*}/${a#*:}) 2>/dev/null; then echo "oci.sh: $a is in use" >&2; exit 1; fi
done

W=$(mktemp -d /tmp/fetchgate-oci-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.3
  rm -rf "$W"
}
trap cleanup EXIT

# skopeo with no trust policy, an empty registries.conf (skopeo 1.9 reads only its hidden
# --registries-conf, not CONTAINERS_REGISTRIES_CONF), its own auth file, no proxy variables.
: >"$W/registries.conf"; echo '{}' >"$W/auth.json"
skopeo_() {
  env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy -u ALL_PROXY -u all_proxy \
    REGISTRY_AUTH_FILE="$W/auth.json" \
    "${LOAD[@]}" skopeo --insecure-policy --registries-conf "$W/registries.conf" --tmpdir "$W" "$@"
}

# The image: LAYERS layers of LAYER_MIB MiB of random bytes each, as an OCI layout tagged v1.
python3 - "$W/layout" "$LAYERS" "$LAYER_MIB" <<'PY'
import gzip, hashlib, io, json, os, sys, tarfile
out, layers, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
blobs = os.path.join(out, "blobs", "sha256"); os.makedirs(blobs)
def put(b):
    d = hashlib.sha256(b).hexdigest()
    open(os.path.join(blobs, d), "wb").write(b)
    return {"digest": "sha256:" + d, "size": len(b)}
descs, diff_ids = [], []
for i in range(layers):
    data = os.urandom(mib << 20)
    t = io.BytesIO()
    with tarfile.open(fileobj=t, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo(f"bench/layer-{i}.bin"); info.size = len(data); info.mtime = 0
        tar.addfile(info, io.BytesIO(data))
    raw = t.getvalue(); diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
    descs.append(dict(mediaType="application/vnd.oci.image.layer.v1.tar+gzip", **put(gzip.compress(raw, 1, mtime=0))))
config = put(json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode())
manifest = put(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": dict(mediaType="application/vnd.oci.image.config.v1+json", **config), "layers": descs}).encode())
open(os.path.join(out, "oci-layout"), "w").write('{"imageLayoutVersion":"1.0.0"}')
json.dump({"schemaVersion": 2, "manifests": [dict(mediaType="application/vnd.oci.image.manifest.v1+json",
    annotations={"org.opencontainers.image.ref.name": "v1"}, **manifest)]}, open(os.path.join(out, "index.json"), "w"))
# The floor's tree: the registry API's paths for a pull of bench/image:v1 as plain files.
floor = os.path.join(os.path.dirname(out), "floor", "v2", "bench", "image")
os.makedirs(os.path.join(floor, "manifests")); os.makedirs(os.path.join(floor, "blobs"))
for name in os.listdir(blobs):
    os.link(os.path.join(blobs, name), os.path.join(floor, "blobs", "sha256:" + name))
os.link(os.path.join(blobs, manifest["digest"][len("sha256:"):]), os.path.join(floor, "manifests", "v1"))
PY
BYTES=$(du -sb "$W/layout/blobs" | cut -f1)

# start_registry NAME ADDR STORAGE_DIR [REMOTE] : runs docker-registry, logging to $W/NAME.*
start_registry() {
  local name=$1 addr=$2 dir=$3 remote=${4:-} pin
  mkdir -p "$dir"
  {
    printf 'version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: false\n'
    printf 'storage:\n  filesystem:\n    rootdirectory: %s\n  redirect:\n    disable: true\n' "$dir"
    printf 'http:\n  addr: %s\n  secret: fetchgate-bench\n' "$addr"
    [ -n "$remote" ] && printf 'proxy:\n  remoteurl: %s\n' "$remote"
  } >"$W/$name.yml"
  if [ -n "$remote" ]; then pin=("${SUT[@]}"); else pin=("${LOAD[@]}"); fi
  env -i PATH="$PATH" HOME="$W" "${pin[@]}" docker-registry serve "$W/$name.yml" >>"$W/$name.access" 2>>"$W/$name.log" &
  PIDS+=($!)
  for _ in $(seq 100); do
    (echo >/dev/tcp/${addr%:*}/${addr#*:}) 2>/dev/null && return 0
    sleep 0.1
  done
  echo "oci.sh: $name did not start: $(tail -n 5 "$W/$name.log")" >&2; exit 1
}
stop_last() { kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true; unset 'PIDS[-1]'; }

start_registry upstream $UP "$W/upstream-data"
# The floor: nginx alone on the server core, one process, sendfile, the files above.
cat >"$W/nginx-floor.conf" <<EOF
daemon off; master_process off; pid $W/nginx-floor.pid; error_log $W/nginx-floor-error.log;
events { worker_connections 256; }
http { access_log off; sendfile on;
  server { listen $FLOOR; root $W/floor;
    location = /v2/ { default_type application/json; return 200 '{}'; }
    location /v2/bench/image/manifests/ { types { } default_type application/vnd.oci.image.manifest.v1+json; }
    location /v2/bench/image/blobs/ { types { } default_type application/octet-stream; } } }
EOF
"${SUT[@]}" nginx -c "$W/nginx-floor.conf" -p "$W" &
PIDS+=($!)
for _ in $(seq 100); do (echo >/dev/tcp/${FLOOR%:*}/${FLOOR#*:}) 2>/dev/null && break; sleep 0.1; done
skopeo_ copy --preserve-digests --dest-tls-verify=false "oci:$W/layout:v1" "docker://$UP/bench/image:v1" >/dev/null

# upstream_counts: "blob GETs, manifest GETs, manifest HEADs" logged so far.
upstream_counts() {
  local log="$W/upstream.access"
  printf '%s %s %s' "$(grep -c '"GET /v2/bench/image/blobs/' "$log" || true)" \
    "$(grep -c '"GET /v2/bench/image/manifests/' "$log" || true)" \
    "$(grep -c '"HEAD /v2/bench/image/manifests/' "$log" || true)"
}
# pull FROM: seconds for one skopeo pull into a fresh layout.
pull() {
  rm -rf "$W/out"
  local t0 t1
  t0=$(date +%s.%N)
  skopeo_ copy --src-tls-verify=false "docker://$1/bench/image:v1" "oci:$W/out:v1" >/dev/null
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1-$t0:.2f}')"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# warm_pulls FROM N: the median seconds of N pulls.
warm_pulls() {
  local i
  for i in $(seq "$2"); do pull "$1"; done | median
}
# pull_many FROM N: seconds until N skopeo pulls started at once into fresh layouts all ended.
pull_many() {
  local t0 t1 i pids=()
  rm -rf "$W"/out-*
  t0=$(date +%s.%N)
  for i in $(seq "$2"); do
    skopeo_ copy --src-tls-verify=false "docker://$1/bench/image:v1" "oci:$W/out-$i:v1" >/dev/null &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
  t1=$(date +%s.%N)
  rm -rf "$W"/out-*
  python3 -c "print(f'{$t1-$t0:.2f}')"
}
# delta BEFORE AFTER: per-kind differences of two upstream_counts.
delta() { read -r a b c <<<"$1"; read -r x y z <<<"$2"; echo "$((x-a)) blob GET, $((y-b)) manifest GET, $((z-c)) manifest HEAD"; }

# start_fetchgate CACHE_DIR: fetchgate with one oci registry in front of the upstream.
start_fetchgate() {
  cat >"$W/fg.toml" <<EOF
[listen]
proxy = "$FGP"
admin = "$FGA"
[cache]
dir = "$1"
max_object_bytes = $(((LAYER_MIB + 8) << 20))
[[egress.trust]]
cidrs = ["127.0.0.1/32"]
ports = [${UP##*:}]
[[registry]]
name = "bench"
kind = "oci"
upstream = "http://$UP/"
listen = "$FGM"
EOF
  "${SUT[@]}" "$FG" serve --config "$W/fg.toml" 2>>"$W/fg.log" &
  PIDS+=($!)
  for _ in $(seq 100); do
    (echo >/dev/tcp/${FGM%:*}/${FGM#*:}) 2>/dev/null && return 0
    sleep 0.1
  done
  echo "oci.sh: fetchgate did not start: $(tail -n 5 "$W/fg.log")" >&2; exit 1
}
# fg_manifest_counts: fetchgate's own count of upstream manifest GETs and HEADs.
fg_manifest_counts() {
  curl -s "http://$FGA/metrics" | awk '/^fetchgate_oci_upstream_manifest_requests_total/ {
    if ($0 ~ /method="GET"/) g = $2; if ($0 ~ /method="HEAD"/) h = $2 }
    END { printf "%d GET, %d HEAD", g, h }'
}

# One system's round: a cold pull and a warm one on empty storage, then (with CONCURRENT > 0)
# CONCURRENT cold pulls at once on empty storage again; times, the server's CPU and peak RSS,
# and the first round's upstream requests.
start_proxy() { start_registry proxy $PROXY "$W/proxy-data" "http://$UP"; }
run_system() {
  local s=$1 r=$2 addr start before mid after c0 usage first
  case $s in
    proxy) addr=$PROXY; start=start_proxy; rm -rf "$W/proxy-data" ;;
    fetchgate) addr=$FGM; start="start_fetchgate $W/fg-cache"; rm -rf "$W/fg-cache" ;;
  esac
  $start; SERVER=${PIDS[-1]}
  before=$(upstream_counts); cold[$s,$r]=$(pull "$addr"); mid=$(upstream_counts)
  first=$(pull "$addr"); after=$(upstream_counts)
  usage=$(server_usage); cpu[$s,$r]=${usage% *}; rss[$s,$r]=${usage#* }
  # The warm figure: the median of WARM pulls (one pull is too short to stand alone).
  warm[$s,$r]=$( (echo "$first"; [ "$WARM" -gt 1 ] && for _ in $(seq $((WARM - 1))); do pull "$addr"; done) | median)
  if [ "$r" = 1 ]; then
    req[$s]="$(delta "$before" "$mid") | $(delta "$mid" "$after")"
    [ "$s" = fetchgate ] && fg_own=$(fg_manifest_counts)
  fi
  stop_last
  if [ "$CONCURRENT" -gt 0 ]; then
    case $s in proxy) rm -rf "$W/proxy-data" ;; fetchgate) rm -rf "$W/fg-cache" ;; esac
    $start; SERVER=${PIDS[-1]}
    before=$(upstream_counts); many[$s,$r]=$(pull_many "$addr" "$CONCURRENT"); after=$(upstream_counts)
    [ "$r" = 1 ] && req_many[$s]=$(delta "$before" "$after")
    # The same pulls again, every blob now stored: what the clients cost on their core, the
    # floor of the cold figure whatever the server does.
    manywarm[$s,$r]=$(pull_many "$addr" "$CONCURRENT")
    usage=$(server_usage); (( ${usage#* } > ${rss[$s,$r]} )) && rss[$s,$r]=${usage#* }
    stop_last
  fi
}

declare -A cold warm many manywarm cpu rss req req_many
direct=(); fg_own=""
systems=(proxy fetchgate)
pull "$FLOOR" >/dev/null # the floor's files read once before its first timed pull
for r in $(seq "$ROUNDS"); do
  direct+=("$(pull $UP)")
  # Alternate which system goes first, so neither always meets a warmer machine.
  if ((r % 2)); then order=(floor proxy fetchgate); else order=(fetchgate proxy floor); fi
  for s in "${order[@]}"; do
    if [ "$s" = floor ]; then warm[floor,$r]=$(warm_pulls "$FLOOR" "$WARM"); else run_system "$s" "$r"; fi
  done
done

# col TABLE SYSTEM: that system's figures of every round; stats: "median (min-max)".
col() { local t=$1 s=$2 r; for r in $(seq "$ROUNDS"); do eval "echo \${$t[$s,$r]}"; done; }
stats() { sort -n | awk '{a[NR]=$1} END {printf "%s (%s-%s)", a[int((NR+1)/2)], a[1], a[NR]}'; }
# ratios A B: the round-by-round ratios of fetchgate's figures in table A to the proxy's.
ratios() { local r; for r in $(seq "$ROUNDS"); do eval "awk -v f=\${$1[fetchgate,$r]} -v p=\${$1[proxy,$r]} 'BEGIN {printf \"%.2f\\n\", f / p}'"; done; }

printf '\nskopeo pulls of %s MiB in %s layers (%s bytes of blobs), %s rounds alternating which system goes first, pinned: %s\n\n' \
  "$((LAYERS * LAYER_MIB))" "$LAYERS" "$BYTES" "$ROUNDS" "$([ ${#SUT[@]} -gt 0 ] && echo yes || echo no)"
printf '%-24s %-20s %-20s %-22s %-22s %-12s %-8s\n' system "cold s" "warm s" "$CONCURRENT at once, cold s" \
  "$CONCURRENT at once, warm s" "CPU s c+w" "RSS MiB"
printf '%-24s %-20s %-20s\n' "direct (docker-registry)" "$(printf '%s\n' "${direct[@]}" | stats)" "-"
printf '%-24s %-20s %-20s\n' "floor (nginx, the files)" "-" "$(col warm floor | stats)"
for s in "${systems[@]}"; do
  printf '%-24s %-20s %-20s %-22s %-22s %-12s %-8s\n' "$s" "$(col cold $s | stats)" "$(col warm $s | stats)" \
    "$([ "$CONCURRENT" -gt 0 ] && col many $s | stats || echo -)" \
    "$([ "$CONCURRENT" -gt 0 ] && col manywarm $s | stats || echo -)" "$(col cpu $s | median)" \
    "$(($(col rss $s | sort -n | tail -1) >> 10))"
done
printf '\nupstream requests, first round (cold | warm; %s at once):\n' "$CONCURRENT"
for s in "${systems[@]}"; do printf '  %-10s %s; %s\n' "$s" "${req[$s]}" "${req_many[$s]:--}"; done
printf "fetchgate's own count of upstream manifest requests (first round, cold + warm): %s\n" "$fg_own"
printf '\nfetchgate / proxy mode, median of the rounds (range): cold %s, warm %s' \
  "$(ratios cold | stats)" "$(ratios warm | stats)"
[ "$CONCURRENT" -gt 0 ] && printf ', %s at once %s' "$CONCURRENT" "$(ratios many | stats)"
if [ "$CONCURRENT" -gt 0 ]; then
  # Each system's cold pulls at once against its own warm ones, round by round: 1.00 is the
  # clients' floor (the N skopeo processes share one core), whatever the server.
  floor() { local r; for r in $(seq "$ROUNDS"); do eval "awk -v c=\${many[$1,$r]} -v w=\${manywarm[$1,$r]} 'BEGIN {printf \"%.2f\\n\", c / w}'"; done; }
  printf '\n%s at once, cold / the same pulls warm (the clients'"'"' floor): proxy %s, fetchgate %s' \
    "$CONCURRENT" "$(floor proxy | stats)" "$(floor fetchgate | stats)"
fi
# Each system's warm pulls against the floor's in the same round.
over_floor() { local r; for r in $(seq "$ROUNDS"); do eval "awk -v s=\${warm[$1,$r]} -v f=\${warm[floor,$r]} 'BEGIN {printf \"%.2f\\n\", s / f}'"; done; }
printf '\nwarm / the floor (nginx serving the same files on the server core): proxy %s, fetchgate %s' \
  "$(over_floor proxy | stats)" "$(over_floor fetchgate | stats)"
printf '\nfetchgate / direct: cold %s, warm %s\n' \
  "$(awk -v f="$(col cold fetchgate | median)" -v d="$(printf '%s\n' "${direct[@]}" | median)" 'BEGIN {printf "%.2f", f / d}')" \
  "$(awk -v f="$(col warm fetchgate | median)" -v d="$(printf '%s\n' "${direct[@]}" | median)" 'BEGIN {printf "%.2f", f / d}')"
