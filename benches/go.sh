#!/usr/bin/env bash
# Go modules side by side, in one run: `go mod download all` of a main module requiring MODS
# generated modules (MIN_KIB to MAX_KIB KiB of incompressible payload in each zip; a GOPROXY
# tree and a checksum database signed here, written by benches/go_world.rs and served as static
# files by nginx on loopback), through fetchgate's `kind = "go"` registry and by `go` straight
# at the same upstream (GOPROXY the nginx, GOSUMDB the key and the same database's URL).
#
# - cold: fetchgate with an empty cache (it reads the database itself; `go` is given only its
#   key, so it reads the database through fetchgate's /sumdb/ too), against `go` direct.
# - warm: a second client through the same warm fetchgate, against a second nginx serving the
#   same files as a plain file server (the database as static files as well, so `go` verifies
#   each module with its lookup and tiles in both).
#
# Each round starts each system afresh (empty cache, fresh GOPATH and module cache) in a
# rotating order; the medians and ranges of the whole-command times are printed, with the
# ratios fetchgate / go direct (cold) and fetchgate / file server (warm) per round, the
# upstream's requests per cold run (fetchgate's against go's own, by kind, and any path asked
# more often), each server's CPU seconds and peak RSS, the upstream's CPU seconds and go's.
# Before the rounds, one module's zip is swapped upstream (a valid zip of other bytes than the
# database records) to show who serves what: fetchgate must refuse it (a 424, or a stream cut
# short before its last byte for a zip of a megabyte or more) and store nothing, and
# go direct must refuse it itself.
#
# Installs what it needs with apt-get (golang-go, nginx, curl), and only ever touches loopback
# (127.0.0.1). Everything it starts, it stops.
#
# Usage: benches/go.sh      (MODS=40 MIN_KIB=64 MAX_KIB=2048 ROUNDS=5 GO_PROCS=4 by default;
#                            override via env; FG=/path/to/fetchgate measures another build, else
#                            target/release/fetchgate is built; FG_BEFORE=/path/to/fetchgate adds
#                            that build as a third system, "before", in the same rounds;
#                            GO_WORLD=/path/to/go_world uses that generator, else
#                            benches/go_world.rs is built; GO_CMD="list -m all" times go's
#                            go.mod phase alone: every .mod, lookup and tile, no zip, so the
#                            tampered check's go verdicts then say nothing, only its curl does;
#                            CHURN=N makes and deletes N files under /tmp before the rounds,
#                            as a neighbour's cleanup would: benches/lib.sh)
#
# Pinning: on a machine with two cores or more, the server under test (fetchgate, or the file
# server) runs alone on core 1, and the upstream nginx and go on core 0 (benches/lib.sh): go
# direct has only core 0 for itself and its upstream. PIN=0 turns it off. go runs with
# GOMAXPROCS=GO_PROCS whatever its affinity (pinned to one core, it would take 1, and fetch every
# .mod and zip one after the other: a one-core client, where a workstation fetches in parallel).
set -euo pipefail
cd "$(dirname "$0")/.."
MODS=${MODS:-40}
MIN_KIB=${MIN_KIB:-64}
MAX_KIB=${MAX_KIB:-2048}
ROUNDS=${ROUNDS:-5}
GO_PROCS=${GO_PROCS:-4}
read -r -a GO_CMD <<<"${GO_CMD:-mod download all}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pin_cores

need=()
command -v go >/dev/null || need+=(golang-go)
command -v nginx >/dev/null || need+=(nginx)
command -v curl >/dev/null || need+=(curl)
if ((${#need[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ -z "${FG:-}" ]; then cargo build --release -q; FG="$PWD/target/release/fetchgate"; fi
if [ -z "${GO_WORLD:-}" ]; then
  GO_WORLD=$(cargo bench --bench go_world --no-run -q --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "go_world" and m.get("executable"):
        print(m["executable"])')
  [ -x "$GO_WORLD" ] || { echo "go.sh: could not build benches/go_world.rs" >&2; exit 1; }
fi

UP=127.0.0.1:15620  # nginx: the upstream GOPROXY tree and checksum database (load core)
FGP=127.0.0.1:15621 # fetchgate's proxy listener (server core)
FGA=127.0.0.1:15622 # fetchgate's admin listener
FS=127.0.0.1:15623  # nginx: the same files as a plain file server, the warm peer (server core)
for a in $UP $FGP $FGA $FS; do
  if (echo >/dev/tcp/${a%:*}/${a#*:}) 2>/dev/null; then echo "go.sh: $a is in use" >&2; exit 1; fi
done
work_dir go-bench
# nginx must be able to reach its files in W.
chmod 755 "$W"

# --- The world: the GOPROXY tree, the database, the main module. ----------------------------
"$GO_WORLD" "$W/world" "$MODS" "$MIN_KIB" "$MAX_KIB"
www=$W/world/www
KEY=$(cat "$W/world/sumdb.key")
NAME=$(cat "$W/world/sumdb.name")
zips=$(find "$www" -name '*.zip' -printf '%s\n' | awk '{s += $1} END {print s}')
echo "go.sh: $MODS modules, $((zips >> 20)) MiB of zips, database $NAME; go with GOMAXPROCS=$GO_PROCS; $ROUNDS rounds"
page_reporting_note

# --- The upstream, and the file server: nginx, one process each (its PID is the server's). --
nginx_conf() { # $1 = listen address, $2 = name, $3 = access log
  cat >"$W/$2.conf" <<EOF
daemon off; master_process off; pid $W/$2.pid; error_log $W/$2-error.log;
events { worker_connections 256; }
http { access_log $3; sendfile on; tcp_nopush on; default_type application/octet-stream;
  server { listen $1; root $www; } }
EOF
}
nginx_conf "$UP" upstream "$W/access.log"
nginx_conf "$FS" fileserver off
"${LOAD[@]}" nginx -c "$W/upstream.conf" -p "$W" &
UPSTREAM=$!
PIDS+=("$UPSTREAM")
wait_port "$UP" "$W/upstream-error.log"
upstream_gets() { wc -l <"$W/access.log"; }
upstream_cpu() { awk '{print ($14 + $15) / 100}' "/proc/$UPSTREAM/stat"; }
# The paths the upstream was asked for after line $1 of its log, `%21` read as `!`.
upstream_paths() { tail -n +$(($1 + 1)) "$W/access.log" | awk '{gsub(/%21/, "!", $7); print $7}'; }
# Those paths counted by kind.
by_kind() {
  awk '/\/lookup\// {k["lookup"]++; next} /\/tile\// {k["tile"]++; next}
    /\.zip$/ {k["zip"]++; next} /\.mod$/ {k["mod"]++; next} /\.info$/ {k["info"]++; next}
    {k["other"]++}
    END {split("zip mod info lookup tile other", o, " ")
      for (i = 1; i <= 6; i++) if (k[o[i]]) printf "%s %d, ", o[i], k[o[i]]}' | sed 's/, $//'
}

# --- The servers under test, each started afresh with an empty cache. ----------------------
start_fetchgate() { start_fetchgate_build "$FG"; }
start_before() { start_fetchgate_build "$FG_BEFORE"; }
# Caches and module caches of earlier rounds are moved aside, not deleted, until the bench
# ends: on ext4 a file created soon after many were deleted costs a scan of the recently
# deleted inodes (a fifth of fetchgate's cold CPU when each round deleted the last one's).
set_aside() {
  if [ -e "$1" ]; then mkdir -p "$W/old" && mv "$1" "$(mktemp -d "$W/old/XXXXXX")/"; fi
}
start_fetchgate_build() {
  set_aside "$W/fg" && mkdir -p "$W/fg"
  cat >"$W/fg/fetchgate.toml" <<EOF
[listen]
proxy = "$FGP"
admin = "$FGA"
[cache]
dir = "$W/fg/cache"
[[egress.trust]]
cidrs = ["127.0.0.1/32"]
ports = [${UP#*:}]
[[registry]]
name = "go"
kind = "go"
upstream = "http://$UP/"
sumdb = "$KEY"
sumdb_url = "http://$UP/sumdb/$NAME/"
EOF
  "${SUT[@]}" "$1" serve --config "$W/fg/fetchgate.toml" >"$W/fg/log" 2>&1 &
  SERVER=$!
  PIDS+=("$SERVER")
  wait_port "$FGP" "$W/fg/log"
}
start_fileserver() {
  "${SUT[@]}" nginx -c "$W/fileserver.conf" -p "$W" &
  SERVER=$!
  PIDS+=("$SERVER")
  wait_port "$FS" "$W/fileserver-error.log"
}

# --- One go client: a fresh GOPATH, module cache and main module, nothing of the machine's
# own Go settings; `go mod download all` (every module's .mod, .info and zip, each verified
# against the database) against GOPROXY $1 and GOSUMDB $2. Its output is in $W/go.log. -----
go_client() {
  local h=$W/client
  set_aside "$h"
  mkdir -p "$h/main" && cp "$W/world/main/go.mod" "$h/main/"
  (cd "$h/main" && env -i PATH="$PATH" HOME="$h" GOPATH="$h/gopath" GOMODCACHE="$h/gopath/pkg/mod" \
    GOCACHE="$h/gocache" GOENV=off GOTOOLCHAIN=local GOTELEMETRY=off GO111MODULE=on GOWORK=off \
    GOFLAGS=-mod=mod GOMAXPROCS="$GO_PROCS" CGO_ENABLED=0 GOPROXY="$1" GOSUMDB="$2" \
    "${LOAD[@]}" go "${GO_CMD[@]}" >"$W/go.log" 2>&1)
}
# The GOPROXY and GOSUMDB of each way to the modules.
client_env() {
  case $1 in
    fetchgate | before) echo "http://$FGP/registry/go" "$KEY" ;;
    direct) echo "http://$UP" "$KEY http://$UP/sumdb/$NAME" ;;
    fileserver) echo "http://$FS" "$KEY http://$FS/sumdb/$NAME" ;;
  esac
}
# "<wall s> <go's CPU s>" of one client through $1; fails, showing go's log, if go does.
timed_go() {
  local TIMEFORMAT='%3R %3U %3S' t proxy sumdb
  read -r proxy sumdb < <(client_env "$1")
  if ! t=$({ time go_client "$proxy" "$sumdb"; } 2>&1); then
    echo "go.sh: go mod download failed through $1; its log:" >&2
    tail -20 "$W/go.log" >&2
    return 1
  fi
  awk '{printf "%.3f %.3f\n", $1, $2 + $3}' <<<"$t"
}

# --- The tampered check: the first module's zip swapped upstream for other valid bytes. -----
victim=$(cat "$W/world/tamper.path")
cp "$www/$victim" "$W/victim.good"
cp "$W/world/tamper.zip" "$www/$victim"
echo "tampered: the upstream serves $victim with other bytes than the database records"
start_fetchgate
# A zip of a megabyte or more streams while it verifies: the swapped one is then a 200 cut
# short before its last byte (curl: exit 18); a smaller one is a 424.
read -r status got < <(curl -s -o "$W/tamper.body" -w '%{http_code} %{size_download}\n' "http://$FGP/registry/go/$victim" || true)
problem=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["code"])' "$W/tamper.body" 2>/dev/null || echo "?")
[ "$status" = 200 ] && problem="streamed and cut short: $got of $(stat -c %s "$W/world/tamper.zip") bytes"
kept=$(curl -s -o /dev/null -w '%{http_code}' "http://$FGP/sha256/$(sha256sum "$W/world/tamper.zip" | cut -c1-64)")
[ "$kept" = 404 ] && kept="not stored (/sha256/ of the swapped zip: 404)" || kept="STORED (/sha256/: $kept)"
read -r proxy sumdb < <(client_env fetchgate)
if go_client "$proxy" "$sumdb"; then verdict="go SUCCEEDED"; else verdict="go failed: $(grep -m1 "$victim\|${victim%%/@v*}" "$W/go.log" || tail -1 "$W/go.log")"; fi
echo "tampered: fetchgate answered $status $problem, $kept; through it, $verdict"
stop_server
read -r proxy sumdb < <(client_env direct)
if go_client "$proxy" "$sumdb"; then verdict="go SUCCEEDED"; else
  verdict="go failed: $(grep -m1 'checksum mismatch' "$W/go.log" || tail -1 "$W/go.log")"
  grep -q 'checksum mismatch' "$W/go.log" && verdict="the upstream served the swapped zip and go refused it itself ($verdict)"
fi
echo "tampered: go direct: $verdict"
cp "$W/victim.good" "$www/$victim"

# --- The rounds. ---------------------------------------------------------------------------
neighbour_churn
# Per system and round: cold and warm wall seconds, go's CPU seconds, the server's CPU seconds
# (cold, warm) and peak RSS (KiB), the upstream's requests (cold, warm) and CPU seconds (cold).
# For go direct the cold server is the upstream itself, the warm one the file server.
declare -A cold warm gocold gowarm cpuc cpuw rss gets wgets upcpu
systems=(fetchgate direct)
if [ -n "${FG_BEFORE:-}" ]; then systems+=(before); fi
n=${#systems[@]}
for r in $(seq 1 "$ROUNDS"); do
  # Rotate who goes first, so a drift of the machine's speed is shared out.
  order=("${systems[@]:$(((r - 1) % n))}" "${systems[@]:0:$(((r - 1) % n))}")
  for s in "${order[@]}"; do
    [ "$s" = direct ] || "start_$s"
    b=$(upstream_gets)
    u=$(upstream_cpu)
    t=$(timed_go "$s") || exit 1
    read -r "cold[$s,$r]" "gocold[$s,$r]" <<<"$t"
    gets[$s,$r]=$(($(upstream_gets) - b))
    upcpu[$s,$r]=$(awk -v a="$u" -v b="$(upstream_cpu)" 'BEGIN {printf "%.2f", b - a}')
    if [ "$r" = 1 ]; then upstream_paths "$b" | sort >"$W/paths.$s"; fi
    if [ "$s" = direct ]; then
      cpuc[$s,$r]=${upcpu[$s,$r]}
      start_fileserver
      c0=0
      w=fileserver
    else
      read -r c0 _ < <(server_usage)
      cpuc[$s,$r]=$c0
      w=$s
    fi
    b=$(upstream_gets)
    t=$(timed_go "$w") || exit 1
    read -r "warm[$s,$r]" "gowarm[$s,$r]" <<<"$t"
    wgets[$s,$r]=$(($(upstream_gets) - b))
    read -r c m < <(server_usage)
    cpuw[$s,$r]=$(awk -v a="$c0" -v b="$c" 'BEGIN {printf "%.2f", b - a}')
    rss[$s,$r]=$m
    stop_server
  done
done

# --- The summary: medians and ranges, and the ratios round by round. -----------------------
stats() { sort -g | awk '{v[NR]=$1} END {printf "%.3f (%.3f-%.3f)", v[int((NR+1)/2)], v[1], v[NR]}'; }
med() { sort -g | awk '{v[NR]=$1} END {printf "%.2f", v[int((NR+1)/2)]}'; }
col() { for r in $(seq 1 "$ROUNDS"); do eval "echo \${$1[$2,$r]}"; done; }
ratio() { for r in $(seq 1 "$ROUNDS"); do eval "echo \"\${$1[fetchgate,$r]} \${$1[$2,$r]}\"" | awk '{printf "%.3f\n", $1 / $2}'; done; }
counts() { col "$1" "$2" | sort -n | uniq | tr '\n' ' ' | sed 's/ $//'; }
printf '\n%-10s %-24s %-24s %-17s %-8s %-12s %-14s %s\n' system "cold s, median (range)" \
  "warm s, median (range)" "server CPU s c/w" "RSS MiB" "upstream CPU" "go CPU s c/w" "upstream requests c/w"
for s in "${systems[@]}"; do
  printf '%-10s %-24s %-24s %-17s %-8s %-12s %-14s %s\n' "$s" "$(col cold "$s" | stats)" \
    "$(col warm "$s" | stats)" "$(col cpuc "$s" | med) / $(col cpuw "$s" | med)" \
    "$(($(col rss "$s" | sort -n | tail -1) >> 10))" "$(col upcpu "$s" | med)" \
    "$(col gocold "$s" | med) / $(col gowarm "$s" | med)" "$(counts gets "$s") / $(counts wgets "$s")"
done
echo "(direct: cold is go straight at the upstream nginx, whose CPU is its server CPU; warm is go at"
echo " the file server, a second nginx on the server core serving the same files and database)"
echo "fetchgate / go direct, cold: $(ratio cold direct | stats)   (goal <= 1.1)"
echo "fetchgate / file server, warm: $(ratio warm direct | stats)   (goal <= 1.05)"
if [ -n "${FG_BEFORE:-}" ]; then
  echo "fetchgate / before: cold $(ratio cold before | stats), warm $(ratio warm before | stats)"
fi
for s in "${systems[@]}"; do
  echo "upstream requests, cold, round 1, $s: $(wc -l <"$W/paths.$s") ($(by_kind <"$W/paths.$s"))"
done
extra=$(join -a1 -a2 -e0 -o0,1.2,2.2 <(uniq -c "$W/paths.fetchgate" | awk '{print $2, $1}') \
  <(uniq -c "$W/paths.direct" | awk '{print $2, $1}') | awk '$2 != $3 {printf "  %s: fetchgate %d, go direct %d\n", $1, $2, $3}')
if [ -n "$extra" ]; then
  echo "paths the upstream was asked for a different number of times (round 1):"
  echo "$extra"
fi
