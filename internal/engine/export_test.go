package engine

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// events is an EventSource over a slice.
type events []event.Event

func (s *events) Next(e *event.Event) error {
	if len(*s) == 0 {
		return io.EOF
	}
	*e, *s = (*s)[0], (*s)[1:]
	return nil
}

// Every event with packet bytes is a packet on its namespace's device,
// commented with the event's facts, its point's (the points' views) and
// the NAT rules its flow's report names.
func TestExportPcapngComments(t *testing.T) {
	evs := events(fixture.SNATMissing(false))
	ipHeader := []byte{0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	for i := range evs {
		evs[i].Packet = ipHeader
	}
	want := len(evs)
	rs, err := fixture.Ruleset("snat-missing-n1")
	if err != nil {
		t.Fatal(err)
	}
	names := output.Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName, Netns: fixture.Context{}.NetnsName}
	sources := explain.Sources{Names: names, Rulesets: func(netns uint32, _ uint64) *ruleset.Ruleset {
		if netns == fixture.Netns("n1") {
			return rs
		}
		return nil
	}}
	again, order := slices.Clone(evs), slices.Clone(evs)
	notes, err := StepNotes(&again, sources)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n, err := output.ExportPcapng(&evs, names, notes, &out)
	if err != nil || n != want {
		t.Fatalf("exported %d packets (%v), want %d", n, err, want)
	}
	r, err := pcapgo.NewNgReader(&out, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	ids := map[uint64]map[uint64]bool{} // skb -> the packet ids its events had
	for i := 0; ; i++ {
		_, ci, opts, err := r.ReadPacketDataWithOptions()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if opts.PacketID == nil {
			t.Fatalf("packet %d has no packet id", i)
		}
		if ids[order[i].Skb] == nil {
			ids[order[i].Skb] = map[uint64]bool{}
		}
		ids[order[i].Skb][*opts.PacketID] = true
		if ci.Length != 60 || !strings.HasPrefix(opts.Comments[0], "point: ") {
			t.Errorf("packet of length %d commented %q", ci.Length, opts.Comments)
		}
		for _, c := range opts.Comments {
			count[c]++
		}
		if slices.Contains(opts.Comments, "drop_reason: IP_RPFILTER") {
			if iface, _ := r.Interface(ci.InterfaceIndex); iface.Name != "n1/eth0" {
				t.Errorf("the drop on interface %q, want n1/eth0", iface.Name)
			}
		}
	}
	// The fixture's packets are each at an skb of their own, which no
	// other packet recycles: one id each, and no two alike.
	taken := map[uint64]bool{}
	for skb, got := range ids {
		for id := range got {
			if len(got) != 1 || taken[id] {
				t.Errorf("skb %#x exported with packet ids %v (all: %v), want one of its own", skb, got, ids)
			}
			taken[id] = true
		}
	}
	for _, c := range []string{"drop_reason: IP_RPFILTER", "vni: 1", "translation: dnat", "point: drop", "nat_before: tcp 172.20.0.1:40000 -> 10.96.0.10:80",
		// The rules the flow's report names, as replay does: the DNAT's,
		// the stale RETURN and the MASQUERADE it kept the SYN from.
		`netfilter_rule: nat KUBE-SEP-SLU7GZY5SPD3QPRN rule 2: -A KUBE-SEP-SLU7GZY5SPD3QPRN -p tcp -m comment --comment "default/web" -m tcp -j DNAT --to-destination 10.244.2.10:8080`,
		`netfilter_rule: nat POSTROUTING rule 4: -A POSTROUTING ! -s 10.244.0.0/16 -d 10.244.2.0/24 -m comment --comment "flanneld masq" -j RETURN`,
		`netfilter_rule_not_reached: nat POSTROUTING rule 6: -A POSTROUTING ! -s 10.244.0.0/16 -d 10.244.0.0/16 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully`} {
		if count[c] != 1 {
			t.Errorf("%d packets commented %q, want 1 (all: %v)", count[c], c, count)
		}
	}
}
