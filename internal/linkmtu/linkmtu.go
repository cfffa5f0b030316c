// Package linkmtu reads, for a packet a node dropped as too big to
// forward, the MTUs around it that the drop event does not carry: the
// kernel reports the route's device and its MTU, and user space reads the
// MTU of the device under that one when it is a tunnel (a vxlan device's
// underlay), and of the sender's own device (a pod's eth0), found by the
// packet's source address among the watched namespaces. Together they
// say which MTU is wrong. Written into the drop event, they are kept by
// recordings.
package linkmtu

import (
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// fresh is how long a reading serves later drops: a black hole drops a
// sender's every retransmission, and each reading enters namespaces.
const fresh = time.Second

// lookupsPerSecond bounds the senders looked for a second: a lookup enters
// every watched namespace, and a node whose every pod has the wrong MTU
// drops packets of all of them at once, while the reader must keep up
// with the ring buffer. A sender not looked for keeps its MTU unread.
const lookupsPerSecond = 20

// reading is one device's MTU (zero: not found) and when it was read.
type reading struct {
	mtu uint16
	at  time.Time
}

// deviceKey is a device of a namespace.
type deviceKey struct {
	netns   uint32
	ifindex uint32
}

// Reader completes the too-big drops of the namespaces it watches.
type Reader struct {
	// watched are the namespaces the sender is looked for in, in turn.
	watched netns.Watched
	lower   map[deviceKey]reading
	sender  map[netip.Addr]reading
	// lookups counts the sender lookups since window began.
	lookups int
	window  time.Time
	// tooBig says whether a kernel drop reason is PKT_TOO_BIG.
	tooBig func(reason uint32) bool
	now    func() time.Time
	// lowerMTU and addressMTU read a namespace's devices (readLower,
	// readAddress).
	lowerMTU   func(path string, ifindex uint32) (uint16, error)
	addressMTU func(path string, a netip.Addr) (uint16, bool, error)
}

// New watches the given namespaces; reasonName names the kernel's drop
// reasons.
func New(targets []netns.Target, reasonName func(uint32) string) *Reader {
	r := &Reader{lower: map[deviceKey]reading{}, sender: map[netip.Addr]reading{},
		tooBig: func(reason uint32) bool { return reasonName(reason) == "PKT_TOO_BIG" }, now: time.Now,
		lowerMTU: readLower, addressMTU: readAddress}
	for _, t := range targets {
		r.AddNamespace(t)
	}
	return r
}

// AddNamespace starts watching a namespace.
func (r *Reader) AddNamespace(t netns.Target) { r.watched.Add(t) }

// ForgetNamespace stops reading a namespace that is gone.
func (r *Reader) ForgetNamespace(ino uint32) { r.watched.Remove(ino) }

// Complete writes the MTUs around a too-big drop in a watched namespace
// into it. Other events are left as they are.
func (r *Reader) Complete(e *event.Event) {
	if e.Point != event.PointDrop || !r.tooBig(e.Drop.Reason) {
		return
	}
	now := r.now()
	r.turnWindow(now)
	if path, ok := r.watched.Path(e.Netns); ok && e.Drop.DstIfindex != 0 {
		k := deviceKey{e.Netns, e.Drop.DstIfindex}
		rd, ok := r.lower[k]
		if !ok || now.Sub(rd.at) >= fresh {
			rd = reading{at: now}
			rd.mtu, _ = r.lowerMTU(path, e.Drop.DstIfindex)
			r.lower[k] = rd
		}
		e.Drop.LowerMTU = rd.mtu
	}
	src := e.Tuple.Src
	if e.HasInner() {
		src = e.Inner.Src
	}
	rd, ok := r.sender[src]
	if (!ok || now.Sub(rd.at) >= fresh) && r.mayLookUp() {
		rd = reading{mtu: r.senderMTU(src), at: now}
		r.sender[src] = rd
	}
	e.Drop.SrcMTU = rd.mtu
}

// turnWindow begins a new second's lookup budget once the last one is
// over, and forgets the readings no drop may use any more: a node drops
// too-big packets of many senders over a long run, and readings kept for
// each would grow with the run, not with the node.
func (r *Reader) turnWindow(now time.Time) {
	if now.Sub(r.window) < time.Second {
		return
	}
	r.window, r.lookups = now, 0
	for k, rd := range r.lower {
		if now.Sub(rd.at) >= fresh {
			delete(r.lower, k)
		}
	}
	for a, rd := range r.sender {
		if now.Sub(rd.at) >= fresh {
			delete(r.sender, a)
		}
	}
}

// mayLookUp takes a sender lookup from this second's budget.
func (r *Reader) mayLookUp() bool {
	if r.lookups == lookupsPerSecond {
		return false
	}
	r.lookups++
	return true
}

// senderMTU is the MTU of the device that holds address a, in the one
// watched namespace that has it; zero when none or several do (hosts'
// namespaces may share an address, and a guess is no evidence).
func (r *Reader) senderMTU(a netip.Addr) uint16 {
	var mtu uint16
	found := 0
	for _, path := range r.watched.Paths() {
		m, ok, err := r.addressMTU(path, a)
		if err != nil || !ok {
			continue
		}
		mtu, found = m, found+1
	}
	if found != 1 {
		return 0
	}
	return mtu
}

// clamp keeps an MTU in the drop event's 16 bits.
func clamp(mtu int) uint16 { return uint16(min(mtu, 0xffff)) }

// readLower reads the MTU of the device under a namespace's device, when
// that is a vxlan device bound to one (flannel binds its own to the
// node's interface); zero otherwise.
func readLower(path string, ifindex uint32) (uint16, error) {
	var mtu uint16
	err := netns.Do(path, func() error {
		link, err := netlink.LinkByIndex(int(ifindex))
		if err != nil {
			return err
		}
		vx, ok := link.(*netlink.Vxlan)
		if !ok || vx.VtepDevIndex == 0 {
			return nil
		}
		under, err := netlink.LinkByIndex(vx.VtepDevIndex)
		if err != nil {
			return err
		}
		mtu = clamp(under.Attrs().MTU)
		return nil
	})
	return mtu, err
}

// readAddress reads the MTU of the device holding address a in a
// namespace; false when none does.
func readAddress(path string, a netip.Addr) (uint16, bool, error) {
	var mtu uint16
	found := false
	err := netns.Do(path, func() error {
		family := netlink.FAMILY_V4
		if a.Is6() && !a.Is4In6() {
			family = netlink.FAMILY_V6
		}
		addrs, err := netlink.AddrList(nil, family)
		if err != nil {
			return err
		}
		for _, ad := range addrs {
			if got, ok := netip.AddrFromSlice(ad.IP); !ok || got.Unmap() != a.Unmap() {
				continue
			}
			link, err := netlink.LinkByIndex(ad.LinkIndex)
			if err != nil {
				return err
			}
			mtu, found = clamp(link.Attrs().MTU), true
			return nil
		}
		return nil
	})
	return mtu, found, err
}
