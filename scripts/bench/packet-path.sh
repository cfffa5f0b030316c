#!/usr/bin/env bash
# Packet-path overhead of nettrace on the lab path (node 1 -> ClusterIP
# DNAT -> vxlan -> pod on node 2, and back), side by side with tcpdump, in
# the same run: TCP throughput (iperf3) and short-connection rate, for:
#   none              no tracer
#   floor             empty programs where nettrace attaches (the layout's cost)
#   nettrace-nomatch  nettrace watch --netns all, a filter matching nothing
#   nettrace-match    the same, a filter matching the flow
#   tcpdump           tcpdump -i any -w in node 1, the same host filter
# and, with BASELINE=path/to/an/older/nettrace, base-nomatch and base-match
# for a before/after in the same rounds. Modes are interleaved round by
# round (the machine is noisy); the median and spread (min-max) of the
# rounds are printed as a markdown table. Then one round per tracing mode
# with the kernel's BPF statistics on: program runs per packet on the path
# and mean ns per run, per program.
#
# FROM=ntlab-p1 runs the clients in pod p1 on node 1 rather than in the
# node itself: the same Service, DNATed in PREROUTING, and a path forwarded
# by node 1 (a pod's traffic) rather than sent by it.
# BUSY=1 runs the lab's background traffic (ntlab noise) throughout.
# ROUNDS=0 skips the throughput rounds (statistics only).
#
# Usage: scripts/bench/packet-path.sh [ROUNDS] [SECONDS]   (root)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-5}
SECS=${2:-3}
FROM=${FROM:-ntlab-n1}
NETTRACE=bin/nettrace NTLAB=bin/ntlab
scripts/deps.sh bench
OUT=$(mktemp -d)
CONNRATE=$OUT/connrate FLOOR=$OUT/floor
go build -o "$CONNRATE" ./scripts/bench/connrate
go build -o "$FLOOR" ./scripts/bench/floor
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled)

cleanup() {
	if [ -n "${TRACER:-}" ]; then kill "$TRACER" 2>/dev/null || true; wait "$TRACER" 2>/dev/null || true; fi
	if [ -n "${NOISE:-}" ]; then kill "$NOISE" 2>/dev/null || true; wait "$NOISE" 2>/dev/null || true; fi
	sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS"
	# iperf3 -D outlives the lab's namespaces: its pid file says which to stop.
	if [ -f "$OUT/iperf3.pid" ]; then kill "$(cat "$OUT/iperf3.pid")" 2>/dev/null || true; fi
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
if [ "${BUSY:-0}" = 1 ]; then
	"$NTLAB" noise 24h >/dev/null 2>&1 &
	NOISE=$!
	sleep 2
fi

wait_ready() {
	for _ in $(seq 100); do [ -f "$OUT/ready" ] && return; sleep 0.1; done
	echo "tracer did not start: $(cat "$OUT/tracer.err")" >&2
	exit 1
}

start_tracer() {
	rm -f "$OUT/ready"
	local bin=$NETTRACE filter='host 192.0.2.1'
	case $1 in
	none) TRACER= ;;
	floor)
		"$FLOOR" --netns all --ready-file "$OUT/ready" 2>"$OUT/tracer.err" &
		TRACER=$!
		wait_ready ;;
	nettrace-* | base-*)
		[ "${1#base-}" != "$1" ] && bin=$BASELINE
		[ "${1#*-}" = match ] && filter='host 10.96.0.10'
		"$bin" watch --netns all -o json --log-level warn --ready-file "$OUT/ready" "$filter" >/dev/null 2>"$OUT/tracer.err" &
		TRACER=$!
		wait_ready ;;
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

iperf() {
	ip netns exec "$FROM" iperf3 -c 10.96.0.10 -t "$SECS" -J |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9)'
}

MODES=(none floor nettrace-nomatch nettrace-match tcpdump)
[ -n "${BASELINE:-}" ] && MODES+=(base-nomatch base-match)
for r in $(seq "$ROUNDS"); do
	for m in "${MODES[@]}"; do
		start_tracer "$m"
		gbps=$(iperf)
		cps=$(ip netns exec "$FROM" "$CONNRATE" -addr 10.96.0.10:80 -d "${SECS}s")
		stop_tracer
		echo "$m $gbps $cps" >> "$OUT/results"
		echo "round $r $m: $gbps Gbit/s, $cps conn/s" >&2
	done
done

[ "$ROUNDS" -gt 0 ] && python3 - "$OUT/results" "${MODES[@]}" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m, g, c = line.split()
    rows.setdefault(m, ([], []))
    rows[m][0].append(float(g)); rows[m][1].append(float(c))
base_g = statistics.median(rows["none"][0]); base_c = statistics.median(rows["none"][1])
print("| mode | throughput Gbit/s median (min-max) | vs none | connections/s median (min-max) | vs none |")
print("|---|---|---|---|---|")
for m in sys.argv[2:]:
    g, c = rows[m]
    print(f"| {m} | {statistics.median(g):.2f} ({min(g):.2f}-{max(g):.2f}) | {100*statistics.median(g)/base_g:.1f}% "
          f"| {statistics.median(c):.0f} ({min(c):.0f}-{max(c):.0f}) | {100*statistics.median(c)/base_c:.1f}% |")
PY

# Packets on the path: what node 1's vxlan device sends and receives (the
# data one way, the ACKs the other).
path_packets() {
	local d=/sys/class/net/flannel.1/statistics
	ip netns exec ntlab-n1 sh -c "echo \$((\$(cat $d/tx_packets) + \$(cat $d/rx_packets)))"
}

echo
for m in "${MODES[@]}"; do
	case $m in none | tcpdump) continue ;; esac
	start_tracer "$m"
	before=$(path_packets)
	sysctl -qw kernel.bpf_stats_enabled=1
	iperf >/dev/null
	bpftool prog show -j >"$OUT/progs.json"
	sysctl -qw kernel.bpf_stats_enabled=0
	packets=$(($(path_packets) - before))
	stop_tracer
	python3 - "$OUT/progs.json" "$m" "$packets" <<'PY'
import json, sys
path, mode, packets = sys.argv[1], sys.argv[2], int(sys.argv[3])
ours = ("nat_", "route_", "vxlan_", "syn_", "drop_", "dev_", "tcp_", "site_", "floor")
rows = {}
for p in json.load(open(path)):
    n = p.get("name", "")
    if n.startswith(ours) and p.get("run_cnt"):
        r = rows.setdefault(n, [0, 0])
        r[0] += p["run_cnt"]; r[1] += p["run_time_ns"]
runs = sum(r[0] for r in rows.values()); ns = sum(r[1] for r in rows.values())
print(f"{mode}: {packets} packets, {runs / packets:.1f} program runs per packet, {ns / max(runs, 1):.0f} ns per run, {ns / packets:.0f} ns per packet")
print("| program | runs per packet | ns/run |")
print("|---|---:|---:|")
for n, (c, t) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
    print(f"| {n} | {c / packets:.2f} | {t / c:.0f} |")
print()
PY
done
