# Switchboard: the two commands a newcomer needs are `make run` and `make test`.

GO       ?= go
BIN      := bin
FUZZTIME ?= 60s
ADDR     ?= 127.0.0.1:8080

.PHONY: all build run test test-go bench fuzz lint deps clean

all: build

## build: compile the hub into bin/hub
build:
	$(GO) build -o $(BIN)/hub ./cmd/hub

## run: build and run the hub on $(ADDR)
run: build
	./$(BIN)/hub --addr $(ADDR)

## deps: install what the tests need (as root), or say what is missing
deps:
	./scripts/deps.sh

## test: everything, with the race detector on
test: deps lint test-go

test-go:
	$(GO) test -race -count=1 -timeout 20m ./...

## bench: benchmarks, with ratios against baselines measured in the same run
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./pkg/...

## fuzz: run every fuzz target for $(FUZZTIME) each
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./pkg/jsonrpc
	$(GO) test -run '^$$' -fuzz '^FuzzValidate$$' -fuzztime $(FUZZTIME) ./pkg/jsonrpc

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf $(BIN)
