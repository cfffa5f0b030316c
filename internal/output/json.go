package output

import (
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
