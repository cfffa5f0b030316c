package explain

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
)

// An address is named after its pod, else its node; a pod's name wins
// where both are known (a node's address never is a pod's, but a source
// may be stale).
func TestAddressesNamedByPodThenNode(t *testing.T) {
	flows := flowsOf(t, fixture.SNATMissing(false))
	nodes := map[netip.Addr]string{
		netip.MustParseAddr("172.20.0.1"):  "node-1",
		netip.MustParseAddr("10.244.2.10"): "not-a-node",
	}
	fd := Explain(flows[0], fixture.Context{Nodes: nodes})
	if fd == nil {
		t.Fatal("no finding")
	}
	for _, want := range []string{"172.20.0.1:", " (node node-1) -> ", "10.244.2.10:8080 (pod default/web-2)"} {
		if !strings.Contains(fd.Summary, want) {
			t.Errorf("summary lacks %q: %s", want, fd.Summary)
		}
	}
	if len(fd.Pods) != 1 || fd.Pods[0].Name != "default/web-2" {
		t.Errorf("pods %+v, want default/web-2 alone", fd.Pods)
	}
}
