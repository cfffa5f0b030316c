#!/usr/bin/env bash
# Packet-path overhead of nettrace on the lab path (pod/node -> ClusterIP
# DNAT -> vxlan -> pod on the other node, and back), side by side with
# tcpdump, in the same run: TCP throughput (iperf3) and short-connection
# rate, for: no tracer; nettrace with a filter matching nothing; nettrace
# with a filter matching the flow; tcpdump -i any -w on the flow. Modes are
# interleaved round by round (the machine is noisy); the median and the
# spread (min-max) of the rounds are printed as a markdown table.
#
# Usage: scripts/bench/packet-path.sh [ROUNDS] [SECONDS]   (root)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-5}
SECS=${2:-3}
NETTRACE=bin/nettrace NTLAB=bin/ntlab
OUT=$(mktemp -d)
CONNRATE=$OUT/connrate
go build -o "$CONNRATE" ./scripts/bench/connrate

cleanup() {
	[ -n "${TRACER:-}" ] && kill "$TRACER" 2>/dev/null && wait "$TRACER" 2>/dev/null
	"$NTLAB" down
	rm -rf "$OUT"
}
trap cleanup EXIT

"$NTLAB" up snat-missing-healthy >/dev/null
# The lab's ClusterIP also fronts iperf3 on p2 (what kube-proxy would write
# for a second Service port).
ip netns exec ntlab-n1 iptables -t nat -I KUBE-SERVICES -d 10.96.0.10/32 -p tcp --dport 5201 \
	-j DNAT --to-destination 10.244.2.10:5201
ip netns exec ntlab-p2 iperf3 -s -D -B 10.244.2.10 --pidfile "$OUT/iperf3.pid"
sleep 0.5

NS=()
for ns in $(ip netns list | awk '/^ntlab-/ {print $1}'); do NS+=(--netns "$ns"); done

start_tracer() {
	rm -f "$OUT/ready"
	case $1 in
	none) TRACER= ;;
	nettrace-nomatch | nettrace-match)
		local filter='host 192.0.2.1'
		[ "$1" = nettrace-match ] && filter='host 10.96.0.10'
		"$NETTRACE" watch "${NS[@]}" -o json --log-level warn --ready-file "$OUT/ready" "$filter" >/dev/null 2>"$OUT/tracer.err" &
		TRACER=$!
		for _ in $(seq 100); do [ -f "$OUT/ready" ] && break; sleep 0.1; done ;;
	tcpdump)
		ip netns exec ntlab-n1 tcpdump -i any -w "$OUT/t.pcap" -s 262144 'host 10.96.0.10 or host 10.244.2.10' 2>/dev/null &
		TRACER=$!
		sleep 1 ;;
	esac
}

stop_tracer() {
	if [ -n "${TRACER:-}" ]; then
		kill -INT "$TRACER" 2>/dev/null || true
		wait "$TRACER" 2>/dev/null || true
		TRACER=
	fi
	rm -f "$OUT/t.pcap"
}

MODES=(none nettrace-nomatch nettrace-match tcpdump)
for r in $(seq "$ROUNDS"); do
	for m in "${MODES[@]}"; do
		start_tracer "$m"
		gbps=$(ip netns exec ntlab-n1 iperf3 -c 10.96.0.10 -t "$SECS" -J | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9)')
		cps=$(ip netns exec ntlab-n1 "$CONNRATE" -addr 10.96.0.10:80 -d "${SECS}s")
		stop_tracer
		echo "$m $gbps $cps" >> "$OUT/results"
		echo "round $r $m: $gbps Gbit/s, $cps conn/s" >&2
	done
done

python3 - "$OUT/results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m, g, c = line.split()
    rows.setdefault(m, ([], []))
    rows[m][0].append(float(g)); rows[m][1].append(float(c))
base_g = statistics.median(rows["none"][0]); base_c = statistics.median(rows["none"][1])
print("| mode | throughput Gbit/s median (min-max) | vs none | connections/s median (min-max) | vs none |")
print("|---|---|---|---|---|")
for m in ["none", "nettrace-nomatch", "nettrace-match", "tcpdump"]:
    g, c = rows[m]
    print(f"| {m} | {statistics.median(g):.2f} ({min(g):.2f}-{max(g):.2f}) | {100*statistics.median(g)/base_g:.1f}% "
          f"| {statistics.median(c):.0f} ({min(c):.0f}-{max(c):.0f}) | {100*statistics.median(c)/base_c:.1f}% |")
PY
