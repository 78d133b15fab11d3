#!/usr/bin/env bash
# make dist-check: the release tarball (make dist) on a bare Debian 12, without Swift.
#   1. A minimal root (debootstrap --variant=minbase) with only the runtime libraries the
#      binaries need: their NEEDED entries (readelf), each mapped to the Debian package
#      that holds it on this machine (dpkg -S), plus ca-certificates. Cached in
#      .dist-root/ (git-ignored), one root per suite and package list; each run works on
#      a fresh copy of it.
#   2. The tarball unpacked in a copy at /opt/apns-engine; the copy holds no Swift
#      toolchain, no Swift runtime library and no compiler (checked), and every binary's
#      libraries resolve there (ldd in the chroot; one "not found" fails the run).
#   3. In the chroot, as an unprivileged user: --version on each binary (it must name
#      this checkout's commit); apns-mock started, apns-send against it (exit 0, a 200
#      record); apns-server on the example config (examples/server, pointed at the
#      mock, log_format: json), a device registered, one notification sent through it,
#      its delivery log read back (delivered, 200), every log line JSON; SIGTERM: drained, exit 0.
#      The HTTP calls come from this machine's curl over loopback (the chroot shares the
#      network): the root gets no client that the release does not need.
#   4. systemd-analyze verify on the unit, installed in the root with the release.
# Start-up times (wall, and user+sys CPU) are printed at the end.
# Needs root (debootstrap, chroot, mount) and Debian's mirror the first time.
#   scripts/dist-check.sh [TARBALL]    Env: DIST_SUITE (default bookworm), DIST_MIRROR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
suite=${DIST_SUITE:-bookworm}
mirror=${DIST_MIRROR:-http://deb.debian.org/debian}
version=$(sed -n 's/^#define APNS_VERSION "\(.*\)"$/\1/p' Sources/CBuildInfo/build_info.c)
name=apns-engine-$version-linux-x86_64
tarball=${1:-dist/$name.tar.gz}
[ -f "$tarball" ] || { echo "dist-check: no $tarball (make dist)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "dist-check: needs root (debootstrap, chroot)" >&2; exit 1; }
say() { echo "== dist-check: $*"; }
fail() { echo "dist-check: FAILED: $*" >&2; exit 1; }

cache=$root/.dist-root
mkdir -p "$cache"
scratch=$(mktemp -d "$cache/run.XXXXXX")
jail=$scratch/root
mounted=()
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" || true; done
  # Never remove a tree that still has this machine's /dev bound into it.
  if grep -q " $scratch/" /proc/mounts; then
    echo "dist-check: $scratch still has mounts; left in place" >&2
  else
    rm -rf "$scratch"
  fi
}
trap cleanup EXIT

# 1. The packages the binaries need.
mkdir -p "$scratch/unpacked"
tar -C "$scratch/unpacked" -xzf "$tarball"
release=$scratch/unpacked/$name
[ -d "$release" ] || fail "$tarball does not hold $name/"
binaries=(apns-server apns-send apns-mock)
# Linked ones, and libcurl, which the shim opens when first needed (curl_api.c: the
# curl transport, the doctor, broadcast-channel calls).
needed=$( (for b in "${binaries[@]}"; do readelf -d "$release/bin/$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; done
           echo libcurl.so.4) | sort -u)
packages=ca-certificates
for lib in $needed; do
  case $lib in libswift*|libFoundation*|libdispatch*|libBlocksRuntime*) fail "$lib is linked dynamically: the Swift runtime must be static";; esac
  path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ && !found { print $NF; found = 1 }')
  [ -n "$path" ] || fail "$lib: not on this machine"
  package=$( (dpkg -S "$path" || dpkg -S "$(realpath "$path")" || dpkg -S "/usr$path") 2>/dev/null | awk -F: 'NR == 1 { print $1 }')
  [ -n "$package" ] || fail "$lib ($path): no Debian package holds it"
  packages="$packages $package"
done
packages=$(echo "$packages" | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ $//')
say "libraries: $(echo $needed)"
say "packages: $packages"

# The root, made once per suite and package list.
key=$(echo "$suite ${packages// /,}" | sha256sum | cut -c1-12)
base=$cache/$suite-$key
if [ ! -f "$base/.complete" ]; then
  say "debootstrap --variant=minbase $suite (once; cached in $base)"
  rm -rf "$base.tmp"
  debootstrap --variant=minbase --include="${packages// /,}" "$suite" "$base.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -n 20 "$cache/debootstrap.log" >&2; fail "debootstrap (log: $cache/debootstrap.log)"; }
  chroot "$base.tmp" apt-get clean
  touch "$base.tmp/.complete"
  rm -rf "$base"
  mv "$base.tmp" "$base"
fi
cp -a "$base" "$jail"

# 2. The release in the root, and what the root lacks.
mkdir -p "$jail/opt"
cp -a "$release" "$jail/opt/$name"
ln -s "$name" "$jail/opt/apns-engine"
# A clean environment in the root: nothing of this machine's PATH or APNS_* variables.
clean=(/usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8)
for tool in swift swiftc swift-build swift-frontend cc gcc clang c++ g++ ld; do
  if chroot "$jail" "${clean[@]}" sh -c "command -v $tool" >/dev/null 2>&1; then fail "the root has $tool"; fi
done
found=$(find "$jail" -xdev \( -name 'libswiftCore.so*' -o -name 'libFoundation*.so*' -o -name 'libdispatch.so*' \) -print -quit)
[ -z "$found" ] || fail "the root has a Swift runtime library: ${found#$jail}"
mount -t proc proc "$jail/proc"; mounted+=("$jail/proc")
mount --bind /dev "$jail/dev"; mounted+=("$jail/dev")
for b in "${binaries[@]}"; do
  out=$(chroot "$jail" "${clean[@]}" ldd "/opt/apns-engine/bin/$b" 2>&1) || fail "ldd $b: $out"
  if grep -q 'not found' <<<"$out"; then fail "$b needs a library the root lacks: $(grep 'not found' <<<"$out" | tr -s ' \t' ' ')"; fi
done
say "no toolchain, no compiler, no Swift runtime in the root; every library of the three binaries resolves there"

# 3. Run it there, as a user of its own.
chroot "$jail" "${clean[@]}" useradd --system --no-create-home --home-dir /var/lib/apns-server --shell /usr/sbin/nologin apns-server
as_user=(chroot --userspec=apns-server:apns-server "$jail" "${clean[@]}")
commit=unknown
if git rev-parse --git-dir >/dev/null 2>&1; then
  commit=$(git rev-parse --short=12 HEAD)
  git diff --quiet HEAD -- || commit=$commit-dirty
fi
declare -A startup
for b in "${binaries[@]}"; do
  line=$("${as_user[@]}" "/opt/apns-engine/bin/$b" --version) || fail "$b --version"
  [ "$line" = "$version (commit $commit)" ] || fail "$b --version says '$line', not '$version (commit $commit)'"
  startup[$b]=$( { /usr/bin/time -f '%e s wall, %U+%S s CPU' "${as_user[@]}" "/opt/apns-engine/bin/$b" --version >/dev/null; } 2>&1)
done
say "--version: $line on all three"

pki=$scratch/pki
scripts/gen-pki.sh "$pki" >/dev/null
. "$pki/ids.env"
etc=$jail/etc/apns-server
install -d -m 0750 -g "$(chroot "$jail" id -g apns-server)" "$etc"
install -d -m 0750 -o "$(chroot "$jail" id -u apns-server)" -g "$(chroot "$jail" id -g apns-server)" "$jail/var/lib/apns-server"
for f in ca.pem server.crt server.key "AuthKey_$KEY_ID.p8"; do
  install -m 0640 -g "$(chroot "$jail" id -g apns-server)" "$pki/$f" "$etc/$f"
done
run=$jail/var/lib/apns-server

# apns-mock, then apns-send against it.
"${as_user[@]}" /opt/apns-engine/bin/apns-mock --port 0 --cert /etc/apns-server/server.crt --key /etc/apns-server/server.key \
  --auth-key "/etc/apns-server/AuthKey_$KEY_ID.p8" --team-id "$TEAM_ID" --topic "$TOPIC" >"$scratch/mock.out" 2>"$scratch/mock.err" &
pids+=($!)
. scripts/lib/mock.sh
started=$(date +%s%N)
mock_port=$(mock_port "$scratch/mock.out" "$scratch/mock.err" "${pids[-1]}") || fail "apns-mock did not start"
mock_ready_ms=$(( ($(date +%s%N) - started) / 1000000 ))
printf '%s\n' a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90 >"$run/tokens.txt"
printf '{"aps":{"alert":{"title":"dist-check","body":"from the chroot"}}}\n' >"$run/payload.json"
chmod 0644 "$run/tokens.txt" "$run/payload.json"
/usr/bin/time -o "$scratch/send.time" -f '%e s wall, %U+%S s CPU' "${as_user[@]}" /opt/apns-engine/bin/apns-send --topic "$TOPIC" \
  --key "/etc/apns-server/AuthKey_$KEY_ID.p8" --key-id "$KEY_ID" --team-id "$TEAM_ID" \
  --endpoint "https://127.0.0.1:$mock_port" --cacert /etc/apns-server/ca.pem --output /var/lib/apns-server/results.jsonl \
  /var/lib/apns-server/payload.json /var/lib/apns-server/tokens.txt >"$scratch/send.out" 2>"$scratch/send.err" \
  || fail "apns-send: $(cat "$scratch/send.err")"
send_timing=$(cat "$scratch/send.time")
grep -q '"status":200' "$run/results.jsonl" || fail "apns-send's record: $(cat "$run/results.jsonl")"
say "apns-send -> apns-mock: $(cat "$run/results.jsonl")"

# apns-server on the example config, pointed at the mock; the database where the unit puts it.
api_key=$(openssl rand -hex 24)
echo "$api_key" >"$etc/api-keys"
openssl rand -hex 32 >"$etc/user-jwt.secret"
sed -e "s/AuthKey_ABC123DEFG.p8/AuthKey_$KEY_ID.p8/; s/key_id: ABC123DEFG/key_id: $KEY_ID/; s/team_id: DEF123GHIJ/team_id: $TEAM_ID/" \
    -e "s|# sandbox_endpoint: .*|sandbox_endpoint: https://127.0.0.1:$mock_port|" \
    -e "s|# production_endpoint: .*|production_endpoint: https://127.0.0.1:$mock_port|" \
    -e "s|# cacert: .*|cacert: ca.pem|" -e "s/topic: .*/topic: $TOPIC/" \
    -e "s/^log_level: info/log_level: info\nlog_format: json/" \
    "$release/examples/server/apns-server.yaml" >"$etc/apns-server.yaml"
chmod 0640 "$etc/api-keys" "$etc/user-jwt.secret" "$etc/apns-server.yaml"
chgrp "$(chroot "$jail" id -g apns-server)" "$etc/api-keys" "$etc/user-jwt.secret" "$etc/apns-server.yaml"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
started=$(date +%s%N)
"${as_user[@]}" APNS_SERVER_LISTEN=127.0.0.1:$port APNS_SERVER_DATABASE=sqlite:/var/lib/apns-server/apns.db \
  /opt/apns-engine/bin/apns-server --config /etc/apns-server/apns-server.yaml >"$scratch/server.out" 2>"$scratch/server.err" &
server=$!
pids+=($server)
for _ in $(seq 300); do
  grep -q '^apns-server listening on' "$scratch/server.out" 2>/dev/null && break
  kill -0 $server 2>/dev/null || fail "apns-server exited: $(cat "$scratch/server.err")"
  sleep 0.05
done
grep -q '^apns-server listening on' "$scratch/server.out" || fail "apns-server did not start: $(cat "$scratch/server.err")"
server_ready_ms=$(( ($(date +%s%N) - started) / 1000000 ))
base=http://127.0.0.1:$port
token=0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0
reply=$(curl -s -X POST "$base/v1/users/staff-1/device-tokens" -H "Authorization: Bearer $api_key" \
  -d "{\"deviceToken\":\"$token\",\"platform\":\"ios\",\"appType\":\"staff\",\"environment\":\"production\"}")
[ "$reply" = '{"success":true,"message":"Device token registered successfully"}' ] || fail "register: $reply"
reply=$(curl -s -X POST "$base/v1/notifications" -H "Authorization: Bearer $api_key" \
  -d '{"type":"order_status_changed","entity_type":"order","entity_id":"o-1","app_type":"staff","user_ids":["staff-1"],"alert":{"title":"Order Ready","body":"dist-check"}}')
id=$(printf '%s' "$reply" | python3 -c 'import json,sys; print(json.load(sys.stdin)["notification_id"])') || fail "notify: $reply"
for _ in $(seq 200); do
  log=$(curl -s "$base/v1/notifications/$id" -H "Authorization: Bearer $api_key")
  grep -q '"pending":0' <<<"$log" && break
  sleep 0.1
done
python3 - "$log" "$token" <<'PY' || fail "the delivery log: $log"
import json, sys
log, token = json.loads(sys.argv[1]), sys.argv[2]
deliveries = log["deliveries"]
assert log["summary"]["delivered"] == 1 and len(deliveries) == 1, log
d = deliveries[0]
assert d["token"] == token and d["status"] == 200 and d["state"] == "delivered", d
PY
say "apns-server -> apns-mock: $log"
kill -TERM $server
status=0; wait $server || status=$?
[ $status = 0 ] || fail "apns-server exited $status on SIGTERM: $(cat "$scratch/server.err")"
python3 - "$scratch/server.err" <<'PY' || fail "a log line that is not a JSON object: $(cat "$scratch/server.err")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
for line in lines:
    o = json.loads(line)
    assert isinstance(o, dict) and {"time", "level", "message"} <= o.keys(), line
assert any(json.loads(l)["message"] == "notification accepted" for l in lines), lines
PY
say "SIGTERM: drained, exit 0; $(wc -l <"$scratch/server.err") log lines, each a JSON object"

# 4. The unit, with the release where it names it. A minbase root has no systemd: the
#    targets the unit orders itself after are this machine's unit files, copied in for
#    the check only (the root's programs are still only the release's).
install -D -m 0644 "$release/apns-server.service" "$jail/etc/systemd/system/apns-server.service"
mkdir -p "$jail/usr/lib/systemd"
cp -a /usr/lib/systemd/system "$jail/usr/lib/systemd/"
out=$(systemd-analyze verify --root="$jail" /etc/systemd/system/apns-server.service 2>&1) \
  || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify warns: $out"
say "systemd-analyze verify apns-server.service: clean"

say "tarball $(du -h "$tarball" | cut -f1) ($(stat -c %s "$tarball") bytes); unpacked: $(du -sh "$release/bin" | cut -f1) of binaries"
for b in "${binaries[@]}"; do say "start-up, $b --version: ${startup[$b]}"; done
say "start-up, apns-mock to 'listening': ${mock_ready_ms} ms wall; apns-server to 'listening': ${server_ready_ms} ms wall"
say "apns-send, one token to the mock: $send_timing"
say "passed"
