#!/usr/bin/env bash
# The event pipeline past its limit: bulk TCP through the lab path with
# every packet reported (--all-packets, a filter matching the flow), so
# the kernel produces more events than user space can take. Prints the
# events delivered per second, the events lost (counted, never silent),
# nettrace's peak memory, and how long it takes to stop after SIGINT.
#
# Usage: [FORMAT=text] scripts/bench/pipeline.sh [SECONDS] [RING_BYTES]   (root)
# The default, json with --events and --timelines all, encodes every event
# in order; FORMAT=text shows flows only, explained and rendered off the
# reading goroutine.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-10}
RING=${2:-8388608}
NETTRACE=bin/nettrace NTLAB=bin/ntlab
OUT=$(mktemp -d)
# iperf3 -D outlives the lab's namespaces: its pid file says which to stop.
cleanup() {
	if [ -f "$OUT/iperf3.pid" ]; then kill "$(cat "$OUT/iperf3.pid")" 2>/dev/null || true; fi
	"$NTLAB" down
	rm -rf "$OUT"
}
trap cleanup EXIT

"$NTLAB" up snat-missing-healthy >/dev/null
ip netns exec ntlab-n1 iptables -t nat -I KUBE-SERVICES -d 10.96.0.10/32 -p tcp --dport 5201 \
	-j DNAT --to-destination 10.244.2.10:5201
ip netns exec ntlab-p2 iperf3 -s -D -B 10.244.2.10 --pidfile "$OUT/iperf3.pid"
sleep 0.5
NS=()
for ns in $(ip netns list | awk '/^ntlab-/ {print $1}'); do NS+=(--netns "$ns"); done

/usr/bin/time -f "%M" -o "$OUT/rss" "$NETTRACE" watch ${PROFILE:-} "${NS[@]}" --all-packets --ring-size "$RING" $([ "${FORMAT:-json}" = json ] && echo -o json --events --timelines all || echo -o text) \
	--log-level warn --ready-file "$OUT/ready" 'host 10.96.0.10' >/dev/null 2>"$OUT/err" &
WATCH=$!
for _ in $(seq 100); do [ -f "$OUT/ready" ] && break; sleep 0.1; done
gbps=$(ip netns exec ntlab-n1 iperf3 -c 10.96.0.10 -t "$SECS" -J | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9, 2))')
start=$(date +%s.%N)
pkill -INT -P "$WATCH" # /usr/bin/time ignores SIGINT: signal nettrace itself
wait "$WATCH" || true
stop=$(echo "$(date +%s.%N) - $start" | bc)
echo "iperf3 with every packet reported: $gbps Gbit/s over ${SECS}s; ring buffer $RING bytes"
grep -a "events in" "$OUT/err"
echo "peak RSS: $(( $(cat "$OUT/rss") / 1024 )) MiB; stopped ${stop}s after SIGINT"
