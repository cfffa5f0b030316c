package probe

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/netns"
)

// NAT priorities (enum nf_ip_hook_priorities) per hook: DNAT in PREROUTING
// and OUTPUT, SNAT in INPUT and POSTROUTING. The programs go one priority
// before and one after, so nothing else runs between them and the NAT.
const (
	priNATDst = -100
	priNATSrc = 100
)

var natHooks = []struct {
	hook     uint32
	priority int32
}{
	{unix.NF_INET_PRE_ROUTING, priNATDst},
	{unix.NF_INET_LOCAL_OUT, priNATDst},
	{unix.NF_INET_LOCAL_IN, priNATSrc},
	{unix.NF_INET_POST_ROUTING, priNATSrc},
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

// attachNetfilter links the two NAT programs around the NAT of each hook in
// one namespace: a netfilter link belongs to the namespace of the thread
// that creates it.
func (t *Tracer) attachNetfilter(ns netns.Target) ([]link.Link, error) {
	var links []link.Link
	err := netns.Do(ns.Path, func() error {
		for _, h := range natHooks {
			for i, delta := range []int32{-1, +1} {
				l, err := link.AttachNetfilter(link.NetfilterOptions{
					Program:        t.nfPrograms[i],
					ProtocolFamily: unix.NFPROTO_IPV4,
					HookNumber:     h.hook,
					Priority:       h.priority + delta,
				})
				if err != nil {
					return fmt.Errorf("netfilter link in netns %s (hook %d): %w", ns.Name, h.hook, err)
				}
				links = append(links, l)
			}
		}
		return nil
	})
	if err != nil {
		closeAll(links)
		return nil, err
	}
	t.nfNamespace[ns.Inode] = true
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
