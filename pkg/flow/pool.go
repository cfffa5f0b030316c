package flow

import (
	"cmp"
	"slices"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// Flow memory is recycled and flows are kept in a list by last activity,
// so that correlation allocates nothing per event once warm and expiry and
// eviction never scan every flow.

// unlink takes a flow out of the activity list.
func (c *Correlator) unlink(f *Flow) {
	if f.prev != nil {
		f.prev.next = f.next
	} else if c.oldest == f {
		c.oldest = f.next
	}
	if f.next != nil {
		f.next.prev = f.prev
	} else if c.newest == f {
		c.newest = f.prev
	}
	f.prev, f.next = nil, nil
}

// touch moves a flow to the newest end of the activity list.
func (c *Correlator) touch(f *Flow) {
	if c.newest == f {
		return
	}
	c.unlink(f)
	f.prev = c.newest
	if c.newest != nil {
		c.newest.next = f
	}
	c.newest = f
	if c.oldest == nil {
		c.oldest = f
	}
}

func (c *Correlator) end(f *Flow, done func(*Flow)) {
	if _, ok := c.flows[f]; !ok {
		return
	}
	delete(c.flows, f)
	c.unlink(f)
	for _, k := range f.keys {
		if c.byKey[k] == f {
			delete(c.byKey, k)
		}
		if k.kind == keySkb {
			id := skbID{k.id, k.aux}
			if st := c.skbs[id]; st != nil && st.epoch == k.epoch {
				c.forgetSkb(id)
			}
		}
	}
	f.sortPackets()
	c.stats.Flows++
	done(f)
	c.recycle(f)
}

func (c *Correlator) forgetSkb(id skbID) {
	if st := c.skbs[id]; st != nil {
		delete(c.skbs, id)
		c.freeSkbs = append(c.freeSkbs, st)
	}
}

func (c *Correlator) dropHeld(id skbID, held []event.Event) {
	delete(c.held, id)
	c.freeHeld = append(c.freeHeld, held[:0])
}

func (c *Correlator) newSkbState() *skbState {
	if n := len(c.freeSkbs); n > 0 {
		st := c.freeSkbs[n-1]
		c.freeSkbs = c.freeSkbs[:n-1]
		*st = skbState{epoch: c.newEpoch()}
		return st
	}
	return &skbState{epoch: c.newEpoch()}
}

func (c *Correlator) newFlow() *Flow {
	if n := len(c.freeFlows); n > 0 {
		f := c.freeFlows[n-1]
		c.freeFlows = c.freeFlows[:n-1]
		return f
	}
	return &Flow{}
}

func (c *Correlator) newPacket() *Packet {
	if n := len(c.freePackets); n > 0 {
		p := c.freePackets[n-1]
		c.freePackets = c.freePackets[:n-1]
		return p
	}
	return &Packet{Events: make([]event.Event, 0, 2)}
}

// recycle keeps a finished flow's memory for later flows. Slices keep
// their capacity; a flow that grew unusually large is let go, so memory
// stays bounded by typical flows.
func (c *Correlator) recycle(f *Flow) {
	for _, p := range f.Packets {
		if cap(p.Events) <= 64 {
			p.Events = p.Events[:0]
			c.freePackets = append(c.freePackets, p)
		}
	}
	if cap(f.Packets) <= 64 && cap(f.Socket) <= 64 && cap(f.keys) <= 256 {
		*f = Flow{Packets: f.Packets[:0], Socket: f.Socket[:0], keys: f.keys[:0]}
		c.freeFlows = append(c.freeFlows, f)
	}
}

func (c *Correlator) evictOldest(done func(*Flow)) {
	if c.oldest != nil {
		c.stats.Evicted++
		c.end(c.oldest, done)
	}
}

// Expire ends the flows idle at kernel time now, and forgets held events
// whose packet never showed up again.
func (c *Correlator) Expire(now uint64, done func(*Flow)) {
	if now > c.now {
		c.now = now
	}
	for id, held := range c.held {
		if held[len(held)-1].Time+skbGap < c.now {
			c.dropHeld(id, held)
		}
	}
	// The list is in order of last activity, which is event order: the
	// idle flows are at its start.
	for c.oldest != nil && c.oldest.End+uint64(c.cfg.Idle) < c.now {
		c.end(c.oldest, done)
	}
}

// Flush ends every flow (end of a run).
func (c *Correlator) Flush(done func(*Flow)) {
	all := make([]*Flow, 0, len(c.flows))
	for f := range c.flows {
		all = append(all, f)
	}
	slices.SortFunc(all, func(a, b *Flow) int { return cmp.Compare(a.ID, b.ID) })
	for _, f := range all {
		c.end(f, done)
	}
}
