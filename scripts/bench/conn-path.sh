# Sourced by the benchmarks on the connection sweep's path (conn-sweep.sh,
# probe-cost.sh): the lab with incident 1's fault and the server of the
# noise Service's endpoint (p2, 10.244.2.10:9002) up, connrate built.
# Sets NETTRACE, NTLAB, OUT (a directory of its own) and CONNRATE. At exit
# it runs the script's bench_cleanup, if defined, then stops the server,
# takes the lab down and removes OUT.
NETTRACE=${NETTRACE:-bin/nettrace} NTLAB=bin/ntlab
scripts/deps.sh bench
OUT=$(mktemp -d)
CONNRATE=$OUT/connrate
go build -o "$CONNRATE" ./scripts/bench/connrate

# reap stops background process $1 (none when empty) and waits for it. One
# that already ended (a tracer that failed to start) is no error: cleanup
# runs under set -e and must go on to take the lab down.
reap() {
	[ -n "${1:-}" ] || return 0
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

conn_path_cleanup() {
	if declare -F bench_cleanup >/dev/null; then bench_cleanup; fi
	reap "${SERVER:-}"
	"$NTLAB" down
	rm -rf "$OUT"
}
trap conn_path_cleanup EXIT

"$NTLAB" up snat-missing >/dev/null
ip netns exec ntlab-p2 "$NTLAB" serve -addr 10.244.2.10:9002 -name p2 -ready-file "$OUT/served" &
SERVER=$!
for _ in $(seq 100); do [ -f "$OUT/served" ] && break; sleep 0.1; done
