#!/usr/bin/env bash
# stress.sh: the hub, peer and pubsub tests under CPU load, to find the
# interleavings that a quiet machine hides.
#
# It keeps every core busy with spinning shell loops while the tests run
# with -race, COUNT times each (default 20), then once more with
# GOMAXPROCS=1. Every test that fails here is a bug in the code or in the
# test: fix the cause, never the timeout.
#
#   COUNT=20 PKGS="./pkg/hub/... ./pkg/peer/... ./pkg/pubsub/..." scripts/stress.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT="${COUNT:-20}"
PKGS="${PKGS:-./pkg/hub/... ./pkg/peer/... ./pkg/pubsub/...}"
RUN="${RUN:-}"
GO="${GO:-go}"

spinners=()
stop() {
	for p in "${spinners[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap stop EXIT INT TERM
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
for _ in $(seq "$cores"); do
	sh -c 'while :; do :; done' &
	spinners+=("$!")
done
echo "stress: $cores spinning loops; go test -race -count=$COUNT $PKGS"

runargs=()
[ -n "$RUN" ] && runargs=(-run "$RUN")
start=$(date +%s)
# shellcheck disable=SC2086
$GO test -race -count="$COUNT" -timeout 60m "${runargs[@]}" $PKGS
mid=$(date +%s)
echo "stress: GOMAXPROCS=1, count $(( (COUNT + 3) / 4 ))"
# shellcheck disable=SC2086
GOMAXPROCS=1 $GO test -race -count=$(( (COUNT + 3) / 4 )) -timeout 60m "${runargs[@]}" $PKGS
end=$(date +%s)
echo "stress: passed: -count=$COUNT in $((mid - start)) s, GOMAXPROCS=1 in $((end - mid)) s, under $cores spinning loops"
