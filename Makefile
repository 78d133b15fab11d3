# apns-engine: the two commands a new machine needs are `make demo` and `make test`.
# Both install what is missing (Debian packages, as root), then build.

SWIFT      ?= swift
CONFIG     ?= release
DEB_PKGS   := libssl-dev libcurl4-openssl-dev libnghttp2-dev nghttp2-client nghttp2-server openssl curl python3
DEMO_DIR   := .demo

.PHONY: all deps build demo test keys clean bench fuzz sanitize

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

demo: build keys
	@scripts/demo.sh "$$($(SWIFT) build -c $(CONFIG) --show-bin-path)" $(DEMO_DIR)

test: deps
	$(SWIFT) build --build-tests
	# A hung test must fail the run, not stall it: the whole suite takes ~70 s here.
	timeout 1200 $(SWIFT) test --skip-build

# libFuzzer harnesses (fuzz/), FUZZ_SECONDS each (default 60); scripts/fuzz.sh --short is the CI one.
fuzz: deps
	scripts/fuzz.sh

# The shim and the mock under AddressSanitizer + UBSan: their Swift tests, then a leak check.
sanitize: deps
	scripts/sanitize.sh

# h2load, apns-send, apns-bench (and aioapns) against apns-mock; see BENCHMARKS.md.
# QUICK=1 for one short round; BENCH_N=N sets the headline row's notifications.
bench: deps
	QUICK=$(QUICK) BENCH_N=$(BENCH_N) scripts/bench.sh

clean:
	rm -rf .build $(DEMO_DIR)
