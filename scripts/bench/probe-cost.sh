#!/usr/bin/env bash
# Per-program cost per connection on the connection sweep's path
# (conn-sweep.sh: pod q1 to the noise Service's ClusterIP, DNAT, the vxlan
# overlay to a pod on the other node), from the kernel's own BPF statistics
# (kernel.bpf_stats_enabled: run count and run time of every program), while
# connrate makes RATE short connections a second for SECONDS. Run with a
# filter matching nothing and with none (every namespace, as conn-sweep),
# shipping every record or holding healthy connections' (--healthy count).
# Prints, per program: runs per connection, ns per run and ns per
# connection, and the total. Needs root and bpftool.
#
# Usage: scripts/bench/probe-cost.sh [RATE] [SECONDS]   (root)
set -euo pipefail
cd "$(dirname "$0")/../.."
RATE=${1:-1000}
SECS=${2:-5}
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled)
bench_cleanup() {
	reap "${WATCH:-}"
	sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS"
}
. scripts/bench/conn-path.sh

run() {
	local label=$1
	shift
	rm -f "$OUT/ready"
	"$NETTRACE" watch --netns all --timelines findings --ready-file "$OUT/ready" --log-level warn "$@" >/dev/null 2>"$OUT/err" &
	WATCH=$!
	for _ in $(seq 200); do [ -f "$OUT/ready" ] && break; sleep 0.1; done
	sysctl -qw kernel.bpf_stats_enabled=1
	bpftool prog show -j >"$OUT/before.json"
	local cpu_before=$(cpu_ticks $WATCH)
	conns=$(ip netns exec ntlab-q1 "$CONNRATE" -addr 10.96.0.99:9000 -d "${SECS}s" -workers 8 -rate "$RATE" 2>/dev/null)
	local cpu_after=$(cpu_ticks $WATCH)
	bpftool prog show -j >"$OUT/after.json"
	sysctl -qw kernel.bpf_stats_enabled=0
	kill -INT $WATCH
	wait $WATCH || true
	WATCH=
	echo "== $label: $conns connections a second for ${SECS}s"
	python3 - "$OUT/before.json" "$OUT/after.json" "$(echo "$conns * $SECS" | bc)" "$((cpu_after - cpu_before))" "$(getconf CLK_TCK)" <<'PY'
import json, sys
ours = ("nat_", "route_", "vxlan_", "syn_", "drop_", "dev_", "tcp_", "site_")
before = {p["id"]: p for p in json.load(open(sys.argv[1]))}
conns = float(sys.argv[3])
rows, total = [], 0.0
for p in json.load(open(sys.argv[2])):
    n = p.get("name", "")
    if not n.startswith(ours):
        continue
    b = before.get(p["id"], {})
    runs = p.get("run_cnt", 0) - b.get("run_cnt", 0)
    ns = p.get("run_time_ns", 0) - b.get("run_time_ns", 0)
    if runs:
        rows.append((n, runs / conns, ns / runs, ns / conns))
        total += ns / conns
merged = {}
for n, r, per, c in rows:  # a program is loaded once per namespace it links in (netfilter)
    m = merged.setdefault(n, [0.0, 0.0])
    m[0] += r
    m[1] += c
print(f"| program | runs/conn | ns/run | ns/conn |")
print(f"|---|---|---|---|")
for n, (r, c) in sorted(merged.items(), key=lambda kv: -kv[1][1]):
    print(f"| {n} | {r:.1f} | {c / r:.0f} | {c:.0f} |")
print(f"| **total in the kernel** | | | **{total / 1000:.1f} µs** |")
print(f"| nettrace's own process (user and system time) | | | {int(sys.argv[4]) / int(sys.argv[5]) * 1e6 / conns:.1f} µs |")
PY
}

# cpu_ticks is a process's user and system time so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run "no filter"
run "no filter, --healthy count" --healthy count
run "a filter matching nothing" 'host 192.0.2.1'
