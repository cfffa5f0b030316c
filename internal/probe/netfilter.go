package probe

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/netns"
)

// NAT priorities (enum nf_ip_hook_priorities) per hook: DNAT in PREROUTING
// and OUTPUT, SNAT in INPUT and POSTROUTING. nat_after goes one priority
// after each, so nothing else runs between the NAT and it; nat_before one
// before, in OUTPUT only (see bpf/nat.bpf.c: every other hook takes the
// tuple before the NAT from conntrack, which saves a program run per
// packet and hook).
const (
	priNATDst = -100
	priNATSrc = 100
)

type netfilterLink struct {
	program  int // index in Tracer.nfPrograms
	hook     uint32
	priority int32
}

const (
	nfBefore = iota
	nfAfter
)

var nfProgramNames = [2]string{"nat_before", "nat_after"}

var netfilterLinks = []netfilterLink{
	{nfAfter, unix.NF_INET_PRE_ROUTING, priNATDst + 1},
	{nfBefore, unix.NF_INET_LOCAL_OUT, priNATDst - 1},
	{nfAfter, unix.NF_INET_LOCAL_OUT, priNATDst + 1},
	{nfAfter, unix.NF_INET_LOCAL_IN, priNATSrc + 1},
	{nfAfter, unix.NF_INET_POST_ROUTING, priNATSrc + 1},
}

func (t *Tracer) attachNetfilterAll() ([]link.Link, error) {
	var all []link.Link
	var errs []error
	for _, ns := range t.opts.Namespaces {
		links, err := t.attachNetfilter(ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		all = append(all, links...)
	}
	if len(all) == 0 {
		return nil, errors.Join(errs...)
	}
	for _, err := range errs {
		t.opts.Log.Warn().Err(err).Msg("netns not watched")
	}
	return all, nil
}

// prioritySpread bounds how far from its place by the NAT a netfilter
// link moves when the kernel refuses it its priority: the kernel allows
// one BPF program per hook and priority, and another tracer (a second
// nettrace: the DaemonSet's recorder beside an engineer's watch) may hold
// it. Every priority within it is still between the NAT and the next
// table (filter at 0, mangle at -150 before DNAT; the SELinux and helper
// hooks past 225 after SNAT), so the program sees what it would have.
const prioritySpread = 16

// attachNetfilterLink links one program at its priority, or, while the
// kernel says another BPF program holds it (EBUSY), at the next one away
// from the NAT. It returns the priority it linked at.
func (t *Tracer) attachNetfilterLink(nl netfilterLink, family uint32) (link.Link, int32, error) {
	step := int32(1)
	if nl.program == nfBefore {
		step = -1
	}
	priority := nl.priority
	for i := 0; ; i++ {
		l, err := link.AttachNetfilter(link.NetfilterOptions{
			Program:        t.nfPrograms[nl.program],
			ProtocolFamily: family,
			HookNumber:     nl.hook,
			Priority:       priority,
		})
		if err == nil || !errors.Is(err, unix.EBUSY) || i == prioritySpread-1 {
			return l, priority, err
		}
		priority += step
	}
}

// attachNetfilter links the NAT programs of each hook in one namespace: a
// netfilter link belongs to the namespace of the thread that creates it.
func (t *Tracer) attachNetfilter(ns netns.Target) ([]link.Link, error) {
	var links []link.Link
	var attached []Attachment
	var ipv6Err error
	err := netns.Do(ns.Path, func() error {
		for _, family := range []uint32{unix.NFPROTO_IPV4, unix.NFPROTO_IPV6} {
			for _, nl := range netfilterLinks {
				l, priority, err := t.attachNetfilterLink(nl, family)
				if err != nil {
					err = fmt.Errorf("netfilter link in netns %s (%s, hook %d): %w", ns.Name, familyName(family), nl.hook, err)
					if family == unix.NFPROTO_IPV6 {
						// A kernel or namespace without IPv6: IPv4 is
						// still watched.
						ipv6Err = err
						break
					}
					return err
				}
				links = append(links, l)
				attached = append(attached, Attachment{Point: "nat", Program: nfProgramNames[nl.program], Method: MethodNetfilter,
					Target: ns.Path, Hook: nl.hook, Priority: priority, Family: familyName(family)})
			}
		}
		return nil
	})
	if err != nil {
		closeAll(links)
		return nil, err
	}
	if ipv6Err != nil {
		t.opts.Log.Warn().Err(ipv6Err).Msg("IPv6 NAT not watched in this netns")
	}
	t.nfNamespace[ns.Inode] = true
	t.attachments = append(t.attachments, attached...)
	return links, nil
}

// WatchNamespace attaches the netfilter programs in a namespace that
// appeared after Open. It is a no-op when the nat point does not use
// netfilter or the namespace is already watched.
func (t *Tracer) WatchNamespace(ns netns.Target) error {
	if t.nfPrograms[0] == nil || t.nfNamespace[ns.Inode] {
		return nil
	}
	links, err := t.attachNetfilter(ns)
	if err != nil {
		return err
	}
	t.links = append(t.links, links...)
	if t.opts.RestrictNetns {
		if err := t.maps["watched_netns"].Put(ns.Inode, uint8(1)); err != nil {
			return fmt.Errorf("watch netns %s: %w", ns.Name, err)
		}
	}
	return nil
}

func familyName(family uint32) string {
	if family == unix.NFPROTO_IPV6 {
		return "ipv6"
	}
	return "ipv4"
}
