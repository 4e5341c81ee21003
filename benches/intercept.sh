#!/usr/bin/env bash
# TLS interception side by side, in one run: `npm install` of a project with N generated
# packages (tarballs of about 1 MiB of incompressible payload, packuments with dist.integrity
# sha512) from an HTTPS npm registry on loopback under a NAME (nginx, a certificate from a CA
# made here), through two proxies that each see inside the TLS, npm knowing nothing but
# HTTPS_PROXY and the proxy's CA (npm's `cafile`):
#   fetchgate  NAME in `[intercept] hosts`, a `[[registry]] kind = "npm"` whose upstream is
#              https://NAME/ (so every request in the tunnel is served by the verified npm
#              registry), the bench CA in `[tls] extra_roots`;
#   squid      squid-openssl with `ssl_bump peek step1` and `ssl_bump bump all`, certificates
#              minted by security_file_certgen, the bench CA in `tls_outgoing_options cafile=`,
#              a disk cache big enough for everything and tarballs kept as immutable.
# Cold (each proxy started with empty caches, a fresh npm cache dir) and warm (a second fresh
# npm client through the same warm proxy), ROUNDS rounds alternating which goes first; prints
# medians and ranges, the upstream's tarball and packument requests, each proxy's CPU seconds
# and peak RSS (squid's main process; its certificate helpers are not counted) and
# fetchgate/squid per round, and for scale npm straight to the upstream once a round. Before the rounds, once: one tarball's bytes changed upstream
# after its packument was published, installed through each proxy: what npm saw, and whether
# the tampered bytes were kept in that proxy's cache.
#
# NAME must resolve to 127.0.0.1 for npm, squid and fetchgate without touching the machine's
# /etc/hosts: the script re-executes itself (as root) inside new network, mount and PID
# namespaces (`unshare -n -m -p`), brings `lo` up and bind-mounts a private hosts file and a
# resolv.conf naming 127.0.0.1 over the real ones there, where dnsmasq answers NAME on
# 127.0.0.1:53 (fetchgate resolves names itself, through `[resolver] nameservers`). Nothing in
# the namespace can reach beyond loopback, and everything started in it ends with it.
#
# Installs what it needs with apt-get (squid-openssl, which takes the place of the GnuTLS
# `squid` package and keeps its `squid` command; nginx, dnsmasq-base, npm, curl, openssl).
# Everything it starts, it stops.
#
# Usage: sudo benches/intercept.sh   (N=20 ROUNDS=3 NAME=registry.bench.test by default;
#                                     FG=/path/to/fetchgate measures another build, else
#                                     target/release/fetchgate is built)
#
# Pinning: on a machine with two cores or more, the proxy under test runs alone on core 1, and
# nginx, dnsmasq and npm on core 0 (benches/lib.sh). PIN=0 turns it off.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/.."
N=${N:-20}
ROUNDS=${ROUNDS:-3}
NAME=${NAME:-registry.bench.test}
source benches/lib.sh
pin_cores

if [ -z "${FG_INTERCEPT_NS:-}" ]; then
  [ "$(id -u)" = 0 ] || { echo "intercept.sh: run it as root (it needs its own network namespace)" >&2; exit 1; }
  need=()
  [ -x /usr/lib/squid/security_file_certgen ] || need+=(squid-openssl)
  command -v nginx >/dev/null || need+=(nginx)
  command -v dnsmasq >/dev/null || need+=(dnsmasq-base)
  command -v npm >/dev/null || need+=(npm)
  command -v curl >/dev/null || need+=(curl)
  command -v openssl >/dev/null || need+=(openssl)
  if ((${#need[@]})); then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  if [ -z "${FG:-}" ]; then cargo build --release -q; FG="$PWD/target/release/fetchgate"; fi
  export FG N ROUNDS NAME FG_INTERCEPT_NS=1
  exec unshare -n -m -p --fork --mount-proc -- bash "$SELF" "$@"
fi

# --- Inside the namespaces: loopback up, NAME in a private hosts file, dnsmasq answering. ----
ip link set lo up
work_dir intercept-bench
# nginx's workers, squid and its helpers run as other users: they must reach their files in W.
chmod 755 "$W"
printf '127.0.0.1 localhost %s\n::1 localhost\n' "$NAME" >"$W/hosts"
printf 'nameserver 127.0.0.1\n' >"$W/resolv.conf"
mount --bind "$W/hosts" /etc/hosts
mount --bind "$W/resolv.conf" /etc/resolv.conf
"${LOAD[@]}" dnsmasq --keep-in-foreground --no-resolv --no-hosts --user=root --pid-file= \
  --listen-address=127.0.0.1 --bind-interfaces --port=53 \
  --address="/$NAME/127.0.0.1" --local="/$NAME/" --log-facility="$W/dnsmasq.log" &
PIDS+=($!)

UP=127.0.0.1:443      # nginx: the upstream registry (load core)
FGP=127.0.0.1:15701   # fetchgate's proxy listener (server core)
FGA=127.0.0.1:15702   # fetchgate's admin listener
SQUID=127.0.0.1:15703 # squid (server core)

# --- The CAs: the upstream's (trusted by both proxies), fetchgate's and squid's. ------------
mkdir -p "$W/ca" "$W/fgca"
ossl() { openssl "$@" 2>/dev/null; }
printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n' >"$W/ca/ca.ext"
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:%s\nauthorityKeyIdentifier=keyid\n' "$NAME" >"$W/ca/leaf.ext"
# new_ca DIR NAME CN: DIR/NAME.pem and DIR/NAME.key, a self-signed RSA CA.
new_ca() {
  ossl req -new -newkey rsa:2048 -nodes -keyout "$1/$2.key" -out "$1/$2.csr" -subj "/CN=$3"
  ossl x509 -req -in "$1/$2.csr" -signkey "$1/$2.key" -days 2 -extfile "$W/ca/ca.ext" -out "$1/$2.pem"
}
new_ca "$W/ca" bench "fetchgate bench upstream CA"
ossl req -new -newkey rsa:2048 -nodes -keyout "$W/ca/up.key" -out "$W/ca/up.csr" -subj "/CN=$NAME"
ossl x509 -req -in "$W/ca/up.csr" -CA "$W/ca/bench.pem" -CAkey "$W/ca/bench.key" -CAcreateserial \
  -days 2 -extfile "$W/ca/leaf.ext" -out "$W/ca/up.pem"
"$FG" intercept ca --host "$NAME" --dir "$W/fgca" >/dev/null
mkdir -p "$W/sqca"
new_ca "$W/sqca" squid-ca "squid bench CA"

# --- The registry: N packages, ~1 MiB of random bytes each, packuments pointing at NAME. ----
python3 - "$W/up" "$N" "$NAME" <<'PY'
import base64, gzip, hashlib, io, json, os, sys, tarfile
out, n, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(os.path.join(out, "packuments"))
for i in range(1, n + 1):
    pkg = f"fgb-{i:03d}"
    members = [("package/package.json", json.dumps({"name": pkg, "version": "1.0.0", "main": "index.js"}).encode()),
               ("package/index.js", f"module.exports = {pkg!r};\n".encode()),
               ("package/payload.bin", os.urandom(1 << 20))]
    t = io.BytesIO()
    with tarfile.open(fileobj=t, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path, data in members:
            info = tarfile.TarInfo(path); info.size = len(data); info.mtime = 0; info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    tgz = gzip.compress(t.getvalue(), 6, mtime=0)
    d = os.path.join(out, pkg, "-"); os.makedirs(d)
    open(os.path.join(d, f"{pkg}-1.0.0.tgz"), "wb").write(tgz)
    dist = {"integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode(),
            "shasum": hashlib.sha1(tgz).hexdigest(),
            "tarball": f"https://{name}/{pkg}/-/{pkg}-1.0.0.tgz"}
    doc = {"name": pkg, "dist-tags": {"latest": "1.0.0"},
           "versions": {"1.0.0": {"name": pkg, "version": "1.0.0", "main": "index.js", "dist": dist}}}
    json.dump(doc, open(os.path.join(out, "packuments", pkg + ".json"), "w"))
PY
total=$(cat "$W"/up/fgb-*/-/*.tgz | wc -c)
echo "intercept.sh: $N packages, $((total >> 20)) MiB of tarballs, $ROUNDS rounds, upstream https://$NAME/"

cat >"$W/nginx.conf" <<EOF
daemon on; pid $W/nginx.pid; error_log $W/nginx-error.log; worker_processes 1;
events { worker_connections 256; }
http { access_log $W/access.log; sendfile on;
  types { application/json json; application/octet-stream tgz; }
  server { listen $UP ssl; server_name $NAME; root $W/up;
    ssl_certificate $W/ca/up.pem; ssl_certificate_key $W/ca/up.key;
    location ~ ^/[^/]+\$ { default_type application/json; try_files /packuments\$uri.json =404; }
    location / { } } }
EOF
"${LOAD[@]}" nginx -c "$W/nginx.conf" -p "$W"
# "tarball GETs packument GETs" the upstream has answered so far.
upstream_gets() {
  printf '%s %s\n' "$(grep -c '"GET /[^ ]*\.tgz ' "$W/access.log" || true)" \
    "$(grep -c '"GET /[^/ ]* ' "$W/access.log" || true)"
}

# --- The proxies, each started afresh with empty caches for a cold round. -------------------
start_fetchgate() {
  rm -rf "$W/fg" && mkdir -p "$W/fg"
  cat >"$W/fg/fetchgate.toml" <<EOF
[listen]
proxy = "$FGP"
admin = "$FGA"
[resolver]
nameservers = ["127.0.0.1:53"]
[tls]
extra_roots = ["$W/ca/bench.pem"]
[cache]
dir = "$W/fg/cache"
[[egress.trust]]
cidrs = ["127.0.0.1/32"]
ports = [${UP#*:}]
hosts = ["$NAME"]
[intercept]
ca_cert = "$W/fgca/intercept-ca.pem"
ca_key = "$W/fgca/intercept-ca.key"
hosts = ["$NAME"]
[[registry]]
name = "npm"
kind = "npm"
upstream = "https://$NAME/"
EOF
  "${SUT[@]}" "$FG" serve --config "$W/fg/fetchgate.toml" >"$W/fg/log" 2>&1 &
  SERVER=$!
  PIDS+=("$SERVER")
  wait_port "$FGP" "$W/fg/log"
}
start_squid() {
  rm -rf "$W/squid" && mkdir -p "$W/squid/cache"
  /usr/lib/squid/security_file_certgen -c -s "$W/squid/ssl_db" -M 16MB >/dev/null
  cat >"$W/squid/squid.conf" <<EOF
http_port $SQUID ssl-bump generate-host-certificates=on dynamic_cert_mem_cache_size=16MB tls-cert=$W/sqca/squid-ca.pem tls-key=$W/sqca/squid-ca.key
sslcrtd_program /usr/lib/squid/security_file_certgen -s $W/squid/ssl_db -M 16MB
sslcrtd_children 5
acl step1 at_step SslBump1
ssl_bump peek step1
ssl_bump bump all
tls_outgoing_options cafile=$W/ca/bench.pem
$(squid_common_conf "$W/squid")
pinger_enable off
shutdown_lifetime 0 seconds
dns_nameservers 127.0.0.1
acl local src 127.0.0.0/8
http_access allow local
http_access deny all
refresh_pattern \.tgz$ 129600 100% 129600
refresh_pattern . 0 20% 4320
EOF
  chown -R proxy "$W/squid"
  squid -f "$W/squid/squid.conf" -z -N >/dev/null 2>&1
  "${SUT[@]}" squid -f "$W/squid/squid.conf" -N >"$W/squid/out" 2>&1 &
  SERVER=$!
  PIDS+=("$SERVER")
  wait_port "$SQUID" "$W/squid/cache.log"
}

# --- One npm client: a fresh project, home and cache, nothing but a proxy and its CA. -------
client() { # $1 = fetchgate|squid, then the packages to depend on
  local c=$W/client s=$1
  shift
  rm -rf "$c" && mkdir -p "$c/proj" "$c/home"
  : >"$c/npmrc"
  python3 - "$c/proj/package.json" "$@" <<'PY'
import json, sys
json.dump({"name": "bench-proj", "version": "1.0.0", "private": True,
           "dependencies": {p: "1.0.0" for p in sys.argv[2:]}}, open(sys.argv[1], "w"))
PY
  case $s in
    fetchgate) PROXY="http://$FGP"; CAFILE=$W/fgca/intercept-ca.pem ;;
    squid) PROXY="http://$SQUID"; CAFILE=$W/sqca/squid-ca.pem ;;
    direct) PROXY=; CAFILE=$W/ca/bench.pem ;;
  esac
}
npm_() { # npm install in the client's project, its output appended to $W/npm.log
  local proxy=()
  [ -n "$PROXY" ] && proxy=(HTTPS_PROXY="$PROXY")
  (cd "$W/client/proj" && env -i PATH="$PATH" HOME="$W/client/home" "${proxy[@]}" \
    npm_config_cafile="$CAFILE" npm_config_cache="$W/client/cache" \
    npm_config_userconfig="$W/client/npmrc" npm_config_registry="https://$NAME/" \
    npm_config_update_notifier=false npm_config_audit=false npm_config_fund=false \
    npm_config_ignore_scripts=true "$@" "${LOAD[@]}" npm install >>"$W/npm.log" 2>&1)
}
names=()
for i in $(seq 1 "$N"); do names+=("$(printf 'fgb-%03d' "$i")"); done
# Seconds for one npm install of every package; fails, showing npm's log, if npm does.
timed_install() {
  local t0 t1
  : >"$W/npm.log"
  t0=$(date +%s.%N)
  if ! npm_ env || [ "$(ls "$W/client/proj/node_modules" | grep -c '^fgb-')" != "$N" ]; then
    echo "intercept.sh: npm install failed; the end of its log:" >&2
    tail -20 "$W/npm.log" >&2
    return 1
  fi
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f\n", b - a}'
}

# --- The tampered tarball: bytes changed upstream after the packument was published. --------
victim=$W/up/${names[0]}/-/${names[0]}-1.0.0.tgz
victim_url=https://$NAME/${names[0]}/-/${names[0]}-1.0.0.tgz
cp "$victim" "$W/victim.good"
# A well-formed tarball (one payload byte flipped, gzip'd again), as a substitute would be, so
# what refuses it is an integrity check, not gunzip.
python3 - "$victim" <<'PY'
import gzip, sys
p = sys.argv[1]; b = bytearray(gzip.decompress(open(p, "rb").read())); b[len(b) // 2] ^= 1
open(p, "wb").write(gzip.compress(bytes(b), 6, mtime=0))
PY
bad_sha=$(sha256sum "$victim" | cut -d' ' -f1)
for s in fetchgate squid; do
  "start_$s"
  client "$s" "${names[0]}"
  : >"$W/npm.log"
  read -r t0 _ < <(upstream_gets)
  npm_ npm_config_fetch_retries=0 && echo "intercept.sh: npm installed the tampered tarball through $s" >&2 || true
  read -r t1 _ < <(upstream_gets)
  if grep -q 'EINTEGRITY' "$W/npm.log"; then verdict="served the tampered tarball; npm's own integrity check refused it (EINTEGRITY)"
  elif grep -q 'digest_mismatch\|424' "$W/npm.log"; then verdict="refused the tampered tarball ($(grep -o -m1 '424[^"]*\|digest_mismatch' "$W/npm.log"))"
  elif grep -qi 'ECONNRESET\|aborted\|premature close\|terminated\|socket hang up' "$W/npm.log"; then
    verdict="cut the tampered tarball short before its end (streamed while verified): npm saw $(grep -o -i -m1 'ECONNRESET\|aborted\|premature close\|terminated\|socket hang up' "$W/npm.log")"
  else verdict="npm failed otherwise: $(grep -m1 'npm error' "$W/npm.log" || echo 'npm succeeded')"; fi
  # Kept? fetchgate: its store by the tampered bytes' digest; squid: its cache alone
  # (only-if-cached), the bytes compared with the tampered ones.
  if [ "$s" = fetchgate ]; then
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://$FGP/sha256/$bad_sha")
    [ "$code" = 200 ] && kept="kept in its cache" || kept="not kept (its store answers $code for the tampered bytes' sha256)"
  else
    code=$(curl -s -o "$W/cached.tgz" -w '%{http_code}' --proxy "http://$SQUID" --cacert "$W/sqca/squid-ca.pem" \
      -H 'Cache-Control: only-if-cached' "$victim_url")
    if [ "$code" = 200 ] && [ "$(sha256sum <"$W/cached.tgz" | cut -d' ' -f1)" = "$bad_sha" ]; then
      kept="kept in its cache (only-if-cached answers the tampered bytes)"
    else kept="not kept (only-if-cached answers $code)"; fi
  fi
  echo "tampered: $s $verdict; $kept; upstream tarball GETs $((t1 - t0))"
  grep -m2 'npm error' "$W/npm.log" | cut -c1-160 | sed 's/^/  /'

  cp "$W/npm.log" "$W/tampered-$s.log"
  stop_server
done
cp "$W/victim.good" "$victim"

# --- The rounds. ---------------------------------------------------------------------------
declare -A cold warm cpu rss tcold twarm pcold pwarm direct
systems=(fetchgate squid)
for r in $(seq 1 "$ROUNDS"); do
  # Alternate who goes first, so a drift of the machine's speed is shared out.
  if ((r % 2)); then order=(fetchgate squid); else order=(squid fetchgate); fi
  for s in "${order[@]}"; do
    "start_$s"
    read -r t0 p0 < <(upstream_gets)
    client "$s" "${names[@]}"
    cold[$s,$r]=$(timed_install) || exit 1
    read -r t1 p1 < <(upstream_gets)
    client "$s" "${names[@]}"
    warm[$s,$r]=$(timed_install) || exit 1
    read -r t2 p2 < <(upstream_gets)
    tcold[$s,$r]=$((t1 - t0)); twarm[$s,$r]=$((t2 - t1))
    pcold[$s,$r]=$((p1 - p0)); pwarm[$s,$r]=$((p2 - p1))
    read -r c m < <(server_usage)
    cpu[$s,$r]=$c; rss[$s,$r]=$m
    stop_server
    echo "round $r $s: cold ${cold[$s,$r]} s, warm ${warm[$s,$r]} s" >&2
  done
  # For scale: npm straight to the upstream, no proxy (its own CA trusted), once a round.
  client direct "${names[@]}"
  direct[$r]=$(timed_install) || exit 1
done

# --- The summary: medians and ranges, and fetchgate/squid round by round. ------------------
stats() { sort -g | awk '{v[NR]=$1} END {printf "%.3f (%.3f-%.3f)", v[int((NR+1)/2)], v[1], v[NR]}'; }
col() { for r in $(seq 1 "$ROUNDS"); do eval "echo \${$1[$2,$r]}"; done; }
ratio() { for r in $(seq 1 "$ROUNDS"); do echo "${cold[fetchgate,$r]} ${cold[squid,$r]} ${warm[fetchgate,$r]} ${warm[squid,$r]}"; done; }
printf '\n%-10s %-24s %-24s %-22s %-8s %-18s %s\n' system "cold s, median (range)" "warm s, median (range)" \
  "server CPU s" "RSS MiB" "tarball GETs c/w" "packument GETs c/w"
for s in "${systems[@]}"; do
  printf '%-10s %-24s %-24s %-22s %-8s %-18s %s\n' "$s" "$(col cold "$s" | stats)" "$(col warm "$s" | stats)" \
    "$(col cpu "$s" | stats)" "$(($(col rss "$s" | sort -n | tail -1) >> 10))" \
    "$(col tcold "$s" | sort -n | tr '\n' ' ')/ $(col twarm "$s" | sort -n | tr '\n' ' ')" \
    "$(col pcold "$s" | sort -n | tr '\n' ' ')/ $(col pwarm "$s" | sort -n | tr '\n' ' ')"
done
printf '%-10s %-24s %s\n' direct "$(for r in $(seq 1 "$ROUNDS"); do echo "${direct[$r]}"; done | stats)" "(npm straight to the upstream, no proxy, a fresh npm cache)"
echo
ratio | awk '{printf "round %d: fetchgate / squid cold %.3f, warm %.3f\n", NR, $1 / $2, $3 / $4}'
echo "fetchgate / squid: cold $(ratio | awk '{printf "%.3f\n", $1 / $2}' | stats), warm $(ratio | awk '{printf "%.3f\n", $3 / $4}' | stats)"
