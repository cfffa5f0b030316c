package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

func TestBridgeHairpinOff(t *testing.T) {
	// elsewhere moves the fault's drop from the bridge code to IP's.
	elsewhere := func() []event.Event {
		evs := fixture.HairpinOff(false)
		evs[len(evs)-1].Drop.Location = 0
		return evs
	}
	runRule(t, bridgeHairpinOff, []ruleCase{
		{"hairpin mode off", fixture.HairpinOff(false), true, []string{
			"SYN 10.244.1.10:40000 (pod default/web-1) -> 10.96.0.41:80 was DNATed to 10.244.1.10:8080, the sender itself, in n1 PREROUTING",
			"the bridge cni0 had to send it back out the port it came in on, veth0a1b2c3d, and dropped it there (br_handle_frame_finish+0x380)",
			"`ip link set veth0a1b2c3d type bridge_slave hairpin on` in n1"}},
		{"hairpin mode on", fixture.HairpinOff(true), false, nil},
		{"freed elsewhere", elsewhere(), false, nil},
		{"DNAT to another pod", fixture.Hairpin(false), false, nil},
		{"DNAT to a dead pod", fixture.StaleHostPort(false), false, nil},
	})
}
