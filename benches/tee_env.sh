# Shared by benches/tee.sh and benches/tee_threads.sh (sourced from the repository root):
# nginx (LOAD) serving FILES new files of SIZE_MIB random bytes as $W/www/1.., and fetchgate
# (SUT) in its default configuration as a proxy on FGP that trusts it, its cache in $W/cache
# (admin on 127.0.0.1:18482); FG_PID is fetchgate's pid. FG, when unset, is the release build.
# Everything started here is stopped, and $W removed, on exit.
export PATH="/usr/sbin:$PATH"
for b in nginx curl python3; do command -v "$b" >/dev/null || apt-get install -y -qq "$b" >/dev/null; done
# FG=/path/to/fetchgate measures another build (a saved "before" binary, say).
if [ -z "${FG:-}" ]; then cargo build --release -q; FG="$(pwd)/target/release/fetchgate"; fi

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
work_dir tee

UP=127.0.0.1:18480
FGP=127.0.0.1:18481
mkdir -p "$W/www"
for r in $(seq "$FILES"); do head -c $((SIZE_MIB << 20)) /dev/urandom > "$W/www/$r"; done
chmod 755 "$W" "$W/www"; chmod 644 "$W"/www/*
cat > "$W/nginx.conf" <<EOF
worker_processes 1;
pid $W/nginx.pid;
error_log $W/nginx-error.log crit;
events { worker_connections 64; }
http { access_log off; sendfile on; tcp_nopush on; server { listen $UP; root $W/www; } }
EOF
"${LOAD[@]}" nginx -c "$W/nginx.conf"
cat > "$W/fg.toml" <<EOF
[listen]
proxy = "$FGP"
admin = "127.0.0.1:18482"
[cache]
dir = "$W/cache"
max_object_bytes = $(((SIZE_MIB + 1) << 20))
[[egress.trust]]
cidrs = ["127.0.0.1/32"]
ports = [${UP##*:}]
EOF
"${SUT[@]}" "$FG" serve --config "$W/fg.toml" 2>"$W/fg.log" & PIDS+=($!); FG_PID=$!
for a in $UP $FGP; do
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/${a%:*}/${a##*:}") 2>/dev/null && break; sleep 0.1; done
done
