#!/usr/bin/env bash
# Runs `make test` from a fresh clone of HEAD with a CPU hog on one core
# beside it (stress-ng, from Debian), as a slower or busier machine of our
# kind would: the suite must pass there too. Prints the run's time and
# result; exits with make's status. The clone is removed afterwards.
#
# Usage: scripts/stress.sh [HOGS]   (default 1 core hogged)
set -uo pipefail
cd "$(dirname "$0")/.."
HOGS=${1:-1}
command -v stress-ng >/dev/null || {
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends stress-ng >/dev/null || exit 1
}
CLONE=$(mktemp -d /tmp/nettrace-stress.XXXXXX)
hog=""
trap '[ -n "$hog" ] && kill "$hog" 2>/dev/null; rm -rf "$CLONE"' EXIT
git clone -q . "$CLONE" || exit 1
stress-ng --cpu "$HOGS" --timeout 0 >/dev/null 2>&1 &
hog=$!
echo "stress: make test in $CLONE at $(git rev-parse --short HEAD), $HOGS core(s) hogged"
start=$(date +%s)
(cd "$CLONE" && make test)
rc=$?
echo "stress: make test exited $rc after $(( $(date +%s) - start )) s with $HOGS core(s) hogged"
exit $rc
