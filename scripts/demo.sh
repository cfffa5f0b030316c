#!/usr/bin/env bash
# A minute with nettrace: a client namespace calls a "ClusterIP" that nat
# OUTPUT DNATs to a server namespace, and a port that the server's firewall
# drops. nettrace watch shows the translation, the conntrack entry, the
# packet crossing namespaces, and the drop with its reason.
# Everything it creates is removed on exit, also on failure or Ctrl-C.
set -euo pipefail
BIN=${1:-bin/nettrace}
C=nt-demo-client S=nt-demo-server
OUT=$(mktemp -d)

cleanup() {
	[ -n "${WATCH:-}" ] && kill "$WATCH" 2>/dev/null && wait "$WATCH" 2>/dev/null
	[ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null
	ip netns del $C 2>/dev/null || true
	ip netns del $S 2>/dev/null || true
	rm -rf "$OUT"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || { echo "demo: needs root (namespaces and BPF)" >&2; exit 1; }
ip netns add $C
ip netns add $S
ip link add veth-c netns $C type veth peer name veth-s netns $S
ip -n $C addr add 10.123.0.1/24 dev veth-c
ip -n $S addr add 10.123.0.2/24 dev veth-s
for ns in $C $S; do ip -n $ns link set lo up; done
ip -n $C link set veth-c up
ip -n $S link set veth-s up
ip -n $C route add 10.96.0.0/12 dev veth-c
ip netns exec $C iptables -t nat -A OUTPUT -d 10.96.0.10 -p tcp --dport 80 -j DNAT --to-destination 10.123.0.2:8080
ip netns exec $S iptables -A INPUT -p tcp --dport 9090 -j DROP

ip netns exec $S nc -lk 10.123.0.2 8080 </dev/null >/dev/null 2>&1 &
SERVER=$!

echo "== nettrace watch 'host 10.96.0.10 or port 9090' (namespaces $C, $S)"
"$BIN" watch --netns $C --netns $S --ready-file "$OUT/ready" --duration 20s 'host 10.96.0.10 or port 9090' &
WATCH=$!
for _ in $(seq 100); do [ -f "$OUT/ready" ] && break; sleep 0.1; done
[ -f "$OUT/ready" ] || { echo "demo: nettrace did not attach" >&2; exit 1; }

echo "== client: connect to the ClusterIP 10.96.0.10:80 (DNATed to 10.123.0.2:8080)"
ip netns exec $C bash -c 'exec 3<>/dev/tcp/10.96.0.10/80 && echo "   connected" && exec 3>&-' || echo "   failed"
echo "== client: connect to 10.123.0.2:9090 (dropped by the server's INPUT chain)"
ip netns exec $C timeout 2 bash -c 'exec 3<>/dev/tcp/10.123.0.2/9090' 2>/dev/null && echo "   connected" || echo "   timed out"
sleep 0.5
kill -INT "$WATCH"
wait "$WATCH" || true
WATCH=
