#!/usr/bin/env bash
# The README's main command: incident 1 of the lab (a node calls a
# ClusterIP whose pod is on the other node; a stale flannel RETURN skips the
# MASQUERADE; the reply is dropped by rp_filter), with nettrace watch
# showing the DNAT, the missing SNAT, the vxlan hop and the rp_filter drop.
# The lab is torn down on exit, also on failure or Ctrl-C.
#
# Usage: scripts/demo.sh NETTRACE NTLAB [SCENARIO [FILTER]]
# (snat-missing-v6 with 'host fd00:10:96::10' is its IPv6 form).
set -euo pipefail
NETTRACE=${1:-bin/nettrace}
NTLAB=${2:-bin/ntlab}
SCENARIO=${3:-snat-missing}
FILTER=${4:-host 10.96.0.10}
OUT=$(mktemp -d)

cleanup() {
	if [ -n "${WATCH:-}" ]; then kill "$WATCH" 2>/dev/null || true; wait "$WATCH" 2>/dev/null || true; fi
	"$NTLAB" down
	rm -rf "$OUT"
}
trap cleanup EXIT
[ "$(id -u)" = 0 ] || { echo "demo: needs root (namespaces and BPF)" >&2; exit 1; }

"$NTLAB" up "$SCENARIO"
NS=()
for ns in $(ip netns list | awk '/^ntlab-/ {print $1}'); do NS+=(--netns "$ns"); done

# The lab's pods are set up through libcni, whose cache (kept apart from
# the host's /var/lib/cni) names them after their Kubernetes pods.
CNI_CACHE=/run/nettrace-lab/cni/results

echo "== nettrace watch --rules --cni-cache $CNI_CACHE '$FILTER' (lab namespaces)"
"$NETTRACE" watch --rules --cni-cache "$CNI_CACHE" "${NS[@]}" --ready-file "$OUT/ready" --duration 60s "$FILTER" &
WATCH=$!
for _ in $(seq 200); do [ -f "$OUT/ready" ] && break; sleep 0.1; done
[ -f "$OUT/ready" ] || { echo "demo: nettrace did not attach" >&2; exit 1; }

echo "== client traffic"
"$NTLAB" traffic "$SCENARIO" | sed 's/^/   client: /'
sleep 0.5
kill -INT "$WATCH"
wait "$WATCH" || true
WATCH=
