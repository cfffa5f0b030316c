package output

import (
	"fmt"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// JSONTuple is a tuple in JSON output.
type JSONTuple struct {
	Proto string `json:"proto"`
	Src   string `json:"src"`
	Sport uint16 `json:"sport,omitempty"`
	Dst   string `json:"dst"`
	Dport uint16 `json:"dport,omitempty"`
	Flags string `json:"flags,omitempty"`
}

// NewJSONTuple converts a tuple.
func NewJSONTuple(t event.Tuple) *JSONTuple {
	return &JSONTuple{Proto: event.ProtoName(t.Proto), Src: t.Src.String(), Sport: t.Sport,
		Dst: t.Dst.String(), Dport: t.Dport, Flags: event.TCPFlagString(t.TCPFlags)}
}

// JSONConntrack is a conntrack entry in JSON output.
type JSONConntrack struct {
	ID        string     `json:"id"`
	Status    []string   `json:"status"`
	Mark      uint32     `json:"mark"`
	Zone      uint16     `json:"zone"`
	Direction string     `json:"direction"`
	Orig      *JSONTuple `json:"orig"`
	Reply     *JSONTuple `json:"reply"`
}

// JSONEvent is the schema of {"type":"event"} objects (docs/events.md).
type JSONEvent struct {
	Type       string     `json:"type"`
	Time       time.Time  `json:"time"`
	MonoNS     uint64     `json:"mono_ns"`
	Point      string     `json:"point"`
	Kind       string     `json:"kind"`
	Hook       string     `json:"hook,omitempty"`
	Netns      string     `json:"netns,omitempty"`
	NetnsInode uint32     `json:"netns_inode,omitempty"`
	Dev        string     `json:"dev,omitempty"`
	Ifindex    uint32     `json:"ifindex,omitempty"`
	Skb        string     `json:"skb,omitempty"`
	SkbSeen    uint64     `json:"skb_seen,omitempty"`
	Group      bool       `json:"group,omitempty"`
	CPU        uint32     `json:"cpu"`
	Tuple      *JSONTuple `json:"tuple"`
	Inner      *JSONTuple `json:"inner,omitempty"`
	Pre        *JSONTuple `json:"pre,omitempty"`
	Translated bool       `json:"translated,omitempty"`
	// Translations say what a nat event did in the connection's terms
	// (event.Translation): dnat, snat, undnat, unsnat.
	Translations []string       `json:"translations,omitempty"`
	OutDev       string         `json:"out_dev,omitempty"`
	CT           *JSONConntrack `json:"ct,omitempty"`
	Route        *JSONRoute     `json:"route,omitempty"`
	VXLAN        *JSONVXLAN     `json:"vxlan,omitempty"`
	SYN          *JSONSYN       `json:"syn,omitempty"`
	Drop         *JSONDrop      `json:"drop,omitempty"`
	TCP          *JSONTCP       `json:"tcp,omitempty"`
}

// JSONRoute is a route event's payload.
type JSONRoute struct {
	Dev     string `json:"dev"`
	Ifindex uint32 `json:"ifindex"`
	Gateway string `json:"gateway,omitempty"`
	Src     string `json:"src,omitempty"`
	Err     int32  `json:"err"`
	Table   uint32 `json:"table,omitempty"`
}

// JSONVXLAN is a vxlan event's payload.
type JSONVXLAN struct {
	VNI    uint32 `json:"vni"`
	Remote string `json:"remote"`
	Local  string `json:"local"`
	Port   uint16 `json:"port,omitempty"`
}

// JSONSYN is a syn event's payload.
type JSONSYN struct {
	Listener        string `json:"listener"`
	Outcome         string `json:"outcome"`
	Dropped         bool   `json:"dropped"`
	AcceptQueue     uint32 `json:"accept_queue"`
	AcceptMax       uint32 `json:"accept_max"`
	SYNQueue        uint32 `json:"syn_queue"`
	ListenDrops     uint64 `json:"listen_drops,omitempty"`
	ListenOverflows uint64 `json:"listen_overflows,omitempty"`
}

// JSONDrop is a drop event's payload.
type JSONDrop struct {
	Reason   string `json:"reason"`
	Location string `json:"location"`
}

// JSONTCP is a tcp event's payload.
type JSONTCP struct {
	OldState string `json:"old_state,omitempty"`
	NewState string `json:"new_state,omitempty"`
	Cookie   uint64 `json:"cookie,omitempty"`
}

// Convert builds the JSON object of an event.
func (n Names) Convert(e *event.Event) *JSONEvent {
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
			j.Translated = bareTuple(e.NAT.Pre) != bareTuple(e.Tuple)
			j.Translations = e.Translation().Names()
		}
		j.OutDev = e.NAT.OutIfname.String()
	case event.PointRoute:
		j.Route = &JSONRoute{Dev: e.Route.OifName.String(), Ifindex: e.Route.Oif, Err: e.Route.Err, Table: e.Route.Table}
		if g := e.Route.Gateway; g.IsValid() && !g.IsUnspecified() {
			j.Route.Gateway = g.String()
		}
		if s := e.Route.Src; s.IsValid() && !s.IsUnspecified() {
			j.Route.Src = s.String()
		}
	case event.PointVXLAN:
		j.VXLAN = &JSONVXLAN{VNI: e.VXLAN.VNI, Remote: e.VXLAN.Remote.String(), Local: e.VXLAN.Local.String(), Port: e.VXLAN.Port}
	case event.PointSYN:
		j.SYN = &JSONSYN{Listener: e.SYN.Listener.String(), Outcome: e.SYN.Outcome.String(), Dropped: e.SYN.Outcome.Dropped(),
			AcceptQueue: e.SYN.AcceptQueue, AcceptMax: e.SYN.AcceptMax, SYNQueue: e.SYN.SYNQueue,
			ListenDrops: e.SYN.ListenDrops, ListenOverflows: e.SYN.ListenOverfl}
	case event.PointDrop:
		j.Drop = &JSONDrop{Reason: n.dropReason(e.Drop.Reason), Location: n.symbol(e.Drop.Location)}
	case event.PointTCP:
		j.TCP = &JSONTCP{Cookie: e.TCP.Cookie}
		if e.Kind == event.KindTCPState {
			j.TCP.OldState, j.TCP.NewState = event.TCPStateName(e.TCP.OldState), event.TCPStateName(e.TCP.NewState)
		}
	}
	return j
}
