#!/usr/bin/env bash
# Is nettrace right, and what does it cost, at any connection rate? The
# incident lab with incident 1's fault (a stale RETURN: no SNAT on the
# tunnel), and a stream of short TCP connections from pod q1 to the noise
# Service's ClusterIP (10.96.0.99:9000), whose endpoint is a pod on the
# other node: PREROUTING DNAT, the vxlan overlay, reset close so that
# client ports are reused. At each rate (connections a second, "full" as
# fast as 8 clients go) and in each mode, with no filter on every namespace:
#   none      no tracer
#   tcpdump   tcpdump -i any -w in node 1 (every packet of the path)
#   floor     empty programs wherever nettrace attaches (scripts/bench/floor):
#             what the attach layout alone costs, the most any filter can keep
#   nomatch   nettrace watch -o json, a filter matching nothing
#   text      nettrace watch (text)
#   json      nettrace watch -o json
#   json-all  nettrace watch -o json --events --timelines all (everything)
#   record    nettrace record -w FILE
#   flight    nettrace record --flight DIR --keep 50 (the DaemonSet's recorder)
#   flight-count  the same with --healthy count (the kernel holds healthy
#             connections' records and ships only the failing ones')
#   count     nettrace watch --healthy count (text)
# and, with BASELINE=path/to/an/older/nettrace, base-MODE for each nettrace
# mode in MODES, run by that build in the same rounds.
# Incident 1's client connects once in every round: its fault must be named
# once, and nothing else. Modes are interleaved within each rate, round by
# round, each round starting one mode later, and each mode starts on
# drained conntrack tables (settle): a mode run right after a fast one,
# among its connections' entries on the ports it reuses, was the slower
# (docs/performance.md, 2026-11-29). Prints a
# markdown table: connection rate (median of the rounds) and its ratio to
# no tracer, kernel records and events per connection (a record carries a
# packet's journey: several events), events lost and shed, flows marked
# incomplete, the fault's findings, false findings; nettrace's own CPU
# (user and system, from /proc) per connection; with --healthy count the
# connections the kernel kept and the ones it shipped on trouble; with
# BPF_STATS=1 the kernel's BPF time per connection (kernel.bpf_stats_enabled
# during the traffic: every mode then pays the statistics' cost, the floor
# and tcpdump's included).
#
# Usage: scripts/bench/conn-sweep.sh [ROUNDS] [SECONDS] [RATES...]   (root)
#   defaults: 1 round, 5 s, rates 100 500 1000 2000 full
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-1}
SECS=${2:-5}
shift $(($# < 2 ? $# : 2))
RATES=("$@")
[ ${#RATES[@]} -gt 0 ] || RATES=(100 500 1000 2000 full)
MODES=(${MODES:-none tcpdump floor nomatch text json json-all record})
if [ -n "${BASELINE:-}" ]; then
	for m in "${MODES[@]}"; do
		case $m in none | tcpdump | floor) ;; *) MODES+=("base-$m") ;; esac
	done
fi
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled)
bench_cleanup() {
	reap "${TRACER:-}"
	sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS"
}
. scripts/bench/conn-path.sh
FLOOR=$OUT/floor
go build -o "$FLOOR" ./scripts/bench/floor

start_tracer() {
	rm -f "$OUT/ready" "$OUT/stdout" "$OUT/stderr"
	local args=(--netns all --log-level warn --ready-file "$OUT/ready")
	local NETTRACE=$NETTRACE
	[ "${1#base-}" != "$1" ] && NETTRACE=$BASELINE
	case ${1#base-} in
	none) TRACER= ; return ;;
	tcpdump)
		ip netns exec ntlab-n1 tcpdump -i any -w "$OUT/t.pcap" -s 262144 2>/dev/null &
		TRACER=$!
		sleep 1
		return ;;
	floor) "$FLOOR" --netns all --ready-file "$OUT/ready" 2>"$OUT/stderr" & ;;
	nomatch) "$NETTRACE" watch "${args[@]}" -o json 'host 192.0.2.1' >"$OUT/stdout" 2>"$OUT/stderr" & ;;
	text) "$NETTRACE" watch "${args[@]}" >"$OUT/stdout" 2>"$OUT/stderr" & ;;
	json) "$NETTRACE" watch "${args[@]}" -o json >"$OUT/stdout" 2>"$OUT/stderr" & ;;
	json-all) "$NETTRACE" watch "${args[@]}" -o json --events --timelines all >"$OUT/stdout" 2>"$OUT/stderr" & ;;
	record) "$NETTRACE" record "${args[@]}" -w "$OUT/r.ntrace" >"$OUT/stdout" 2>"$OUT/stderr" & ;;
	flight) "$NETTRACE" record "${args[@]}" --flight "$OUT/flight" --keep 50 >"$OUT/stdout" 2>"$OUT/stderr" & ;;
	flight-count) "$NETTRACE" record "${args[@]}" --flight "$OUT/flight" --keep 50 --healthy count >"$OUT/stdout" 2>"$OUT/stderr" & ;;
	count) "$NETTRACE" watch "${args[@]}" --healthy count >"$OUT/stdout" 2>"$OUT/stderr" & ;;
	esac
	TRACER=$!
	for _ in $(seq 200); do [ -f "$OUT/ready" ] && return; sleep 0.1; done
	echo "tracer did not start: $(cat "$OUT/stderr")" >&2
	exit 1
}

# tracer_cpu prints the seconds of CPU (user and system) the tracer has
# used, 0 without one.
tracer_cpu() {
	[ -n "${TRACER:-}" ] && [ -r "/proc/$TRACER/stat" ] || { echo 0; return; }
	awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$TRACER/stat"
}

# bpf_ns prints the run time of every BPF program so far (ns), with
# BPF_STATS=1; 0 otherwise.
bpf_ns() {
	[ "${BPF_STATS:-0}" = 1 ] || { echo 0; return; }
	bpftool prog show -j | python3 -c 'import json,sys; print(sum(p.get("run_time_ns", 0) for p in json.load(sys.stdin)))'
}

stop_tracer() {
	if [ -n "${TRACER:-}" ]; then
		kill -INT "$TRACER" 2>/dev/null || true
		wait "$TRACER" 2>/dev/null || true
		TRACER=
	fi
	rm -rf "$OUT/t.pcap" "$OUT/r.ntrace" "$OUT/flight"
}

# settle waits until the connections of the mode before have left the
# nodes' conntrack tables: five seconds at full speed leave about 52,000
# entries in each, which stay about 35 s (a reset connection's 10 s, then
# the garbage collector's pass).
settle() {
	local n
	for _ in $(seq 300); do
		n=0
		for ns in ntlab-n1 ntlab-n2; do
			n=$((n + $(ip netns exec "$ns" cat /proc/sys/net/netfilter/nf_conntrack_count)))
		done
		[ "$n" -lt 200 ] && return
		sleep 0.2
	done
	echo "conntrack tables did not drain: $n entries" >&2
}

for rate in "${RATES[@]}"; do
	for r in $(seq "$ROUNDS"); do
		for i in "${!MODES[@]}"; do
			m=${MODES[$(((i + r - 1) % ${#MODES[@]}))]}
			settle
			start_tracer "$m"
			"$NTLAB" traffic snat-missing >/dev/null &
			fault=$!
			pace=$rate
			[ "$rate" = full ] && pace=0
			cpu0=$(tracer_cpu)
			[ "${BPF_STATS:-0}" = 1 ] && sysctl -qw kernel.bpf_stats_enabled=1
			ns0=$(bpf_ns)
			cps=$(ip netns exec ntlab-q1 "$CONNRATE" -addr 10.96.0.99:9000 -d "${SECS}s" -workers 8 -rate "$pace" 2>"$OUT/failed")
			ns1=$(bpf_ns)
			[ "${BPF_STATS:-0}" = 1 ] && sysctl -qw kernel.bpf_stats_enabled=0
			cpu1=$(tracer_cpu)
			wait "$fault"
			stop_tracer
			failed=$(grep -o '[0-9]* connections failed' "$OUT/failed" | cut -d' ' -f1 || true)
			python3 scripts/bench/sweep-round.py "$m" "$rate" "$cps" "${failed:-0}" "$SECS" "$OUT/stdout" "$OUT/stderr" \
				"$(python3 -c "print($cpu1 - $cpu0)")" "$((ns1 - ns0))" >>"$OUT/results"
			tail -1 "$OUT/results" >&2
		done
	done
done
python3 scripts/bench/sweep-round.py --table "$OUT/results"
