package cli

import "github.com/nettrace-dev/nettrace/internal/netns"

// rescan watches the namespaces that appeared since the last look: the
// named ones; with --netns all also the pods' (libcni's cache), and every
// tenth look every process's, a node's thousands of processes being the
// costly part, when it also lets go of the namespaces gone. An always-on
// recorder outlives the pods it started with.
func (c *capture) rescan() {
	targets := netns.Named()
	all := containsString(c.f.netns, "all")
	c.rescans++
	full := all && c.rescans%10 == 0
	if all {
		targets = append(targets, netns.Pods()...)
	}
	if full {
		targets = append(targets, netns.Processes()...)
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
	if full {
		c.forgetGone(targets, parts)
	}
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
