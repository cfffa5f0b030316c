package output

import (
	"fmt"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// dropView shows the drop point: a freed packet, with the kernel's reason and where.
type dropView struct{}

// JSONDrop is a drop event's payload.
type JSONDrop struct {
	Reason   string `json:"reason"`
	Location string `json:"location"`
	// The namespace's conntrack table, read after a netfilter drop of a
	// packet without an entry (event.Drop).
	ConntrackCount uint32 `json:"conntrack_count,omitempty"`
	ConntrackMax   uint32 `json:"conntrack_max,omitempty"`
	ConntrackDrops uint64 `json:"conntrack_drops,omitempty"`
	// The device the packet was routed to and its MTU; for a packet too
	// big to forward, the MTUs of the device under it and of the sender's
	// device, read after the drop (event.Drop).
	RouteIfindex uint32 `json:"route_ifindex,omitempty"`
	RouteMTU     uint16 `json:"route_mtu,omitempty"`
	UnderlayMTU  uint16 `json:"underlay_mtu,omitempty"`
	SenderMTU    uint16 `json:"sender_mtu,omitempty"`
}

func (dropView) step(n Names, _ *flow.Flow, e *event.Event) string {
	s := "DROPPED " + n.dropReason(e.Drop.Reason) + " at " + n.symbol(e.Drop.Location)
	if e.Drop.CTRead() {
		s += " " + conntrackTable(&e.Drop)
	}
	if tooBig(n, e) {
		s += " " + mtus(&e.Drop)
	}
	return s
}

func (dropView) detail(n Names, e *event.Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple), "dropped: "+n.dropReason(e.Drop.Reason), "at "+n.symbol(e.Drop.Location))
	if e.Drop.CTRead() {
		detail = append(detail, conntrackTable(&e.Drop))
	}
	if tooBig(n, e) {
		detail = append(detail, mtus(&e.Drop))
	}
	return detail
}

// tooBig says whether a drop was of a packet too big for its route, whose
// MTUs tell why.
func tooBig(n Names, e *event.Event) bool {
	return n.dropReason(e.Drop.Reason) == "PKT_TOO_BIG" && e.Drop.DstMTU != 0
}

// mtus tells the MTUs around a packet too big for its route.
func mtus(d *event.Drop) string {
	s := fmt.Sprintf("(route's device MTU %d", d.DstMTU)
	if d.LowerMTU != 0 {
		s += fmt.Sprintf(", under it %d", d.LowerMTU)
	}
	if d.SrcMTU != 0 {
		s += fmt.Sprintf(", the sender's %d", d.SrcMTU)
	}
	return s + ")"
}

// conntrackTable tells a drop's reading of its conntrack table.
func conntrackTable(d *event.Drop) string {
	return fmt.Sprintf("(conntrack table %d/%d, drops +%d)", d.CTCount, d.CTMax, d.CTDrops)
}

func (dropView) jsonKey() string { return "drop" }

func (dropView) appendJSON(b []byte, n Names, e *event.Event) []byte {
	var p jsonObject
	b = p.str(b, "reason", n.dropReason(e.Drop.Reason))
	b = p.str(b, "location", n.symbol(e.Drop.Location))
	b = p.uintOmit(b, "conntrack_count", uint64(e.Drop.CTCount))
	b = p.uintOmit(b, "conntrack_max", uint64(e.Drop.CTMax))
	b = p.uintOmit(b, "conntrack_drops", e.Drop.CTDrops)
	b = p.uintOmit(b, "route_ifindex", uint64(e.Drop.DstIfindex))
	b = p.uintOmit(b, "route_mtu", uint64(e.Drop.DstMTU))
	b = p.uintOmit(b, "underlay_mtu", uint64(e.Drop.LowerMTU))
	b = p.uintOmit(b, "sender_mtu", uint64(e.Drop.SrcMTU))
	return p.close(b)
}

func (dropView) pcapng(n Names, e *event.Event, c []string) []string {
	c = append(c, "drop_reason: "+n.dropReason(e.Drop.Reason), "drop_location: "+n.symbol(e.Drop.Location))
	if e.Drop.CTRead() {
		c = append(c, "conntrack_table: "+conntrackTable(&e.Drop))
	}
	if tooBig(n, e) {
		c = append(c, "mtus: "+mtus(&e.Drop))
	}
	return c
}

func (dropView) appendJSONFields(b []byte, _ *jsonObject, _ *event.Event) []byte { return b }
