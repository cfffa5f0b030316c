package cli

import (
	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// rescan watches the namespaces that appeared since the last look: the
// named ones; with --netns all also the pods' (libcni's cache), and every
// tenth look, or when events came from a namespace not watched
// (sightings), every process's, a node's thousands of processes being the
// costly part; every tenth also lets go of the namespaces gone. An
// always-on recorder outlives the pods it started with.
func (c *capture) rescan() {
	targets := netns.Named()
	all := containsString(c.f.netns, "all")
	c.rescans++
	tenth := all && c.rescans%10 == 0
	if tenth {
		clear(c.unfound) // looked for again
	}
	full := tenth || (all && len(c.sighted) > 0)
	if all {
		targets = append(targets, netns.Pods()...)
	}
	if full {
		targets = append(targets, netns.Processes()...)
		c.noteUnfound(targets)
	}
	if c.watched == nil {
		c.watched = map[uint32]bool{}
		for _, t := range c.targets {
			c.watched[t.Inode] = true
		}
	}
	parts := c.namespaceParts()
	for _, t := range targets {
		c.watched[t.Inode] = true
		for _, p := range parts {
			p.add(t)
		}
	}
	if tenth {
		c.forgetGone(targets, parts)
	}
}

// sightings notes the events that come from a namespace not watched (with
// --netns all), so that the next look, within a second, finds it among
// the processes' instead of at the tenth: a pod's namespace is then
// watched a second or two after its first packets, and its first clients'
// SYNs, which the kernel's method could not judge before (their SYN-ACKs
// unseen), are judged from the listener's queues. A namespace no process
// holds is looked for again at the tenth look only.
type sightings struct{ c *capture }

func (s sightings) Complete(e *event.Event) {
	c := s.c
	if c.watched == nil || e.Netns == 0 || c.watched[e.Netns] || c.unfound[e.Netns] || c.sighted[e.Netns] {
		return
	}
	if c.sighted == nil {
		c.sighted = map[uint32]bool{}
	}
	c.sighted[e.Netns] = true
}

// noteUnfound keeps the sighted namespaces a look at every process did
// not find, and forgets the sightings.
func (c *capture) noteUnfound(found []netns.Target) {
	for _, t := range found {
		delete(c.sighted, t.Inode)
	}
	if c.unfound == nil {
		c.unfound = map[uint32]bool{}
	}
	for ino := range c.sighted {
		c.unfound[ino] = true
	}
	clear(c.sighted)
}

// namespacePart is a part of the capture that works per namespace: each
// ignores a namespace it has already, or does not have.
type namespacePart struct {
	add    func(netns.Target)
	forget func(ino uint32)
}

// namespaceParts are the capture's parts that work per namespace.
func (c *capture) namespaceParts() []namespacePart {
	parts := []namespacePart{{
		add: func(t netns.Target) {
			if err := c.tr.WatchNamespace(t); err != nil {
				c.log.Warn().Err(err).Str("netns", t.Name).Msg("new namespace not watched")
			}
		},
		forget: func(ino uint32) {
			if err := c.tr.ForgetNamespace(ino); err != nil {
				c.log.Debug().Err(err).Send()
			}
		},
	}}
	if c.syn != nil {
		parts = append(parts, namespacePart{c.syn.AddNamespace, c.syn.ForgetNamespace})
	}
	if c.ct != nil {
		parts = append(parts, namespacePart{c.ct.AddNamespace, c.ct.ForgetNamespace}, namespacePart{c.mtu.AddNamespace, c.mtu.ForgetNamespace})
	}
	if c.rules.watcher != nil {
		parts = append(parts, namespacePart{c.rules.watcher.Add, c.rules.watcher.Forget})
	}
	if c.rules.tracer != nil {
		parts = append(parts, namespacePart{c.rules.tracer.Add, c.rules.tracer.Forget})
	}
	return parts
}

// forgetGone lets go of the watched namespaces none of live is: held
// open by a part, a namespace no process or name keeps stays in the
// kernel with all it holds, and a pod's comes and goes with the pod.
func (c *capture) forgetGone(live []netns.Target, parts []namespacePart) {
	keep := map[uint32]bool{}
	for _, t := range live {
		keep[t.Inode] = true
	}
	for _, t := range c.targets {
		// nettrace's own namespace, which no other process may hold.
		keep[t.Inode] = keep[t.Inode] || t.Path == netns.SelfPath
	}
	for ino := range c.watched {
		if keep[ino] {
			continue
		}
		delete(c.watched, ino)
		for _, p := range parts {
			p.forget(ino)
		}
		c.log.Debug().Uint32("netns", ino).Msg("namespace gone: no longer watched")
	}
}
