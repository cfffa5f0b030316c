package probe

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/kernel"
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
	program  int // index in netfilterSet.programs
	hook     uint32
	priority int32
}

const (
	nfBefore = iota
	nfAfter
	nfWatch
	nfPrograms
)

var nfProgramNames = [nfPrograms]string{"nat_before", "nat_after", "nat_watch"}

// natLinks are a namespace's links unless conntrack is seen not to run
// there.
var natLinks = []netfilterLink{
	{nfAfter, unix.NF_INET_PRE_ROUTING, priNATDst + 1},
	{nfBefore, unix.NF_INET_LOCAL_OUT, priNATDst - 1},
	{nfAfter, unix.NF_INET_LOCAL_OUT, priNATDst + 1},
	{nfAfter, unix.NF_INET_LOCAL_IN, priNATSrc + 1},
	{nfAfter, unix.NF_INET_POST_ROUTING, priNATSrc + 1},
}

// watchLinks are a namespace's links while conntrack does not run there
// (see nat_watch in bpf/nat.bpf.c): one run a packet where natLinks make
// two or three, for nothing. Not at nat_before's priority, which the NAT
// programs take while these are still linked.
var watchLinks = []netfilterLink{
	{nfWatch, unix.NF_INET_PRE_ROUTING, priNATDst - 2},
	{nfWatch, unix.NF_INET_LOCAL_OUT, priNATDst - 2},
}

// netfilterSet is the netfilter method's links, per namespace: the NAT
// programs, or nat_watch where conntrack was found off. A goroutine moves
// a namespace from one to the other as the programs find conntrack off or
// started there, so everything here is under mu. The programs wake it
// (conntrack_wakeup) rather than it polling: the packets conntrack tracks
// in a namespace where it started are counted lost until the NAT programs
// are linked there, and an idle node would pay for a poll.
type netfilterSet struct {
	mu       sync.Mutex
	programs [nfPrograms]*ebpf.Program
	changed  *ebpf.Map       // conntrack_changed: where conntrack was found off or started, by namespace
	noted    *ebpf.Map       // synack_noted: where the programs note SYN-ACKs for the syn point, since when
	wakeups  *ringbuf.Reader // conntrack_wakeup: a record each time a change is noted
	spaces   map[uint32]*netfilterNamespace
	log      zerolog.Logger
	done     chan struct{} // closed when follow returns
}

// netfilterNamespace is one namespace's links. watching says they are
// watchLinks; stuck that relinking there failed once, so that it is not
// tried again (nat_watch, if it stays, goes on counting the namespace's
// tracked packets lost).
type netfilterNamespace struct {
	target   netns.Target
	links    []link.Link
	attached []Attachment
	watching bool
	stuck    bool
}

func newNetfilterSet(coll *ebpf.Collection, log zerolog.Logger) (*netfilterSet, error) {
	s := &netfilterSet{spaces: map[uint32]*netfilterNamespace{}, log: log, changed: coll.Maps["conntrack_changed"], noted: coll.Maps["synack_noted"]}
	for i, name := range nfProgramNames {
		if s.programs[i] = coll.Programs[name]; s.programs[i] == nil {
			return nil, fmt.Errorf("nat object has no program %s", name)
		}
	}
	if s.changed == nil || s.noted == nil {
		return nil, errors.New("nat object has no conntrack_changed or synack_noted map")
	}
	wakeups, ok := coll.Maps["conntrack_wakeup"]
	if !ok {
		return nil, errors.New("nat object has no conntrack_wakeup map")
	}
	var err error
	if s.wakeups, err = ringbuf.NewReader(wakeups); err != nil {
		return nil, fmt.Errorf("read conntrack_wakeup: %w", err)
	}
	return s, nil
}

// attachAll links the NAT programs in every namespace it can, and then
// follows conntrack's changes in them.
func (s *netfilterSet) attachAll(spaces []netns.Target) error {
	var errs []error
	for _, ns := range spaces {
		if err := s.attach(ns); err != nil {
			errs = append(errs, err)
		}
	}
	if len(s.spaces) == 0 {
		return errors.Join(errs...)
	}
	for _, err := range errs {
		s.log.Warn().Err(err).Msg("netns not watched")
	}
	s.done = make(chan struct{})
	go s.follow()
	return nil
}

// attach links the NAT programs in a namespace not linked yet.
func (s *netfilterSet) attach(ns netns.Target) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spaces[ns.Inode] != nil {
		return nil
	}
	links, attached, err := s.link(ns, natLinks)
	if err != nil {
		return err
	}
	s.spaces[ns.Inode] = &netfilterNamespace{target: ns, links: links, attached: attached}
	// Both sets of links note SYN-ACKs, and relinking keeps one of them
	// linked throughout: noted from now until detach.
	if err := s.noted.Put(ns.Inode, kernel.MonotonicNow()); err != nil {
		// The syn point's tracepoint method then claims no drop there.
		s.log.Debug().Err(err).Str("netns", ns.Name).Msg("SYN-ACKs not noted")
	}
	return nil
}

// follow moves each namespace where the programs found conntrack off or
// started to the links that suit it, each time they note a change, until
// the wakeups' reader is closed.
func (s *netfilterSet) follow() {
	defer close(s.done)
	type change struct {
		ino     uint32
		running bool
	}
	var rec ringbuf.Record
	for {
		if err := s.wakeups.ReadInto(&rec); err != nil {
			if !errors.Is(err, os.ErrClosed) {
				s.log.Warn().Err(err).Msg("conntrack's changes no longer followed")
			}
			return
		}
		var changes []change
		var ino uint32
		var running uint8
		for it := s.changed.Iterate(); it.Next(&ino, &running); {
			changes = append(changes, change{ino, running != 0})
		}
		for _, c := range changes {
			if !s.relink(c.ino, c.running) {
				continue
			}
			if err := s.changed.Delete(c.ino); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				s.log.Debug().Err(err).Msg("conntrack change not cleared")
			}
		}
	}
}

// relink links what suits a namespace where conntrack runs or not, then
// unlinks what was there: in that order, so that every packet conntrack
// tracks is either watched or counted lost. It says whether the change is
// taken; one in a namespace where relinking failed stays noted, so that
// its programs do not note it, and wake follow, at every packet.
func (s *netfilterSet) relink(ino uint32, running bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.spaces[ino]
	if ns != nil && ns.stuck {
		return false
	}
	if ns == nil || ns.watching != running {
		return true
	}
	set, what := watchLinks, "conntrack off: the namespace's packets are watched for it to start"
	if running {
		set, what = natLinks, "conntrack started: the namespace's NAT is watched from now on (its packets until now are counted lost to the nat point)"
	}
	links, attached, err := s.link(ns.target, set)
	if err != nil {
		// Where conntrack runs, nat_watch goes on counting its packets
		// lost; where it does not, the NAT programs see nothing amiss.
		ns.stuck = true
		s.log.Warn().Err(err).Str("netns", ns.target.Name).Bool("conntrack", running).Msg("netfilter programs not relinked")
		return false
	}
	closeAll(ns.links)
	ns.links, ns.attached, ns.watching = links, attached, !running
	level := s.log.Debug()
	if running {
		level = s.log.Info()
	}
	level.Str("netns", ns.target.Name).Msg(what)
	return true
}

// prioritySpread bounds how far from its place by the NAT a netfilter
// link moves when the kernel refuses it its priority: the kernel allows
// one BPF program per hook and priority, and another tracer (a second
// nettrace: the DaemonSet's recorder beside an engineer's watch) may hold
// it. Every priority within it is still between the NAT and the next
// table (filter at 0, mangle at -150 before DNAT; the SELinux and helper
// hooks past 225 after SNAT), so the program sees what it would have.
const prioritySpread = 16

// linkAt links one program at its priority, or, while the kernel says
// another BPF program holds it (EBUSY), at the next one away from the NAT.
// It returns the priority it linked at.
func (s *netfilterSet) linkAt(nl netfilterLink, family uint32) (link.Link, int32, error) {
	step := int32(1)
	if nl.program != nfAfter {
		step = -1
	}
	priority := nl.priority
	for i := 0; ; i++ {
		l, err := link.AttachNetfilter(link.NetfilterOptions{
			Program:        s.programs[nl.program],
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

// link links a set of programs in one namespace: a netfilter link belongs
// to the namespace of the thread that creates it.
func (s *netfilterSet) link(ns netns.Target, set []netfilterLink) ([]link.Link, []Attachment, error) {
	var links []link.Link
	var attached []Attachment
	var ipv6Err error
	err := netns.Do(ns.Path, func() error {
		for _, family := range []uint32{unix.NFPROTO_IPV4, unix.NFPROTO_IPV6} {
			for _, nl := range set {
				l, priority, err := s.linkAt(nl, family)
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
		return nil, nil, err
	}
	if ipv6Err != nil {
		s.log.Warn().Err(ipv6Err).Msg("IPv6 NAT not watched in this netns")
	}
	return links, attached, nil
}

// namespaces is how many namespaces are linked.
func (s *netfilterSet) namespaces() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.spaces)
}

// attachments are the links there are now.
func (s *netfilterSet) attachments() []Attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []Attachment
	for _, ns := range s.spaces {
		all = append(all, ns.attached...)
	}
	return all
}

// detach unlinks the programs from a namespace that is gone.
func (s *netfilterSet) detach(ino uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ns := s.spaces[ino]; ns != nil {
		closeAll(ns.links)
		delete(s.spaces, ino)
		if err := s.noted.Delete(ino); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			s.log.Debug().Err(err).Uint32("netns", ino).Msg("SYN-ACKs still counted as noted")
		}
	}
}

// close stops following conntrack and unlinks everything.
func (s *netfilterSet) close() {
	s.wakeups.Close()
	if s.done != nil {
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range s.spaces {
		closeAll(ns.links)
	}
	s.spaces = map[uint32]*netfilterNamespace{}
}

// WatchNamespace attaches the netfilter programs in a namespace that
// appeared after Open. It is a no-op when the nat point does not use
// netfilter or the namespace is already watched.
func (t *Tracer) WatchNamespace(ns netns.Target) error {
	if t.netfilter == nil {
		return nil
	}
	if err := t.netfilter.attach(ns); err != nil {
		return err
	}
	if t.opts.RestrictNetns {
		if err := t.maps["watched_netns"].Put(ns.Inode, uint8(1)); err != nil {
			return fmt.Errorf("watch netns %s: %w", ns.Name, err)
		}
	}
	return nil
}

// ForgetNamespace lets go of a namespace that is gone: its netfilter
// links, and its place among the watched.
func (t *Tracer) ForgetNamespace(ino uint32) error {
	if t.netfilter != nil {
		t.netfilter.detach(ino)
	}
	if t.opts.RestrictNetns {
		if err := t.maps["watched_netns"].Delete(ino); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("forget netns %d: %w", ino, err)
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
