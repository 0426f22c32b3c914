# realm: the guarded workspace filesystem (realmfs) and its session manager
# (realmctl). `make run` and `make test` do all set-up on a fresh Debian 12
# machine (as root: they install the Debian packages they need).

GO        ?= go
BIN       := bin
# The podman bindings build without cgo only with these tags.
TAGS      := remote,exclude_graphdriver_btrfs,containers_image_openpgp
GOFLAGS   += -tags=$(TAGS)
export GOFLAGS

.PHONY: all build run test unit e2e bench lint deps fuzz clean

all: build

build:
	$(GO) build -o $(BIN)/realmfs ./cmd/realmfs
	@if ls cmd/realmctl/*.go >/dev/null 2>&1; then $(GO) build -o $(BIN)/realmctl ./cmd/realmctl; fi

# deps installs the Debian packages the mount, the demo and the tests use.
deps:
	scripts/install-deps.sh

# run mounts a demo workspace with the default policy, shows the guard at
# work, and unmounts.
run: deps build
	scripts/demo.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /e2e)

fuzz:
	scripts/fuzz.sh 100000x

# e2e runs the end-to-end suite on real mounts, with a real podman service
# started for the realmctl tests and stopped afterwards.
e2e: build
	scripts/run-e2e.sh

# test is what CI runs: set-up, lint, unit tests with -race, short fuzz
# runs, and the end-to-end suite.
test: deps lint unit fuzz e2e

bench: deps build
	scripts/bench.sh

clean:
	rm -rf $(BIN) .cache
