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

# lint: gofmt, go vet, staticcheck (pinned; installed under .cache by its
# ordinary go install) and shellcheck (Debian package, make deps) on scripts/.
STATICCHECK_VERSION := v0.8.2
STATICCHECK         := .cache/staticcheck-$(STATICCHECK_VERSION)/staticcheck

$(STATICCHECK):
	GOFLAGS= GOBIN=$(CURDIR)/$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@command -v shellcheck >/dev/null || { echo "lint: shellcheck is missing (make deps installs it)"; exit 1; }
	shellcheck scripts/*.sh

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
