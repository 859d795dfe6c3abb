# nodedns: build, test, fuzz, lint, bench.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     := bin/nodedns
LDFLAGS := -s -w -X main.version=$(VERSION)
# Seconds each fuzz target runs in `make fuzz`.
FUZZTIME ?= 10s

.PHONY: all build test test-short fuzz lint bench example demo clean package

all: lint build test

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nodedns

# The test command CI runs. Privileged tests (namespaces, mounts) run when NODEDNS_PRIVILEGED=1
# (.ci/run sets it; it needs root).
test:
	$(GO) test -race -count=1 -timeout 30m ./...

test-short:
	$(GO) test -short ./...

# Every fuzz target, briefly (go test -fuzz takes one target at a time).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t"; $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The daemon's idle benchmark (cmd/nodedns BenchmarkRunIdle) counts context switches over this
# window (60s when unset); it prints the window it used as idle-s.
BENCH_IDLE ?= 10s

# The benchmarks that run real components (the check with a real CoreDNS, pods in namespaces) need
# root and the components .ci/run leaves in its cache; as root they run by default.
CI_CACHE ?= $(HOME)/.cache/nodedns-ci
bench:
	NODEDNS_BENCH_IDLE=$(BENCH_IDLE) \
	NODEDNS_PRIVILEGED=$${NODEDNS_PRIVILEGED:-$$([ "$$(id -u)" = 0 ] && echo 1)} \
	NODEDNS_COREDNS=$${NODEDNS_COREDNS:-$(CI_CACHE)/coredns-v1.15.0/bin/coredns} \
	NODEDNS_RESOLVED_DIR=$${NODEDNS_RESOLVED_DIR:-$(CI_CACHE)/systemd-resolved/root} \
	$(GO) test -run='^$$' -bench=. -benchmem ./...
	# nodefs's component walk, measured where the kernel answers openat2 with ENOSYS (a seccomp
	# filter, internal/testutil/noopenat2), as before Linux 5.6.
	NODEDNS_TEST_HIDE_OPENAT2=ENOSYS $(GO) test -run='^$$' -bench=ConfinedRead/walk -benchmem ./internal/nodefs

# Show nodedns at work on the example node (read-only: check and plan never write).
example: build
	@echo '$$ nodedns --root examples/kubespray-host-resolvconf check'
	@./$(BIN) --root examples/kubespray-host-resolvconf check || true
	@echo
	@echo '$$ nodedns --root examples/kubespray-host-resolvconf plan'
	@./$(BIN) --root examples/kubespray-host-resolvconf plan

# The incidents nodedns prevents, happening and then not happening (internal/demo): incidents 002 and
# 001 of docs/incidents.md replayed with a real CoreDNS, dnsmasq and systemd-resolved in namespaces the
# demo makes (this machine's /etc and network are never touched), without and then with `nodedns run`;
# then a node-local-dns rolling update with kubespray's default args (node-cache's teardown modelled
# around a real CoreDNS), a pod's lookups lost without nodedns and answered with its standby.
# Needs root. The first run installs what is missing (dnsmasq-base and the other tools through apt;
# systemd-resolved unpacked, never installed; CoreDNS v1.15.0 built into the cache .ci/run uses, about
# 6 minutes on 2 cores); later runs reuse them and take about 35 seconds. The demo is exec'd as its
# own binary, so Ctrl-C or a SIGTERM reaches it and it removes what it made; killed outright, it
# leaves nothing either (every namespace's init dies with it: internal/testutil/nstest).
DEMO_COREDNS  ?= $(CI_CACHE)/coredns-v1.15.0
DEMO_RESOLVED ?= $(CI_CACHE)/systemd-resolved
demo:
	@set -e; \
	[ "$$(id -u)" = 0 ] || { echo "make demo needs root for its namespaces: sudo make demo"; exit 2; }; \
	go=$$(command -v $(GO) || command -v /usr/local/go/bin/go) || { echo "make demo: go not found (sudo resets PATH): sudo env PATH=\"\$$PATH\" make demo"; exit 2; }; \
	missing=; \
	for p in dnsmasq:dnsmasq-base dbus-daemon:dbus-daemon dbus-send:dbus-bin nsenter:util-linux ip:iproute2 getent:libc-bin useradd:passwd dhclient:isc-dhcp-client iptables:iptables dig:bind9-dnsutils; do \
	  command -v $${p%%:*} >/dev/null 2>&1 || missing="$$missing $${p#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "== installing$$missing (apt-get, once)"; \
	  apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi; \
	if [ ! -x "$(DEMO_RESOLVED)/root/lib/systemd/systemd-resolved" ]; then \
	  echo "== unpacking systemd-resolved into $(DEMO_RESOLVED) (once; never installed: it would rewire this machine's DNS)"; \
	  rm -rf "$(DEMO_RESOLVED)" && mkdir -p "$(DEMO_RESOLVED)/root"; \
	  apt-get update -qq; \
	  (cd "$(DEMO_RESOLVED)" && apt-get download -qq systemd-resolved libsystemd-shared); \
	  for deb in "$(DEMO_RESOLVED)"/*.deb; do dpkg -x "$$deb" "$(DEMO_RESOLVED)/root"; done; \
	fi; \
	if [ ! -x "$(DEMO_COREDNS)/bin/coredns" ]; then \
	  echo "== building CoreDNS v1.15.0 into $(DEMO_COREDNS) (once: about 6 minutes on 2 cores; later runs reuse it)"; \
	  (cd / && GOFLAGS= GOBIN="$(DEMO_COREDNS)/bin" $$go install github.com/coredns/coredns@v1.15.0); \
	fi; \
	$(MAKE) --no-print-directory build GO=$$go >/dev/null; \
	$$go build -o bin/nodedns-demo ./internal/demo/cmd; \
	$$go build -o bin/nstest-enter ./internal/testutil/nstest/enter; \
	NODEDNS_COREDNS="$(DEMO_COREDNS)/bin/coredns" NODEDNS_RESOLVED_DIR="$(DEMO_RESOLVED)/root" NSTEST_ENTER="$(CURDIR)/bin/nstest-enter" \
	  exec bin/nodedns-demo --nodedns $(BIN)

# deb and rpm in dist/ with nfpm v2.45.2 (nfpm.yaml): the binary stamped with the package version, the
# hardened unit, the commented default config, and the man page and completions `nodedns gen` writes.
PKG_VERSION ?= $(or $(patsubst v%,%,$(shell git describe --tags --match 'v[0-9]*' --abbrev=0 2>/dev/null)),0.1.0)
PKG_ARCH    ?= $(shell $(GO) env GOARCH)
NFPM        ?= nfpm

package:
	@command -v $(NFPM) >/dev/null 2>&1 || { echo 'make package needs nfpm v2.45.2: go install github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2 (then put $$(go env GOPATH)/bin on PATH)' >&2; exit 1; }
	$(MAKE) build VERSION=$(PKG_VERSION)
	rm -rf dist && mkdir -p dist/gen
	./$(BIN) gen dist/gen >/dev/null
	gzip -9n dist/gen/nodedns.1
	NODEDNS_VERSION=$(PKG_VERSION) NODEDNS_ARCH=$(PKG_ARCH) $(NFPM) package -f nfpm.yaml -p deb -t dist/
	NODEDNS_VERSION=$(PKG_VERSION) NODEDNS_ARCH=$(PKG_ARCH) $(NFPM) package -f nfpm.yaml -p rpm -t dist/

clean:
	rm -rf bin dist
