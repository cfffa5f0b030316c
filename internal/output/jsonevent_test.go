package output

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// AppendEvent writes what encoding/json writes of the JSONEvent built
// field by field from the schema (convertEvent), for the events of every
// incident and for names that need escaping.
func TestAppendEventIsTheSchema(t *testing.T) {
	names := Names{DropReason: fixture.Context{}.ReasonName, Symbol: fixture.Context{}.SymbolName, Netns: fixture.Context{}.NetnsName}
	var events []event.Event
	for _, healthy := range []bool{false, true} {
		events = append(events, fixture.SNATMissing(healthy)...)
		events = append(events, fixture.SYNOverflow(healthy)...)
		events = append(events, fixture.StaleHostPort(healthy)...)
		events = append(events, fixture.Hairpin(healthy)...)
	}
	events = append(events, fixture.NoListener()...)
	events = append(events, fixture.NetfilterDrop()...)
	events = append(events, fixture.ConntrackClash()...)
	events = append(events, fixture.NoReplyDroppedBySocket()...)
	events = append(events, fixture.NoReply()...)
	odd := events[0]
	odd.Netns = 0xbeef
	copy(odd.Ifname[:], "<a&b>\"\\\x01\t\xff")
	odd.Tuple.Src, odd.Tuple.Dst = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	odd.Skb, odd.SkbSeen, odd.Flags = 0xffff888012345678, 99, odd.Flags|event.FlagGroup
	events = append(events, odd)
	oddNames := names
	oddNames.Netns = func(uint32) string { return "pod \u2028 \u2029 é <x>" }
	for i := range events {
		e := &events[i]
		for _, n := range []Names{names, oddNames} {
			want, err := json.Marshal(n.convertEvent(e))
			if err != nil {
				t.Fatal(err)
			}
			if got := n.AppendEvent(nil, e); string(got) != string(want) {
				t.Errorf("event %d (%s %s):\n got %s\nwant %s", i, e.Point, e.Kind, got, want)
			}
		}
	}
}

// convertEvent builds the JSONEvent of an event field by field: the
// schema AppendEvent must write.
func (n Names) convertEvent(e *event.Event) *JSONEvent {
	j := &JSONEvent{
		Type: "event", Time: n.wall(e.Time), MonoNS: e.Time, Point: e.Point.String(), Kind: e.Kind.String(),
		Hook: e.Hook.String(), Netns: n.netns(e.Netns), NetnsInode: e.Netns, Dev: e.Ifname.String(),
		Ifindex: e.Ifindex, CPU: e.CPU, Tuple: NewJSONTuple(e.Tuple), SkbSeen: e.SkbSeen, Group: e.ToGroup(),
	}
	if e.Skb != 0 {
		j.Skb = fmt.Sprintf("%#x", e.Skb)
	}
	if e.HasInner() {
		j.Inner = NewJSONTuple(e.Inner)
	}
	if e.HasCT() {
		dir := "original"
		if e.CT.IsReply() {
			dir = "reply"
		}
		j.CT = &JSONConntrack{ID: fmt.Sprintf("%#x", e.CT.ID), Status: e.CT.Status.Names(), Mark: e.CT.Mark,
			Zone: e.CT.Zone, Direction: dir, Orig: NewJSONTuple(e.CT.Orig), Reply: NewJSONTuple(e.CT.Reply)}
	}
	switch e.Point {
	case event.PointNAT:
		if e.Flags&event.FlagPre != 0 {
			j.Pre = NewJSONTuple(e.NAT.Pre)
			j.Translated = e.NAT.Pre.WithoutFlags() != e.Tuple.WithoutFlags()
			j.Translations = e.Translation().Names()
		}
		j.OutDev = e.NAT.OutIfname.String()
	case event.PointRoute:
		j.Route = &event.JSONRoute{Dev: e.Route.OifName.String(), Ifindex: e.Route.Oif, Err: e.Route.Err, Table: e.Route.Table}
		if g := e.Route.Gateway; g.IsValid() && !g.IsUnspecified() {
			j.Route.Gateway = g.String()
		}
		if s := e.Route.Src; s.IsValid() && !s.IsUnspecified() {
			j.Route.Src = s.String()
		}
	case event.PointVXLAN:
		j.VXLAN = &event.JSONVXLAN{VNI: e.VXLAN.VNI, Remote: e.VXLAN.Remote.String(), Local: e.VXLAN.Local.String(), Port: e.VXLAN.Port}
	case event.PointSYN:
		j.SYN = &event.JSONSYN{Listener: e.SYN.Listener.String(), Outcome: e.SYN.Outcome.String(), Dropped: e.SYN.Outcome.Dropped(),
			AcceptQueue: e.SYN.AcceptQueue, AcceptMax: e.SYN.AcceptMax, SYNQueue: e.SYN.SYNQueue,
			ListenDrops: e.SYN.ListenDrops, ListenOverflows: e.SYN.ListenOverfl}
	case event.PointDrop:
		j.Drop = &event.JSONDrop{Reason: n.ReasonName(e.Drop.Reason), Location: n.SymbolName(e.Drop.Location)}
	case event.PointTCP:
		j.TCP = &event.JSONTCP{Cookie: e.TCP.Cookie}
		if e.Kind == event.KindTCPState {
			j.TCP.OldState, j.TCP.NewState = event.TCPStateName(e.TCP.OldState), event.TCPStateName(e.TCP.NewState)
		}
	}
	return j
}
