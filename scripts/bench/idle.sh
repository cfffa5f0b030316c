#!/usr/bin/env bash
# What nettrace costs an idle node: the DaemonSet's recorder (record
# --netns all --flight --keep 50 --healthy count) on the lab with incident
# 1's fault up and no traffic, for SECONDS (default 60): its CPU (user and
# system, from /proc) as a share of one core, and its resident memory.
#
# Usage: scripts/bench/idle.sh [SECONDS]   (root)
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-60}
NETTRACE=${NETTRACE:-bin/nettrace} NTLAB=bin/ntlab
OUT=$(mktemp -d)
cleanup() {
	if [ -n "${TRACER:-}" ]; then kill "$TRACER" 2>/dev/null || true; wait "$TRACER" 2>/dev/null || true; fi
	"$NTLAB" down
	rm -rf "$OUT"
}
trap cleanup EXIT
"$NTLAB" up snat-missing >/dev/null
"$NETTRACE" record --netns all --flight "$OUT/flight" --keep 50 --healthy count --log-level warn --ready-file "$OUT/ready" 2>"$OUT/stderr" &
TRACER=$!
for _ in $(seq 300); do [ -f "$OUT/ready" ] && break; sleep 0.1; done
[ -f "$OUT/ready" ] || { echo "idle: nettrace did not start: $(cat "$OUT/stderr")" >&2; exit 1; }
sleep 2 # what attaching itself costs is not the idle node's
hz=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$TRACER/stat"; }
t0=$(ticks)
sleep "$SECS"
t1=$(ticks)
rss=$(awk '/VmRSS/ { print $2 }' "/proc/$TRACER/status")
python3 -c "print(f'idle node, {$SECS} s: nettrace used {($t1 - $t0) / $hz:.2f} s of CPU, {100 * ($t1 - $t0) / $hz / $SECS:.2f} % of a core; RSS {$rss / 1024:.0f} MiB')"
