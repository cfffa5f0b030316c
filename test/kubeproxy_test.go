package test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// TestServiceWithoutEndpointsRejected: kube-proxy's nftables mode rejects
// a new connection to a Service without endpoints, in its filter chains,
// through the no-endpoint-services verdict map whose element names the
// Service in a comment. nettrace names the element, its reject and the
// Service. The twin is the Service with an endpoint: DNATed, connected,
// no finding.
func TestServiceWithoutEndpointsRejected(t *testing.T) {
	for _, endpoints := range [][]string{nil, {"10.98.5.2:8080"}} {
		t.Run(map[bool]string{true: "no-endpoints", false: "healthy"}[endpoints == nil], func(t *testing.T) {
			node, pod := newNetns(t, "node"), newNetns(t, "pod")
			veth(t, node, "n0", "10.98.5.1/24", pod, "p0", "10.98.5.2/24")
			listen(t, pod, "10.98.5.2:8080", 0, true)
			// The ClusterIP is routed as a node routes it: toward the pods.
			script(t, "ip -n "+node+" route add 10.96.0.0/16 via 10.98.5.2")
			nft := exec.Command("ip", "netns", "exec", node, "nft", "-f", "-")
			nft.Stdin = strings.NewReader(lab.KubeProxyNftables("web", "10.96.0.50", "80", endpoints...))
			if out, err := nft.CombinedOutput(); err != nil {
				t.Fatalf("nft -f: %v\n%s", err, out)
			}
			w := startWatch(t, "--netns", node, "--netns", pod, "port 80 or port 8080")
			err := dial(t, node, "", "10.96.0.50:80", 3*time.Second)
			tr := w.stop(t)
			x, ok := twinFinding(t, tr, err, endpoints == nil, "dropped-by-netfilter")
			if !ok {
				return
			}
			t.Log(x.Summary)
			namedService(t, x, output.JSONService{Namespace: "default", Name: "web", Port: "80"})
			i := slices.IndexFunc(x.NetfilterRules, func(r output.JSONNetfilterRule) bool { return r.Role == "decided" })
			if i < 0 {
				t.Fatalf("no rule named: %+v", x.NetfilterRules)
			}
			r := x.NetfilterRules[i]
			if r.Table != "kube-proxy" || r.Chain != "reject-chain" || r.Verdict != "REJECT" ||
				!slices.ContainsFunc(r.Via, func(v string) bool {
					return strings.Contains(v, `10.96.0.50 . tcp . 80 comment "default/web:80" : goto reject-chain`)
				}) {
				t.Errorf("rule named %+v, want reject-chain's reject reached by the no-endpoint-services element", r)
			}
		})
	}
}
