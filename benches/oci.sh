#!/usr/bin/env bash
# Container image pulls, side by side, in one run: skopeo pulling an image of a few hundred MiB
# of layers (generated here: incompressible random data, gzip'd tar layers in an OCI layout)
# directly from Debian's docker-registry (CNCF distribution 2.8), and through distribution's
# own proxy mode (a second docker-registry with `proxy: remoteurl:` pointing at the first),
# cold (the proxy's storage empty) and warm (a second pull), and through fetchgate's
# `kind = "oci"` registry the same way (an empty cache directory each round), with the
# upstream's request counts from its access log and the ratios of fetchgate's times to the
# other two.
#
# Installs what it needs with apt-get (docker-registry, skopeo), and only ever touches
# loopback (127.0.0.1). Everything it starts, it stops.
#
# Usage: benches/oci.sh          (LAYERS=4 LAYER_MIB=64 ROUNDS=3 by default; override via env;
#                                 FG=/path/to/fetchgate measures another build, else
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
PIN=${PIN:-1}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pin_cores

need=()
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v skopeo >/dev/null || need+=(skopeo)
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
for a in $UP $PROXY $FGP $FGM $FGA; do
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
median() { tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# delta BEFORE AFTER: per-kind differences of two upstream_counts.
delta() { read -r a b c <<<"$1"; read -r x y z <<<"$2"; echo "$((x-a)) blob GET, $((y-b)) manifest GET, $((z-c)) manifest HEAD"; }

direct=()
for _ in $(seq "$ROUNDS"); do direct+=("$(pull $UP)"); done

cold=(); warm=(); cold_req=""; warm_req=""
for r in $(seq "$ROUNDS"); do
  rm -rf "$W/proxy-data"
  start_registry proxy $PROXY "$W/proxy-data" "http://$UP"
  before=$(upstream_counts); cold+=("$(pull $PROXY)"); mid=$(upstream_counts)
  warm+=("$(pull $PROXY)"); after=$(upstream_counts)
  [ "$r" = 1 ] && { cold_req=$(delta "$before" "$mid"); warm_req=$(delta "$mid" "$after"); }
  stop_last
done

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

fcold=(); fwarm=(); fcold_req=""; fwarm_req=""; fg_own=""
for r in $(seq "$ROUNDS"); do
  rm -rf "$W/fg-cache"
  start_fetchgate "$W/fg-cache"
  before=$(upstream_counts); fcold+=("$(pull $FGM)"); mid=$(upstream_counts)
  fwarm+=("$(pull $FGM)"); after=$(upstream_counts)
  [ "$r" = 1 ] && { fcold_req=$(delta "$before" "$mid"); fwarm_req=$(delta "$mid" "$after"); fg_own=$(fg_manifest_counts); }
  stop_last
done

printf '\nskopeo pulls of %s MiB in %s layers (%s bytes of blobs), median of %s, pinned: %s\n\n' \
  "$((LAYERS * LAYER_MIB))" "$LAYERS" "$BYTES" "$ROUNDS" "$([ ${#SUT[@]} -gt 0 ] && echo yes || echo no)"
printf '%-34s %8s %8s   %s\n' "path" "cold s" "warm s" "upstream requests (cold | warm)"
d=$(echo "${direct[*]}" | median)
printf '%-34s %8s %8s   %s\n' "direct from docker-registry" "$d" "$d" "-"
printf '%-34s %8s %8s   %s | %s\n' "distribution proxy mode" "$(echo "${cold[*]}" | median)" "$(echo "${warm[*]}" | median)" "$cold_req" "$warm_req"
fc=$(echo "${fcold[*]}" | median); fw=$(echo "${fwarm[*]}" | median)
printf '%-34s %8s %8s   %s | %s\n' "fetchgate (kind = oci)" "$fc" "$fw" "$fcold_req" "$fwarm_req"
pc=$(echo "${cold[*]}" | median); pw=$(echo "${warm[*]}" | median)
python3 - "$fc" "$fw" "$d" "$pc" "$pw" <<'PY'
import sys
fc, fw, d, pc, pw = map(float, sys.argv[1:])
print(f"\nfetchgate / direct: cold {fc / d:.2f}, warm {fw / d:.2f}; "
      f"fetchgate / proxy mode: cold {fc / pc:.2f}, warm {fw / pw:.2f}")
PY
printf "fetchgate's own count of upstream manifest requests (first round, cold + warm): %s\n" "$fg_own"
