package event

import (
	"strings"
)

// PointNAT is the nat point's value in enum nt_point, and its kinds'
// values are in enum nt_kind.
const (
	PointNAT Point = 1

	KindNAT Kind = 1 // the tuple before and after one NAT hook
)

// NAT is the payload of a nat event: the tuple before and after one NAT
// hook, and the device of the route attached after it.
type NAT struct {
	Pre        Tuple  `nt:"pre,if=FlagPre"` // before the hook's translation
	OutIfindex uint32 `nt:"out_ifindex"`
	OutIfname  Name   `nt:"out_ifname"` // device of the route attached after the hook
}

type natSection struct{}

func (natSection) name() string { return "nat" }

func (natSection) journeyStep() bool { return true }

func (natSection) kinds() []kindName { return []kindName{{KindNAT, "nat", DirectionNone}} }

func (natSection) sample(base Event) Event {
	base.Point, base.Kind, base.Flags = PointNAT, KindNAT, base.Flags|FlagPre
	base.NAT = NAT{Pre: base.Tuple, OutIfindex: 4}
	copy(base.NAT.OutIfname[:], "flannel.1")
	return base
}

func (natSection) Step(_ Lookup, hooks TranslationHooks, e *Event) string {
	if e.Flags&FlagCTInvalid != 0 {
		return "conntrack: INVALID (no entry, not translated)"
	}
	if e.Flags&FlagPre == 0 {
		return "NAT hook (state before unknown)"
	}
	pre, post := e.NAT.Pre, e.Tuple
	var parts []string
	for _, t := range []Translation{TranslationDNAT, TranslationSNAT, TranslationUnDNAT, TranslationUnSNAT} {
		if e.Translation()&t == 0 {
			continue
		}
		switch t {
		case TranslationDNAT:
			parts = append(parts, "DNAT "+endpoint(pre, false)+" -> "+endpoint(post, false))
		case TranslationSNAT:
			parts = append(parts, "SNAT "+endpoint(pre, true)+" -> "+endpoint(post, true))
		case TranslationUnDNAT:
			parts = append(parts, "reply restored: "+endpoint(pre, true)+" -> "+endpoint(post, true)+
				" (undoes the DNAT"+requestHook(hooks, e.Netns, TranslationDNAT)+")")
		case TranslationUnSNAT:
			parts = append(parts, "reply restored: "+endpoint(pre, false)+" -> "+endpoint(post, false)+
				" (undoes the SNAT"+requestHook(hooks, e.Netns, TranslationSNAT)+")")
		}
	}
	if len(parts) == 0 {
		return "no NAT"
	}
	s := strings.Join(parts, ", ")
	if out := e.NAT.OutIfname.String(); out != "" && (e.Hook == HookOutput || e.Hook == HookPrerouting) {
		s += ", route via " + out
	}
	return s
}

func (natSection) Detail(_ Lookup, e *Event, detail []string) []string {
	if e.Flags&FlagPre != 0 && e.NAT.Pre.WithoutFlags() != e.Tuple.WithoutFlags() {
		detail = append(detail, FormatTuple(e.NAT.Pre), "->", FormatTuple(e.Tuple))
	} else {
		detail = append(detail, FormatTuple(e.Tuple))
	}
	if out := e.NAT.OutIfname.String(); out != "" && (e.Hook == HookOutput || e.Hook == HookPostrouting) {
		detail = append(detail, "out "+out)
	}
	return detail
}

func (natSection) JSONKey() string { return "" }

func (natSection) JSONSchema() any { return nil }

// AppendJSONFields appends the nat point's fields, at the top of an event's
// object: the tuple before the hook and what changed, and the route's
// device after it.
func (natSection) AppendJSONFields(b []byte, o *JSONObject, e *Event) []byte {
	if e.Flags&FlagCTInvalid != 0 {
		b = append(o.Key(b, "ct_invalid"), "true"...)
	}
	if e.Flags&FlagPre != 0 {
		b = AppendJSONTuple(o.Key(b, "pre"), e.NAT.Pre)
		if e.NAT.Pre.WithoutFlags() != e.Tuple.WithoutFlags() {
			b = append(o.Key(b, "translated"), "true"...)
		}
		b = AppendJSONStrings(b, o, "translations", e.Translation().Names(), true)
	}
	return o.StrOmit(b, "out_dev", e.NAT.OutIfname.String())
}

func (natSection) AppendJSON(b []byte, _ Lookup, _ *Event) []byte { return b }

// PCAPNG comments on a hook seen translating (or not): the tuple before
// and after, and what the change was. The rules that decided it are the
// report's (the exporter's).
func (natSection) PCAPNG(_ Lookup, e *Event, c []string) []string {
	if e.Flags&FlagCTInvalid != 0 {
		c = append(c, "conntrack: INVALID")
	}
	if e.Flags&FlagPre == 0 {
		return c
	}
	c = append(c, "nat_before: "+CommentTuple(e.NAT.Pre), "nat_after: "+CommentTuple(e.Tuple))
	if t := e.Translation().Names(); len(t) > 0 {
		c = append(c, "translation: "+strings.Join(t, ","))
	}
	return c
}

// requestHook is " at HOOK" of the flow's translation t in a namespace,
// or "" when the flow does not show it.
func requestHook(hooks TranslationHooks, netns uint32, t Translation) string {
	if hooks == nil {
		return ""
	}
	if h, ok := hooks.TranslationHook(netns, t); ok {
		return " at " + h.String()
	}
	return ""
}
