# apns-engine: the two commands a new machine needs are `make demo` and `make test`.
# Every target installs what is missing (Debian packages, as root), then builds; clang with
# libFuzzer and the sanitizer runtimes, and lld, come with the Swift toolchain.
#
#   make demo      build apns-mock and apns-send, a throw-away key and certificate, apns-mock
#                  on 127.0.0.1, one send
#   make demo-server  the same with apns-server (a debug build): two devices registered, one
#                  event, its log
#   make test      what CI runs (scripts/test.sh: it prints each phase's time and the total):
#                  the whole suite, then every fuzz harness for a few seconds (fuzz.sh --short)
#                  and the sanitizer check on a smaller run (sanitize.sh --short: ASan/UBSan
#                  tests of the shim and the mock, a 10k-request leak check per transport),
#                  and schemathesis on the live server against its OpenAPI document (api-test.sh)
#   make soak      the long variants: the suite with APNS_SOAK=1 (fault matrix at 100k
#                  tokens, CLI memory at 1M), then `make fuzz`, `make sanitize`, schemathesis
#                  for 10 minutes on SQLite and 10 on PostgreSQL (api-test.sh), and
#                  `make dist-check`
#   make dist      dist/apns-engine-VERSION-linux-x86_64.tar.gz: apns-server, apns-send and
#                  apns-mock with the Swift runtime linked in, the example config, the
#                  systemd unit, INSTALL.md (scripts/dist.sh; its own scratch path)
#   make dist-check  that tarball on a minimal Debian root (debootstrap, cached in
#                  .dist-root/) with only the libraries it needs, in a chroot: apns-send to
#                  apns-mock, one notification through apns-server, systemd-analyze verify
#                  (scripts/dist-check.sh; root; minutes, so in make soak, not make test)
#   make fuzz      every libFuzzer harness, FUZZ_SECONDS each (default 60)
#   make sanitize  ASan/UBSan tests of the shim and the mock, a leak check of LEAK_REQUESTS
#                  (default 100k) requests per transport
#   make docs      the DocC catalogs of the APNs and APNsMock libraries (the toolchain's docc),
#                  every DocC warning an error and every public symbol documented
#                  (scripts/docs.sh; archives in .build-docs/docs/); make test builds them too
#   make bench     h2load, apns-send, apns-bench (and aioapns) on apns-mock: BENCHMARKS.md

SWIFT      ?= swift
CONFIG     ?= release
DEB_PKGS   := libssl-dev libcurl4-openssl-dev libnghttp2-dev libsqlite3-dev nghttp2-client nghttp2-server openssl curl python3 time tzdata tinyproxy-bin postgresql chromium chromium-driver python3-venv prometheus debootstrap valgrind
DEMO_DIR   := .demo

.PHONY: all deps build demo demo-server test soak keys clean bench bench-server bench-scaleout fuzz sanitize api-venv dist dist-check docs

all: build

# Installs the Debian packages the build, the tests and the benchmarks use, only when missing.
deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  if [ "$$(id -u)" != 0 ]; then echo "make deps: need root to install:" $$missing >&2; exit 1; fi; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

build: deps
	$(SWIFT) build -c $(CONFIG)

# Throw-away demo material (git-ignored): a local CA, the mock's TLS certificate, a provider key.
keys:
	@scripts/gen-pki.sh $(DEMO_DIR)/pki

# Each demo builds only the programs it runs: apns-send and apns-mock need none of the
# service's dependencies (Hummingbird, NIO, BoringSSL, GRDB, PostgresNIO).
demo: deps keys
	@for product in apns-mock apns-send; do $(SWIFT) build -c $(CONFIG) --product $$product || exit; done
	@scripts/demo.sh "$$($(SWIFT) build -c $(CONFIG) --show-bin-path)" $(DEMO_DIR)

# apns-server on loopback: apns-mock, the service (examples/server config), two devices
# registered with the seed's own calls, one event, its delivery log; SIGTERM drain.
# A debug build: the service's dependencies take several times longer to build
# optimized, a demo of a few requests does not need it, and make test builds the same.
DEMO_SERVER_CONFIG ?= debug
demo-server: deps keys
	@for product in apns-mock apns-server; do $(SWIFT) build -c $(DEMO_SERVER_CONFIG) --product $$product || exit; done
	@scripts/demo-server.sh "$$($(SWIFT) build -c $(DEMO_SERVER_CONFIG) --show-bin-path)" $(DEMO_DIR)

# The phases, each timed, and the total: scripts/test.sh.
test: deps api-venv
	SWIFT=$(SWIFT) scripts/test.sh

soak: deps api-venv
	$(SWIFT) build --build-tests
	APNS_SOAK=1 timeout 3600 $(SWIFT) test --skip-build
	scripts/fuzz.sh
	scripts/sanitize.sh
	scripts/api-test.sh --seconds 600
	scripts/api-test.sh --seconds 600 --postgres
	$(MAKE) dist-check

# schemathesis and openapi-spec-validator (PyPI) in a virtual environment under ~/.cache, for scripts/api-test.sh.
api-venv: deps
	scripts/api-test.sh --install

# The release tarball, and its proof on a bare Debian root (see the top of this file).
dist: deps
	SWIFT=$(SWIFT) scripts/dist.sh

dist-check: dist
	scripts/dist-check.sh

# libFuzzer harnesses (fuzz/), FUZZ_SECONDS each (default 60).
fuzz: deps
	scripts/fuzz.sh

# The shim and the mock under AddressSanitizer + UBSan: their Swift tests, then a leak check.
sanitize: deps
	scripts/sanitize.sh

# DocC for the two libraries (see the top of this file); only the core targets are built.
docs: deps
	SWIFT=$(SWIFT) scripts/docs.sh

# h2load, apns-send, apns-bench (and aioapns) against apns-mock; see BENCHMARKS.md.
# QUICK=1 for one short round; BENCH_N=N sets the headline row's notifications.
bench: deps
	QUICK=$(QUICK) BENCH_N=$(BENCH_N) scripts/bench.sh

# apns-server vs apns-send: one notification to 100k stored devices on one apns-mock (median of 3).
bench-server: deps
	$(SWIFT) build -c release
	scripts/bench-server.sh "$$($(SWIFT) build -c release --show-bin-path)" 100000 3

# apns-server on PostgreSQL: 1, 2 and 3 instances on one database and one apns-mock (50 ms,
# 100 streams a connection), 30,000 deliveries, median of 3; the SQLite single instance beside it.
bench-scaleout: deps
	$(SWIFT) build -c release
	scripts/bench-scaleout.sh "$$($(SWIFT) build -c release --show-bin-path)" 30000 3

clean:
	rm -rf .build .build-asan .build-fuzz .build-dist .build-docs dist $(DEMO_DIR)

