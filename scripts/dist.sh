#!/usr/bin/env bash
# make dist: dist/apns-engine-VERSION-linux-x86_64.tar.gz, a release that runs on a
# Debian 12 system without the Swift toolchain (INSTALL.md lists the packages it needs):
#   bin/apns-server, bin/apns-send, bin/apns-mock   built -c release with
#                                 --static-swift-stdlib (the Swift runtime and Foundation
#                                 linked in), stripped
#   examples/server/              the example config and its README
#   apns-server.service           the systemd unit
#   INSTALL.md
# The build has its own scratch path (DIST_SCRATCH, default .build-dist), so that it
# never waits on or invalidates the debug build of make test.
#   scripts/dist.sh         Env: SWIFT (default swift), DIST_SCRATCH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
swift=${SWIFT:-swift}
scratch=${DIST_SCRATCH:-.build-dist}
build=("$swift" build -c release --static-swift-stdlib --scratch-path "$scratch")

version=$(sed -n 's/^#define APNS_VERSION "\(.*\)"$/\1/p' Sources/CBuildInfo/build_info.c)
[ -n "$version" ] || { echo "dist: no APNS_VERSION in Sources/CBuildInfo/build_info.c" >&2; exit 1; }
for product in apns-server apns-send apns-mock; do "${build[@]}" --product "$product"; done
bin=$("${build[@]}" --show-bin-path)

name=apns-engine-$version-linux-x86_64
stage=dist/$name
rm -rf "$stage" "dist/$name.tar.gz"
mkdir -p "$stage/bin" "$stage/examples/server"
for product in apns-server apns-send apns-mock; do
  strip -o "$stage/bin/$product" "$bin/$product"
done
cp examples/server/apns-server.yaml examples/server/README.md "$stage/examples/server/"
cp packaging/apns-server.service packaging/INSTALL.md "$stage/"
tar -C dist --owner=0 --group=0 --numeric-owner --sort=name -czf "dist/$name.tar.gz" "$name"
rm -rf "$stage"
echo "dist/$name.tar.gz: $(du -h "dist/$name.tar.gz" | cut -f1) ($("$bin/apns-server" --version))"
