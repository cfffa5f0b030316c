#!/usr/bin/env bash
# User space's cost per event on the connection sweep's path, where it can
# be measured to a few percent: a live sweep's rate moves by more than a
# tenth of user space's time from round to round, a replay of one recording
# does not. Records RATE short connections a second for SECONDS
# (conn-path.sh: no filter, every namespace), then replays the recording
# ROUNDS times, alternately with BASELINE=path/to/an/older/nettrace when
# given. Prints, per build: the median user CPU and wall time of a replay,
# user CPU per event and per connection, and a checksum of the replay's
# timelines as JSON: two builds that correlate and explain alike print the
# same checksum.
#
# Usage: [BASELINE=...] scripts/bench/replay-cost.sh [RATE] [SECONDS] [ROUNDS]   (root)
set -euo pipefail
cd "$(dirname "$0")/../.."
RATE=${1:-2000}
SECS=${2:-6}
ROUNDS=${3:-7}
bench_cleanup() {
	reap "${WATCH:-}"
}
. scripts/bench/conn-path.sh

rm -f "$OUT/ready"
"$NETTRACE" record -w "$OUT/rec.ntrace" --netns all --ready-file "$OUT/ready" --log-level warn 2>"$OUT/err" &
WATCH=$!
for _ in $(seq 200); do [ -f "$OUT/ready" ] && break; sleep 0.1; done
conns=$(ip netns exec ntlab-q1 "$CONNRATE" -addr 10.96.0.99:9000 -d "${SECS}s" -workers 8 -rate "$RATE" 2>/dev/null)
kill -INT $WATCH
wait $WATCH || true
WATCH=
events=$(sed -n 's/^nettrace: \([0-9]*\) events in .*/\1/p' "$OUT/err")
lost=$(sed -n 's/.* \([0-9]*\) lost$/\1/p' "$OUT/err")
echo "== recorded $events events ($lost lost) of $conns connections a second for ${SECS}s"

builds=(nettrace)
declare -A bin=([nettrace]=$NETTRACE)
if [ -n "${BASELINE:-}" ]; then
	builds+=(baseline)
	bin[baseline]=$BASELINE
fi
TIMEFORMAT='%U %R'
for _ in $(seq "$ROUNDS"); do
	for b in "${builds[@]}"; do
		{ time "${bin[$b]}" replay --timelines findings "$OUT/rec.ntrace" >/dev/null 2>&1; } 2>>"$OUT/$b.times"
	done
done
echo "| build | user s (median) | wall s (median) | user us/event | user us/conn | timelines (md5) |"
echo "|---|---|---|---|---|---|"
for b in "${builds[@]}"; do
	sum=$("${bin[$b]}" replay --timelines all -o json "$OUT/rec.ntrace" 2>/dev/null | md5sum | cut -c1-12)
	python3 - "$OUT/$b.times" "$events" "$(echo "$conns * $SECS" | bc)" "$b" "$sum" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
user = statistics.median(r[0] for r in rows)
wall = statistics.median(r[1] for r in rows)
events, conns = float(sys.argv[2]), float(sys.argv[3])
print(f"| {sys.argv[4]} | {user:.2f} | {wall:.2f} | {user / events * 1e6:.2f} | {user / conns * 1e6:.0f} | {sys.argv[5]} |")
PY
done
