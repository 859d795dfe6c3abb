# nodedns: build, test, fuzz, lint, bench.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     := bin/nodedns
LDFLAGS := -s -w -X main.version=$(VERSION)
# Seconds each fuzz target runs in `make fuzz`.
FUZZTIME ?= 10s

.PHONY: all build test test-short fuzz lint bench example clean

all: lint build test

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nodedns

# The test command CI runs. Privileged tests (namespaces, mounts) run when NODEDNS_PRIVILEGED=1
# (.ci/run sets it; it needs root).
test:
	$(GO) test -race -count=1 ./...

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

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# Show nodedns at work on the example node (read-only: check and plan never write).
example: build
	@echo '$$ nodedns --root examples/kubespray-host-resolvconf check'
	@./$(BIN) --root examples/kubespray-host-resolvconf check || true
	@echo
	@echo '$$ nodedns --root examples/kubespray-host-resolvconf plan'
	@./$(BIN) --root examples/kubespray-host-resolvconf plan

clean:
	rm -rf bin
