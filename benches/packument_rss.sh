#!/usr/bin/env bash
# Peak memory of fetchgate serving one large packument to many clients at once: CLIENTS
# (12) concurrent first requests for one generated packument of about MB (53) megabytes from a
# loopback upstream. Prints the upstream's request count, what each client got, and
# fetchgate's peak resident set (VmHWM of /proc/<pid>/status, read once every request is
# answered), before and after the requests.
#
# Only ever touches loopback (127.0.0.1). Everything it starts, it stops.
#
# Usage: benches/packument_rss.sh   (MB=53 CLIENTS=12 by default; FG=/path/to/fetchgate
#                                     measures another build, else target/release/fetchgate
#                                     is built)
#
# Pinning: fetchgate runs alone on core 0, the upstream and the clients on core 1 (PIN=0
# turns it off; so does a machine with one core).
set -euo pipefail
cd "$(dirname "$0")/.."
MB=${MB:-53}
CLIENTS=${CLIENTS:-12}
SUT=(); LOAD=()
if [ "${PIN:-1}" != 0 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  SUT=(taskset -c 0); LOAD=(taskset -c 1)
fi
command -v curl >/dev/null && command -v python3 >/dev/null || {
  echo "packument_rss.sh needs curl and python3" >&2; exit 1; }
if [ -z "${FG:-}" ]; then cargo build --release -q -j1 --bin fetchgate; FG="$PWD/target/release/fetchgate"; fi

UP=127.0.0.1:15510    # the upstream registry (python, on the load core)
FGP=127.0.0.1:15511   # fetchgate's proxy listener
FGA=127.0.0.1:15512   # fetchgate's admin listener
for a in $UP $FGP $FGA; do
  if (echo >/dev/tcp/${a%:*}/${a#*:}) 2>/dev/null; then echo "packument_rss.sh: $a is in use" >&2; exit 1; fi
done

W=$(mktemp -d /tmp/fetchgate-packument-rss.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.3
  rm -rf "$W"
}
trap cleanup EXIT

# The packument: versions as npm's registry writes them (dependencies, scripts, people,
# dist with digests and signatures), as many as make MB megabytes.
python3 - "$W/packument.json" "$MB" "http://$UP/" <<'PY'
import json, sys
out, mb, base = sys.argv[1], int(sys.argv[2]), sys.argv[3]
name = "fg-big"
versions, size, i = {}, 0, 0
while size < mb * 1_000_000:
    v = f"{i // 100}.{i % 100}.0"
    meta = {
        "name": name, "version": v,
        "description": f"A generated package, version {v}, with \"quotes\" and \u00e9",
        "main": "index.js", "license": "MIT",
        "scripts": {"test": "node test.js", "build": f"tsc -p . --v{i}"},
        "repository": {"type": "git", "url": "git+https://example.invalid/fg-big.git"},
        "dependencies": {f"dep-{j}": f"^{j}.{i % 7}.0" for j in range(60)},
        "devDependencies": {f"dev-{j}": f"~{j}.0.{i % 5}" for j in range(30)},
        "maintainers": [{"name": f"m{j}", "email": f"m{j}@example.invalid"} for j in range(4)],
        "_npmUser": {"name": "m0", "email": "m0@example.invalid"},
        "gitHead": f"{i:040x}",
        "dist": {
            "integrity": "sha512-" + "A" * 86 + "==",
            "shasum": f"{i:040x}",
            "tarball": f"{base}{name}/-/{name}-{v}.tgz",
            "fileCount": 12, "unpackedSize": 40000 + i,
            "signatures": [{"keyid": "SHA256:jl3bwswu80PjjokCgh0o2w5c2U4LhQAE57gj9cz1kzA",
                            "sig": "MEUCIQ" + "x" * 90}],
        },
    }
    versions[v] = meta
    size += len(json.dumps(meta))
    i += 1
doc = {"_id": name, "name": name, "dist-tags": {"latest": v}, "versions": versions,
       "time": {v: "2026-01-01T00:00:00.000Z" for v in versions},
       "readme": "# fg-big\n" + "Some text.\n" * 1000}
with open(out, "w") as f:
    json.dump(doc, f)
PY
SIZE=$(stat -c %s "$W/packument.json")

# The upstream: the packument at /fg-big, each request counted in requests.log.
cat >"$W/upstream.py" <<'PY'
import http.server, sys
body = open(sys.argv[1], "rb").read()
log = open(sys.argv[2], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        log.write(self.path + "\n")
        if self.path != "/fg-big":
            self.send_response(404); self.send_header("content-length", "0"); self.end_headers(); return
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
host, port = sys.argv[3].split(":")
http.server.ThreadingHTTPServer((host, int(port)), H).serve_forever()
PY
: >"$W/requests.log"
"${LOAD[@]}" python3 "$W/upstream.py" "$W/packument.json" "$W/requests.log" "$UP" &
PIDS+=($!)

cat >"$W/fg.toml" <<EOF
[listen]
proxy = "$FGP"
admin = "$FGA"
[cache]
dir = "$W/cache"
[[egress.trust]]
cidrs = ["127.0.0.1/32"]
ports = [${UP##*:}]
[[registry]]
name = "npm"
kind = "npm"
upstream = "http://$UP/"
EOF
"${SUT[@]}" "$FG" serve --config "$W/fg.toml" 2>>"$W/fg.log" &
FGPID=$!
PIDS+=($FGPID)
for _ in $(seq 100); do
  (echo >/dev/tcp/${FGP%:*}/${FGP#*:}) 2>/dev/null && (echo >/dev/tcp/${UP%:*}/${UP#*:}) 2>/dev/null && break
  sleep 0.1
done
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$FGPID/status"; }
START_KIB=$(hwm)

for n in $(seq "$CLIENTS"); do
  "${LOAD[@]}" curl -s -o "$W/got.$n" -w '%{http_code} %{size_download}\n' \
    "http://$FGP/registry/npm/fg-big" >"$W/status.$n" &
done
wait $(jobs -p | grep -v -e "^${PIDS[0]}\$" -e "^$FGPID\$") 2>/dev/null || true
PEAK_KIB=$(hwm)

ok=$(cat "$W"/status.* | awk '$1 == 200' | wc -l)
sizes=$(cat "$W"/status.* | awk '{print $2}' | sort -u | tr '\n' ' ')
python3 - "$W/got.1" "http://$FGP/registry/npm/fg-big/-/" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
bad = [v for v, m in doc["versions"].items() if not m["dist"]["tarball"].startswith(sys.argv[2])]
if bad:
    sys.exit(f"versions whose tarball is not fetchgate's: {bad[:3]}")
print(f"rewritten: {len(doc['versions'])} versions, every tarball under fetchgate")
PY
echo "packument: $SIZE bytes; $CLIENTS concurrent first requests: $ok answered 200 (sizes $sizes)"
echo "upstream requests for it: $(grep -c '^/fg-big$' "$W/requests.log")"
echo "fetchgate peak RSS (VmHWM): $((START_KIB / 1024)) MiB at start, $((PEAK_KIB / 1024)) MiB after the requests"
