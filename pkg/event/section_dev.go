package event

// The dev point: a packet entering or leaving a device. Its events have no
// payload: the device, namespace and tuple are every event's.
type devSection struct{ emptySection }

func (devSection) name() string { return "dev" }

func (devSection) sample(base Event) Event {
	base.Point, base.Kind = PointDev, KindDevRx
	return base
}
