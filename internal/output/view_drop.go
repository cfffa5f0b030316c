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
}

func (dropView) step(n Names, _ *flow.Flow, e *event.Event) string {
	s := "DROPPED " + n.dropReason(e.Drop.Reason) + " at " + n.symbol(e.Drop.Location)
	if e.Drop.CTRead() {
		s += " " + conntrackTable(&e.Drop)
	}
	return s
}

func (dropView) detail(n Names, e *event.Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple), "dropped: "+n.dropReason(e.Drop.Reason), "at "+n.symbol(e.Drop.Location))
	if e.Drop.CTRead() {
		detail = append(detail, conntrackTable(&e.Drop))
	}
	return detail
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
	return p.close(b)
}

func (dropView) pcapng(n Names, e *event.Event, c []string) []string {
	c = append(c, "drop_reason: "+n.dropReason(e.Drop.Reason), "drop_location: "+n.symbol(e.Drop.Location))
	if e.Drop.CTRead() {
		c = append(c, "conntrack_table: "+conntrackTable(&e.Drop))
	}
	return c
}

func (dropView) appendJSONFields(b []byte, _ *jsonObject, _ *event.Event) []byte { return b }
