#!/usr/bin/env bash
# deps.sh: make sure what the test suite needs is installed.
#
# As root it installs what is missing from Debian's packages; otherwise it
# stops with a one-line instruction. Nothing is skipped silently.
set -euo pipefail

need_pkgs=()
command -v go >/dev/null 2>&1 || { echo "deps: Go is missing: install Go 1.26 from https://go.dev/dl/ and put it on PATH" >&2; exit 1; }
command -v redis-server >/dev/null 2>&1 || need_pkgs+=(redis-server)

if [ "${#need_pkgs[@]}" -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing ${need_pkgs[*]}: run 'sudo apt-get install -y ${need_pkgs[*]}' (or 'make deps' as root)" >&2
		exit 1
	fi
	echo "deps: installing ${need_pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
go mod download
