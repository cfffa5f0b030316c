package ruleset

import (
	"fmt"
	"sort"
	"sync"
)

// Snapshot is a namespace's ruleset as iptables-save and ip6tables-save
// printed it at a kernel time (CLOCK_MONOTONIC nanoseconds, the events'
// clock), with its native nftables rules as `nft -a -s list ruleset` did.
type Snapshot struct {
	Netns   uint32
	Time    uint64
	Text    string
	Text6   string   // ip6tables-save's; "" when not read
	Native  string   // "" when not read (no nft on the host)
	Ruleset *Ruleset // nil when Text does not parse; its IPv6 from Text6
	Err     error    // why a text does not parse
}

// NewSnapshot parses the texts into a snapshot; a text that does not parse
// is kept with its error, so that a recording still carries it.
func NewSnapshot(netns uint32, time uint64, text, text6, native string) Snapshot {
	rs, err := Parse(text)
	if rs != nil && text6 != "" {
		rs6, err6 := Parse(text6)
		if err6 != nil {
			err = fmt.Errorf("ip6tables-save text: %w", err6)
		} else {
			rs6.ipv6 = true
			rs.IPv6 = rs6
		}
	}
	if rs != nil && native != "" {
		// iptables-nft's tables are in both listings: iptables-save's text
		// names their rules.
		rs.Native = ParseNative(native).without(rs.Tables)
		for name, t := range rs.Native.walkable() {
			rs.Tables[name] = t
		}
	}
	return Snapshot{Netns: netns, Time: time, Text: text, Text6: text6, Native: native, Ruleset: rs, Err: err}
}

// History is the rulesets of namespaces over a run: what was in force
// when a packet passed. Safe for concurrent use.
type History struct {
	mu      sync.RWMutex
	byNetns map[uint32][]Snapshot // in time order
}

// Add records a snapshot.
func (h *History) Add(s Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byNetns == nil {
		h.byNetns = map[uint32][]Snapshot{}
	}
	list := append(h.byNetns[s.Netns], s)
	sort.SliceStable(list, func(i, j int) bool { return list[i].Time < list[j].Time })
	h.byNetns[s.Netns] = list
}

// At returns the ruleset of a namespace in force at time t: the last
// snapshot taken at or before it, or the first when all came later (a
// ruleset is read as a run starts, after the kernel may have seen the
// first packets). nil when the namespace has none.
func (h *History) At(netns uint32, t uint64) *Ruleset {
	h.mu.RLock()
	defer h.mu.RUnlock()
	list := h.byNetns[netns]
	if len(list) == 0 {
		return nil
	}
	i := sort.Search(len(list), func(i int) bool { return list[i].Time > t })
	if i > 0 {
		i--
	}
	return list[i].Ruleset
}
