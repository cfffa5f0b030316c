package event

import "net/netip"

// The dev point: a packet entering or leaving a device. Its events have no
// payload: the device, namespace and tuple are every event's.
type devSection struct{}

func (devSection) decode(*Event, []byte, *layout, bool)      {}
func (devSection) encode(*Event, []byte)                     {}
func (devSection) appendCompact(b []byte, _ *Event) []byte   { return b }
func (devSection) readCompact(*compactReader, *Event)        {}
func (devSection) addrs(*Event) (a [payloadAddrs]netip.Addr) { return a }
func (devSection) setAddr(*Event, int, netip.Addr)           {}

func (devSection) sample(base Event) Event {
	base.Point, base.Kind = PointDev, KindDevRx
	return base
}
