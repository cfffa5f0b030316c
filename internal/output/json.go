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
	Translations []string `json:"translations,omitempty"`
	// CTInvalid says conntrack judged the packet INVALID at a nat event.
	CTInvalid bool             `json:"ct_invalid,omitempty"`
	OutDev    string           `json:"out_dev,omitempty"`
	CT        *JSONConntrack   `json:"ct,omitempty"`
	Route     *event.JSONRoute `json:"route,omitempty"`
	VXLAN     *event.JSONVXLAN `json:"vxlan,omitempty"`
	SYN       *event.JSONSYN   `json:"syn,omitempty"`
	Drop      *event.JSONDrop  `json:"drop,omitempty"`
	TCP       *event.JSONTCP   `json:"tcp,omitempty"`
}
