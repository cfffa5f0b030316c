package output

import (
	"strings"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// natView shows the nat point: a NAT hook's tuple before and after, and the route device after it.
type natView struct{}

func (natView) step(_ Names, f *flow.Flow, e *event.Event) string {
	if e.Flags&event.FlagCTInvalid != 0 {
		return "conntrack: INVALID (no entry, not translated)"
	}
	if e.Flags&event.FlagPre == 0 {
		return "NAT hook (state before unknown)"
	}
	pre, post := e.NAT.Pre, e.Tuple
	var parts []string
	for _, t := range []event.Translation{event.TranslationDNAT, event.TranslationSNAT, event.TranslationUnDNAT, event.TranslationUnSNAT} {
		if e.Translation()&t == 0 {
			continue
		}
		switch t {
		case event.TranslationDNAT:
			parts = append(parts, "DNAT "+addrPort(pre, false)+" -> "+addrPort(post, false))
		case event.TranslationSNAT:
			parts = append(parts, "SNAT "+addrPort(pre, true)+" -> "+addrPort(post, true))
		case event.TranslationUnDNAT:
			parts = append(parts, "reply restored: "+addrPort(pre, true)+" -> "+addrPort(post, true)+
				" (undoes the DNAT"+requestHook(f, e.Netns, event.TranslationDNAT)+")")
		case event.TranslationUnSNAT:
			parts = append(parts, "reply restored: "+addrPort(pre, false)+" -> "+addrPort(post, false)+
				" (undoes the SNAT"+requestHook(f, e.Netns, event.TranslationSNAT)+")")
		}
	}
	if len(parts) == 0 {
		return "no NAT"
	}
	s := strings.Join(parts, ", ")
	if out := e.NAT.OutIfname.String(); out != "" && (e.Hook == event.HookOutput || e.Hook == event.HookPrerouting) {
		s += ", route via " + out
	}
	return s
}

func (natView) detail(_ Names, e *event.Event, detail []string) []string {
	if e.Flags&event.FlagPre != 0 && bareTuple(e.NAT.Pre) != bareTuple(e.Tuple) {
		detail = append(detail, FormatTuple(e.NAT.Pre), "->", FormatTuple(e.Tuple))
	} else {
		detail = append(detail, FormatTuple(e.Tuple))
	}
	if out := e.NAT.OutIfname.String(); out != "" && (e.Hook == event.HookOutput || e.Hook == event.HookPostrouting) {
		detail = append(detail, "out "+out)
	}
	return detail
}

func (natView) jsonKey() string { return "" }

// appendJSONFields appends the nat point's fields, at the top of an event's
// object: the tuple before the hook and what changed, and the route's
// device after it.
func (natView) appendJSONFields(b []byte, o *jsonObject, e *event.Event) []byte {
	if e.Flags&event.FlagCTInvalid != 0 {
		b = append(o.key(b, "ct_invalid"), "true"...)
	}
	if e.Flags&event.FlagPre != 0 {
		b = appendTuple(o.key(b, "pre"), e.NAT.Pre)
		if bareTuple(e.NAT.Pre) != bareTuple(e.Tuple) {
			b = append(o.key(b, "translated"), "true"...)
		}
		b = appendStrings(b, o, "translations", e.Translation().Names(), true)
	}
	return o.strOmit(b, "out_dev", e.NAT.OutIfname.String())
}

func (natView) appendJSON(b []byte, _ Names, _ *event.Event) []byte { return b }

// pcapng comments on a hook seen translating (or not): the tuple before
// and after, and what the change was. The rules that decided it are the
// report's (the exporter's).
func (natView) pcapng(_ Names, e *event.Event, c []string) []string {
	if e.Flags&event.FlagCTInvalid != 0 {
		c = append(c, "conntrack: INVALID")
	}
	if e.Flags&event.FlagPre == 0 {
		return c
	}
	c = append(c, "nat_before: "+pcapngTuple(e.NAT.Pre), "nat_after: "+pcapngTuple(e.Tuple))
	if t := e.Translation().Names(); len(t) > 0 {
		c = append(c, "translation: "+strings.Join(t, ","))
	}
	return c
}
