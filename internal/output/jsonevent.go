package output

import (
	"strconv"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// AppendEvent appends an event's {"type":"event"} object (JSONEvent, the
// schema of docs/events.md) to b, byte for byte as encoding/json writes
// that struct, without building it: -o json writes every event, and
// reflection over a fresh object for each cost more than reading and
// correlating it.
func (n Names) AppendEvent(b []byte, e *event.Event) []byte {
	var o event.JSONObject
	b = o.Str(b, "type", "event")
	b = o.Key(b, "time")
	b = append(n.wall(e.Time).AppendFormat(append(b, '"'), time.RFC3339Nano), '"')
	b = o.Uint(b, "mono_ns", e.Time)
	b = o.Str(b, "point", e.Point.String())
	b = o.Str(b, "kind", e.Kind.String())
	b = o.StrOmit(b, "hook", e.Hook.String())
	b = o.StrOmit(b, "netns", n.netns(e.Netns))
	b = o.UintOmit(b, "netns_inode", uint64(e.Netns))
	b = o.StrOmit(b, "dev", e.Ifname.String())
	b = o.UintOmit(b, "ifindex", uint64(e.Ifindex))
	if e.Skb != 0 {
		b = o.Key(b, "skb")
		b = append(strconv.AppendUint(append(b, `"0x`...), e.Skb, 16), '"')
	}
	b = o.UintOmit(b, "skb_seen", e.SkbSeen)
	if e.ToGroup() {
		b = append(o.Key(b, "group"), "true"...)
	}
	b = o.Uint(b, "cpu", uint64(e.CPU))
	b = event.AppendJSONTuple(o.Key(b, "tuple"), e.Tuple)
	if e.HasInner() {
		b = event.AppendJSONTuple(o.Key(b, "inner"), e.Inner)
	}
	b = event.ViewOf(e.Point).AppendJSONFields(b, &o, e)
	if e.HasCT() {
		b = appendConntrack(o.Key(b, "ct"), &e.CT)
	}
	return append(n.appendPayload(b, &o, e), '}')
}

// appendPayload appends the object of the event's point, when it has one.
func (n Names) appendPayload(b []byte, o *event.JSONObject, e *event.Event) []byte {
	v := event.ViewOf(e.Point)
	key := v.JSONKey()
	if key == "" {
		return b
	}
	return v.AppendJSON(o.Key(b, key), n.lookup(), e)
}

func appendConntrack(b []byte, ct *event.Conntrack) []byte {
	var o event.JSONObject
	b = o.Key(b, "id")
	b = append(strconv.AppendUint(append(b, `"0x`...), ct.ID, 16), '"')
	b = event.AppendJSONStrings(b, &o, "status", ct.Status.Names(), false)
	b = o.Uint(b, "mark", uint64(ct.Mark))
	b = o.Uint(b, "zone", uint64(ct.Zone))
	dir := "original"
	if ct.IsReply() {
		dir = "reply"
	}
	b = o.Str(b, "direction", dir)
	b = event.AppendJSONTuple(o.Key(b, "orig"), ct.Orig)
	b = event.AppendJSONTuple(o.Key(b, "reply"), ct.Reply)
	return o.Close(b)
}
