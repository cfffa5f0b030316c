package probe

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// pkg/event keeps its own constants for the values of nettrace.h's enums:
// it decodes recordings where no BPF object is loaded. This holds them to
// the enums as the compiled object has them, both ways: a value the
// programs may send that Go cannot name, or a Go constant the programs do
// not know, fails.
func TestEnumsMatchBPF(t *testing.T) {
	spec, err := loadNat()
	if err != nil {
		t.Fatal(err)
	}
	values := func(name string) map[uint8]string {
		var enum *btf.Enum
		if err := spec.Types.TypeByName(name, &enum); err != nil {
			t.Fatalf("enum %s: %v", name, err)
		}
		byValue := make(map[uint8]string, len(enum.Values))
		for _, v := range enum.Values {
			if v.Value > 0xff {
				t.Fatalf("enum %s: %s = %d does not fit the record's byte", name, v.Name, v.Value)
			}
			byValue[uint8(v.Value)] = v.Name
		}
		return byValue
	}

	points := values("nt_point")
	pointMax := uint8(0)
	for v, name := range points {
		if name == "NT_POINT_MAX" {
			pointMax = v
			delete(points, v)
		}
	}
	// event.h counts events per point at point & (NT_POINT_MAX - 1).
	if pointMax == 0 || pointMax&(pointMax-1) != 0 {
		t.Errorf("NT_POINT_MAX = %d: want a power of two", pointMax)
	}
	for v, name := range points {
		want := strings.ToLower(strings.TrimPrefix(name, "NT_POINT_"))
		if got := event.Point(v).String(); got != want {
			t.Errorf("%s = %d: pkg/event names point %d %q, want %q", name, v, v, got, want)
		}
		if v >= pointMax {
			t.Errorf("%s = %d: not below NT_POINT_MAX (%d)", name, v, pointMax)
		}
	}
	if len(event.Points) != len(points) {
		t.Errorf("pkg/event has %d points %v, enum nt_point %d %v", len(event.Points), event.Points, len(points), points)
	}

	sameValues(t, "nt_kind", values("nt_kind"), func(v uint8) string { return event.Kind(v).String() }, "kind")
	sameValues(t, "nt_syn_outcome", values("nt_syn_outcome"), func(v uint8) string { return event.SYNOutcome(v).String() }, "outcome")
}

// sameValues checks that the values pkg/event names (goName differs from
// its fallback "<word>(<value>)") are exactly the BPF enum's.
func sameValues(t *testing.T, enum string, bpf map[uint8]string, goName func(uint8) string, word string) {
	t.Helper()
	for v := 0; v <= 0xff; v++ {
		name := goName(uint8(v))
		named := name != fmt.Sprintf("%s(%d)", word, v)
		bpfName, inBPF := bpf[uint8(v)]
		switch {
		case inBPF && !named:
			t.Errorf("enum %s: %s = %d has no name in pkg/event", enum, bpfName, v)
		case named && !inBPF:
			t.Errorf("enum %s: pkg/event's %q (%d) is not in it", enum, name, v)
		}
	}
}

// The gate's counters are read by number (gate.go).
func TestGateStatsMatchBPF(t *testing.T) {
	spec, err := loadJourneyGate()
	if err != nil {
		t.Fatal(err)
	}
	var enum *btf.Enum
	if err := spec.Types.TypeByName("nt_gate_stat", &enum); err != nil {
		t.Fatalf("enum nt_gate_stat: %v", err)
	}
	want := map[string]uint32{"NT_GATE_HELD": gateHeld, "NT_GATE_RELEASED": gateReleased, "NT_GATE_HEALTHY": gateHealthy,
		"NT_GATE_DISCARDED": gateDiscarded, "NT_GATE_TRIGGERED": gateTriggered, "NT_GATE_MISSING": gateMissing,
		"NT_GATE_ENDED_THEN_TROUBLE": gateEndedThenTrouble, "NT_GATE_STATS": gateStats}
	if len(enum.Values) != len(want) {
		t.Errorf("enum nt_gate_stat has %d values, gate.go names %d", len(enum.Values), len(want))
	}
	for _, v := range enum.Values {
		if w, ok := want[v.Name]; !ok || uint64(w) != v.Value {
			t.Errorf("%s = %d: gate.go has %d (named: %v)", v.Name, v.Value, w, ok)
		}
	}
	if n := spec.Maps["gate_stats"].MaxEntries; n != gateStats {
		t.Errorf("gate_stats has %d entries, gate.go reads %d", n, gateStats)
	}
}
