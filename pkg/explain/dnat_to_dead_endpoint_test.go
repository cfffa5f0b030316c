package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
)

func TestDNATToDeadEndpoint(t *testing.T) {
	onlySYNs := fixture.StaleHostPort(false)
	var noNeigh = onlySYNs[:0:0]
	for _, e := range onlySYNs {
		if e.Point != 5 { // drop
			noNeigh = append(noNeigh, e)
		}
	}
	runRule(t, dnatToDeadEndpoint, []ruleCase{
		{"neighbour failed", fixture.StaleHostPort(false), true, []string{"SYN to 172.20.0.1:8443 was DNATed to 10.244.1.36:443 in n1 PREROUTING",
			"never answered", "neighbour resolution failed", "NEIGH_FAILED, 2 packets"}},
		{"nothing came back", noNeigh, true, []string{"nothing came back after 2 SYNs"}},
		{"live endpoint answered", fixture.StaleHostPort(true), false, nil},
		{"endpoint answered, reply lost later", fixture.SNATMissing(false), false, nil},
	})
}
