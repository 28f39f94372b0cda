# syntax=docker/dockerfile:1
#
# Switchboard: a static hub binary (and the demo MCP server) on distroless.
#
#   docker build -t switchboard .
#   docker run --rm -p 8080:8080 -v "$PWD/deploy/tokens.example.yaml:/etc/switchboard/tokens.yaml:ro" \
#       switchboard --tokens /etc/switchboard/tokens.yaml
#
# The hub listens on 0.0.0.0:8080 in the container (SWITCHBOARD_ADDR below),
# and it refuses to listen beyond loopback without --tokens (or an explicit
# --insecure): run the image bare and it exits with an error saying so.
#
# See docker-compose.yml and docs/deployment.md for several instances behind
# a load balancer.

# go.mod asks for Go >= 1.26.8, and the official images set GOTOOLCHAIN=local
# (no toolchain download): build with --pull if a cached golang:1.26 is older.
ARG GO_VERSION=1.26

# ---- build ------------------------------------------------------------------
# Runs on the build machine's own platform and cross-compiles for the target
# (docker buildx build --platform linux/amd64,linux/arm64 ...), which pure Go
# without cgo does quickly and exactly.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-mod=readonly

# Modules first, so that editing the source does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .
ARG TARGETOS TARGETARCH
# -trimpath keeps the build machine's paths out of the binary (and of any
# panic), -s -w drops the symbol table and DWARF; CGO_ENABLED=0 makes both
# binaries fully static, so they need no libc in the final image.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/hub ./cmd/demo

# ---- run --------------------------------------------------------------------
# distroless/static: CA certificates, tzdata, /etc/passwd with the user
# nonroot (65532), and nothing else: no shell, no package manager, no curl.
FROM gcr.io/distroless/static-debian12:nonroot

LABEL org.opencontainers.image.title="switchboard" \
      org.opencontainers.image.description="WebSocket hub for the Model Context Protocol"

COPY --from=build /out/hub /out/demo /usr/local/bin/

# The default address, as an environment variable rather than a CMD argument,
# so that it stays in force when `docker run image --tokens ...` or a compose
# `command:` replaces the arguments. A --addr argument still wins.
ENV SWITCHBOARD_ADDR=0.0.0.0:8080
EXPOSE 8080

USER nonroot:nonroot

# No HEALTHCHECK: the image has no curl, wget or shell to run one with.
# Orchestrators should probe over HTTP instead:
#   GET /healthz  liveness: 200 while the process serves HTTP
#   GET /readyz   readiness: 503 while draining (after SIGTERM) or while
#                 Redis is unreachable, 200 otherwise
# (a Kubernetes httpGet probe, or a load balancer's health check).
#
# SIGTERM (docker stop) drains: new connections get 503, calls in flight may
# finish for --drain-timeout (default 10s), then every WebSocket is closed
# with 1001 "going away". Give the container longer than that to stop
# (docker stop -t, compose stop_grace_period, terminationGracePeriodSeconds).
ENTRYPOINT ["/usr/local/bin/hub"]
