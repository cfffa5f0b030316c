package output

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// AppendEvent appends an event's {"type":"event"} object (JSONEvent, the
// schema of docs/events.md) to b, byte for byte as encoding/json writes
// that struct, without building it: -o json writes every event, and
// reflection over a fresh object for each cost more than reading and
// correlating it.
func (n Names) AppendEvent(b []byte, e *event.Event) []byte {
	var o jsonObject
	b = o.str(b, "type", "event")
	b = o.key(b, "time")
	b = append(n.wall(e.Time).AppendFormat(append(b, '"'), time.RFC3339Nano), '"')
	b = o.uint(b, "mono_ns", e.Time)
	b = o.str(b, "point", e.Point.String())
	b = o.str(b, "kind", e.Kind.String())
	b = o.strOmit(b, "hook", e.Hook.String())
	b = o.strOmit(b, "netns", n.netns(e.Netns))
	b = o.uintOmit(b, "netns_inode", uint64(e.Netns))
	b = o.strOmit(b, "dev", e.Ifname.String())
	b = o.uintOmit(b, "ifindex", uint64(e.Ifindex))
	if e.Skb != 0 {
		b = o.key(b, "skb")
		b = append(strconv.AppendUint(append(b, `"0x`...), e.Skb, 16), '"')
	}
	b = o.uintOmit(b, "skb_seen", e.SkbSeen)
	if e.ToGroup() {
		b = append(o.key(b, "group"), "true"...)
	}
	b = o.uint(b, "cpu", uint64(e.CPU))
	b = appendTuple(o.key(b, "tuple"), e.Tuple)
	if e.HasInner() {
		b = appendTuple(o.key(b, "inner"), e.Inner)
	}
	b = viewOf(e.Point).appendJSONFields(b, &o, e)
	if e.HasCT() {
		b = appendConntrack(o.key(b, "ct"), &e.CT)
	}
	return append(n.appendPayload(b, &o, e), '}')
}

// appendPayload appends the object of the event's point, when it has one.
func (n Names) appendPayload(b []byte, o *jsonObject, e *event.Event) []byte {
	v := viewOf(e.Point)
	key := v.jsonKey()
	if key == "" {
		return b
	}
	return v.appendJSON(o.key(b, key), n, e)
}

func appendTuple(b []byte, t event.Tuple) []byte {
	var o jsonObject
	b = o.str(b, "proto", event.ProtoName(t.Proto))
	b = o.str(b, "src", t.Src.String())
	b = o.uintOmit(b, "sport", uint64(t.Sport))
	b = o.str(b, "dst", t.Dst.String())
	b = o.uintOmit(b, "dport", uint64(t.Dport))
	b = o.strOmit(b, "flags", event.TCPFlagString(t.TCPFlags))
	return o.close(b)
}

func appendConntrack(b []byte, ct *event.Conntrack) []byte {
	var o jsonObject
	b = o.key(b, "id")
	b = append(strconv.AppendUint(append(b, `"0x`...), ct.ID, 16), '"')
	b = appendStrings(b, &o, "status", ct.Status.Names(), false)
	b = o.uint(b, "mark", uint64(ct.Mark))
	b = o.uint(b, "zone", uint64(ct.Zone))
	dir := "original"
	if ct.IsReply() {
		dir = "reply"
	}
	b = o.str(b, "direction", dir)
	b = appendTuple(o.key(b, "orig"), ct.Orig)
	b = appendTuple(o.key(b, "reply"), ct.Reply)
	return o.close(b)
}

// appendStrings appends a list of strings: null when nil, nothing at all
// when omitted empty.
func appendStrings(b []byte, o *jsonObject, name string, list []string, omitEmpty bool) []byte {
	if omitEmpty && len(list) == 0 {
		return b
	}
	b = o.key(b, name)
	if list == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// jsonObject appends an object's members: it opens the object with its
// first key and separates the next ones.
type jsonObject struct{ open bool }

func (o *jsonObject) key(b []byte, name string) []byte {
	if o.open {
		b = append(b, ',')
	} else {
		b = append(b, '{')
		o.open = true
	}
	return append(append(append(b, '"'), name...), `":`...)
}

func (o *jsonObject) close(b []byte) []byte {
	if !o.open {
		b = append(b, '{')
	}
	return append(b, '}')
}

func (o *jsonObject) str(b []byte, name, v string) []byte {
	return appendJSONString(o.key(b, name), v)
}

func (o *jsonObject) strOmit(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return o.str(b, name, v)
}

func (o *jsonObject) uint(b []byte, name string, v uint64) []byte {
	return strconv.AppendUint(o.key(b, name), v, 10)
}

func (o *jsonObject) uintOmit(b []byte, name string, v uint64) []byte {
	if v == 0 {
		return b
	}
	return o.uint(b, name, v)
}

// appendJSONString quotes s as encoding/json does: HTML-safe, invalid
// UTF-8 replaced, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
		} else {
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}
