#!/usr/bin/env bash
# Per-program cost on the packet path: the kernel's own BPF statistics
# (kernel.bpf_stats_enabled: run count and run time of every program) while
# a client makes short TCP connections through a DNAT to a server in
# another namespace. Run once with a filter matching nothing and once with
# a filter matching the flow. Needs root and bpftool.
#
# Usage: scripts/bench/probe-cost.sh [BIN] [CONNECTIONS]
set -euo pipefail
BIN=${1:-bin/nettrace}
N=${2:-2000}
C=nt-bench-c S=nt-bench-s
OUT=$(mktemp -d)
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled)

cleanup() {
	[ -n "${WATCH:-}" ] && kill "$WATCH" 2>/dev/null && wait "$WATCH" 2>/dev/null
	[ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null
	ip netns del $C 2>/dev/null || true
	ip netns del $S 2>/dev/null || true
	sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS"
	rm -rf "$OUT"
}
trap cleanup EXIT

ip netns add $C
ip netns add $S
ip link add veth-c netns $C type veth peer name veth-s netns $S
ip -n $C addr add 10.124.0.1/24 dev veth-c
ip -n $S addr add 10.124.0.2/24 dev veth-s
for ns in $C $S; do ip -n $ns link set lo up; done
ip -n $C link set veth-c up
ip -n $S link set veth-s up
ip -n $C route add 10.96.0.0/12 dev veth-c
ip netns exec $C iptables -t nat -A OUTPUT -d 10.96.0.10 -p tcp --dport 80 -j DNAT --to-destination 10.124.0.2:8080
ip netns exec $S nc -lk 10.124.0.2 8080 </dev/null >/dev/null 2>&1 &
SERVER=$!
sleep 0.3

run() {
	local label=$1 filter=$2
	"$BIN" watch --netns $C --netns $S --ready-file "$OUT/ready" --log-level warn "$filter" >/dev/null 2>"$OUT/err" &
	WATCH=$!
	for _ in $(seq 100); do [ -f "$OUT/ready" ] && break; sleep 0.1; done
	sysctl -qw kernel.bpf_stats_enabled=1
	local start=$(date +%s.%N)
	ip netns exec $C bash -c "for i in \$(seq $N); do exec 3<>/dev/tcp/10.96.0.10/80; exec 3>&-; done"
	local end=$(date +%s.%N)
	bpftool prog show -j > "$OUT/progs.json"
	sysctl -qw kernel.bpf_stats_enabled=0
	kill -INT $WATCH; wait $WATCH || true; WATCH=
	rm -f "$OUT/ready"
	echo "== $label: filter '$filter', $N connections in $(echo "$end - $start" | bc) s"
	python3 - "$OUT/progs.json" <<'PY'
import json, sys
ours = ("nat_", "route_", "vxlan_", "syn_", "drop_", "dev_", "tcp_", "site_")
print(f"{'program':<18}{'runs':>10}{'ns/run':>10}")
for p in sorted(json.load(open(sys.argv[1])), key=lambda p: p.get("name", "")):
    n = p.get("name", "")
    if n.startswith(ours) and p.get("run_cnt"):
        print(f"{n:<18}{p['run_cnt']:>10}{p['run_time_ns'] / p['run_cnt']:>10.0f}")
PY
}

run "matching nothing" "host 192.0.2.1"
run "matching the flow" "host 10.96.0.10"
