# Switchboard: the two commands a newcomer needs are `make run` and `make test`.

GO        ?= go
BIN       := bin
FUZZTIME  ?= 60s
FUZZOTHER ?= 15s
ADDR      ?= 127.0.0.1:8080

.PHONY: all build run test test-go test-gosdk test-e2e test-web conformance stress bench bench-go fuzz lint deps clean

all: build

## build: compile the hub (and the stand-alone demo server) into bin/
build:
	$(GO) build -o $(BIN)/hub ./cmd/hub
	$(GO) build -o $(BIN)/demo ./cmd/demo

## run: build and run the hub with the demo server on $(ADDR)
run: build
	./$(BIN)/hub --demo --addr $(ADDR)

## deps: install what the tests need (as root), or say what is missing
deps:
	./scripts/deps.sh

## test: everything, with the race detector on: Go (the MCP conformance suite
## included), Go SDK and TypeScript SDK interop, browser
test: deps lint build test-go test-gosdk test-e2e test-web

test-go:
	$(GO) test -race -count=1 -timeout 20m ./...

## test-gosdk: interoperability with the official MCP Go SDK (a module of its own)
test-gosdk:
	cd e2e/gosdk && $(GO) test -race -count=1 -timeout 10m ./...

## conformance: the official MCP conformance suite, every server scenario of
## 2025-11-25 and of 2026-07-28 at its own wire, in every lane (the fixture
## served directly, through the hub, behind hub connect), and one table of them all
conformance:
	$(GO) test -count=1 -v -run '^TestConformance$$' ./internal/conformance

## test-e2e: interoperability with the official MCP TypeScript SDK
test-e2e: build
	cd e2e && npm test

## test-web: browser client unit tests and the dashboard in headless chromium
test-web: build
	cd web/test && npm test

## stress: the hub, peer and pubsub tests with -race, COUNT (20) times each, while every
## core spins, then with GOMAXPROCS=1 (RUN=regexp narrows it)
stress: deps
	COUNT=$(or $(COUNT),20) RUN='$(RUN)' ./scripts/stress.sh

## bench: the load generator (raw echo, peer, hub, cross-instance, fan-out, idle, churn)
## against the targets, writing docs/benchmarks.md; BENCHFLAGS=-quick for a short run
bench:
	$(GO) run ./cmd/hubbench $(BENCHFLAGS)

## bench-go: the Go benchmarks (peer vs raw WebSocket, cross-instance vs one instance)
bench-go:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./pkg/...

## fuzz: the JSON-RPC decoder for $(FUZZTIME), every other fuzz target for $(FUZZOTHER)
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./pkg/jsonrpc
	@for f in FuzzValidate FuzzTopMembers FuzzMember FuzzSetMember FuzzWithoutMembers; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZOTHER) ./pkg/jsonrpc || exit 1; done
	@for f in FuzzParseObject FuzzURITemplate FuzzServerRequest FuzzSSEReader FuzzEventID FuzzStreamablePOST FuzzAccept FuzzTaskRequest FuzzTraceHeaders FuzzParamHeaders FuzzModernRequest FuzzInputResponse FuzzParseRequestMeta FuzzDecorate FuzzWithoutMeta; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZOTHER) ./pkg/mcp || exit 1; done
	@for f in FuzzStdio; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZOTHER) ./pkg/peer || exit 1; done
	@for f in FuzzParseConfig FuzzParsePool; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZOTHER) ./internal/connect || exit 1; done
	@for f in FuzzParseTokens FuzzClientCaps FuzzListItem FuzzClusterMessage FuzzStatsSummary FuzzEnvelope FuzzElicitationIDs FuzzCatalogMessage FuzzTaskRecord FuzzTaskParams FuzzRequestMeta; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZOTHER) ./pkg/hub || exit 1; done
	@for f in FuzzReadReply FuzzMessage; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZOTHER) ./pkg/pubsub || exit 1; done
	@for f in FuzzVerify FuzzParseKeySet FuzzParseServerMetadata FuzzParseResourceMetadata FuzzParseIntrospection FuzzOAuthErrorCode FuzzKeysMaxAge FuzzParseChallenges FuzzBearerToken; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZOTHER) ./pkg/oauth || exit 1; done
	@for f in FuzzExtractMeta FuzzInjectMeta FuzzUnpack; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZOTHER) ./internal/tracing || exit 1; done
	@for f in FuzzParse FuzzArguments; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZOTHER) ./pkg/catalog || exit 1; done
	@for f in FuzzIndex; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZOTHER) ./internal/search || exit 1; done
	@for f in FuzzParseGoBench; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZOTHER) ./cmd/hubbench || exit 1; done

## lint: gofmt and go vet (e2e/gosdk too)
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd e2e/gosdk && $(GO) vet ./...

clean:
	rm -rf $(BIN)
