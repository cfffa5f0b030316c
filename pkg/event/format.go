package event

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The forms events' values take in output, shared by the points' views
// (View) and the renderers: tuples as text, in pcapng comments and in
// JSON, and JSON written byte for byte as encoding/json writes it, without
// reflection (-o json writes every event).

// FormatTuple renders "tcp 10.0.0.1:1234 > 10.0.0.2:80 [S]".
func FormatTuple(t Tuple) string {
	var b strings.Builder
	b.WriteString(ProtoName(t.Proto))
	b.WriteByte(' ')
	if t.Proto == ProtoTCP || t.Proto == ProtoUDP {
		fmt.Fprintf(&b, "%s > %s", netip.AddrPortFrom(t.Src, t.Sport), netip.AddrPortFrom(t.Dst, t.Dport))
	} else {
		fmt.Fprintf(&b, "%s > %s", t.Src, t.Dst)
	}
	if t.Proto == ProtoTCP && t.TCPFlags != 0 {
		fmt.Fprintf(&b, " [%s]", TCPFlagString(t.TCPFlags))
	}
	return b.String()
}

// CommentTuple is a tuple in a pcapng comment: "tcp 10.0.0.1:40000 -> 10.96.0.10:80".
func CommentTuple(t Tuple) string {
	return fmt.Sprintf("%s %s -> %s", ProtoName(t.Proto), netip.AddrPortFrom(t.Src, t.Sport), netip.AddrPortFrom(t.Dst, t.Dport))
}

// AppendAddrPort appends "addr:port" ("[addr]:port" for IPv6), without
// allocating.
func AppendAddrPort(b []byte, a netip.Addr, port uint16) []byte {
	if !a.IsValid() {
		return strconv.AppendUint(append(append(b, a.String()...), ':'), uint64(port), 10)
	}
	return netip.AddrPortFrom(a, port).AppendTo(b)
}

// endpoint is a tuple's source or destination as "addr:port".
func endpoint(t Tuple, source bool) string {
	var b [64]byte
	if source {
		return string(AppendAddrPort(b[:0], t.Src, t.Sport))
	}
	return string(AppendAddrPort(b[:0], t.Dst, t.Dport))
}

// AppendJSONTuple appends a tuple's JSON object.
func AppendJSONTuple(b []byte, t Tuple) []byte {
	var o JSONObject
	b = o.Str(b, "proto", ProtoName(t.Proto))
	b = o.Str(b, "src", t.Src.String())
	b = o.UintOmit(b, "sport", uint64(t.Sport))
	b = o.Str(b, "dst", t.Dst.String())
	b = o.UintOmit(b, "dport", uint64(t.Dport))
	b = o.StrOmit(b, "flags", TCPFlagString(t.TCPFlags))
	return o.Close(b)
}

// AppendJSONStrings appends a list of strings: null when nil, nothing at all
// when omitted empty.
func AppendJSONStrings(b []byte, o *JSONObject, name string, list []string, omitEmpty bool) []byte {
	if omitEmpty && len(list) == 0 {
		return b
	}
	b = o.Key(b, name)
	if list == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, s)
	}
	return append(b, ']')
}

// JSONObject appends an object's members: it opens the object with its
// first key and separates the next ones.
type JSONObject struct{ open bool }

// Key appends a member's key, opening the object or separating it from the last.
func (o *JSONObject) Key(b []byte, name string) []byte {
	if o.open {
		b = append(b, ',')
	} else {
		b = append(b, '{')
		o.open = true
	}
	return append(append(append(b, '"'), name...), `":`...)
}

// Close closes the object ("{}" when it has no member).
func (o *JSONObject) Close(b []byte) []byte {
	if !o.open {
		b = append(b, '{')
	}
	return append(b, '}')
}

// Str appends a string member.
func (o *JSONObject) Str(b []byte, name, v string) []byte {
	return AppendJSONString(o.Key(b, name), v)
}

// StrOmit appends a string member unless it is empty.
func (o *JSONObject) StrOmit(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return o.Str(b, name, v)
}

// Uint appends a number member.
func (o *JSONObject) Uint(b []byte, name string, v uint64) []byte {
	return strconv.AppendUint(o.Key(b, name), v, 10)
}

// UintOmit appends a number member unless it is zero.
func (o *JSONObject) UintOmit(b []byte, name string, v uint64) []byte {
	if v == 0 {
		return b
	}
	return o.Uint(b, name, v)
}

// AppendJSONString quotes s as encoding/json does: HTML-safe, invalid
// UTF-8 replaced, U+2028 and U+2029 escaped.
func AppendJSONString(b []byte, s string) []byte {
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

// WithoutFlags is the tuple without its TCP flags: the connection's, as
// packets of any flags share it.
func (t Tuple) WithoutFlags() Tuple {
	t.TCPFlags = 0
	return t
}
