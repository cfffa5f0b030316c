package event

// Translation is what a nat step did to its packet, in the terms of the
// connection: the request's own translations, or a reply's reverse ones,
// which only restore the addresses the request's translations changed. A
// reply's source rewritten at POSTROUTING reads like a masquerade by the
// hook alone; it is the DNAT being undone.
type Translation uint8

const (
	// TranslationDNAT rewrote a request's destination (a Service to its
	// endpoint).
	TranslationDNAT Translation = 1 << iota
	// TranslationSNAT rewrote a request's source (a masquerade).
	TranslationSNAT
	// TranslationUnDNAT restored a reply's source to the address the
	// client called, undoing the request's DNAT.
	TranslationUnDNAT
	// TranslationUnSNAT restored a reply's destination to the client,
	// undoing the request's SNAT.
	TranslationUnSNAT
)

var translationNames = []struct {
	t    Translation
	name string
}{{TranslationDNAT, "dnat"}, {TranslationSNAT, "snat"}, {TranslationUnDNAT, "undnat"}, {TranslationUnSNAT, "unsnat"}}

// Names lists the translations by name ("dnat", "snat", "undnat",
// "unsnat"), in that order.
func (t Translation) Names() []string {
	var out []string
	for _, n := range translationNames {
		if t&n.t != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// Translation returns what a nat event with the tuple before NAT did to
// its packet; zero for any other event and for a packet NAT left as it
// was. The conntrack entry's direction decides: nf_nat rewrites a packet
// of the reply direction only to undo what its entry's status bits
// (IPS_DST_NAT, IPS_SRC_NAT) record of the request's translations, so a
// reply's rewritten source is an un-DNAT wherever the hooks are reached.
// Without an entry (the hook saw none) it is taken for a request's.
func (e *Event) Translation() Translation {
	if e.Point != PointNAT || e.Flags&FlagPre == 0 {
		return 0
	}
	pre, post := e.NAT.Pre, e.Tuple
	reply := e.HasCT() && e.CT.IsReply()
	var t Translation
	if pre.Dst != post.Dst || pre.Dport != post.Dport {
		t |= TranslationDNAT
		if reply {
			t = TranslationUnSNAT
		}
	}
	if pre.Src != post.Src || pre.Sport != post.Sport {
		if reply {
			t |= TranslationUnDNAT
		} else {
			t |= TranslationSNAT
		}
	}
	return t
}
