package event

// PointDev is the dev point's value in enum nt_point, and its kinds'
// values are in enum nt_kind.
const (
	PointDev Point = 6

	KindDevRx Kind = 8 // received by a device
	KindDevTx Kind = 9 // handed to a device for transmit
)

// The dev point: a packet entering or leaving a device. Its events have no
// payload: the device, namespace and tuple are every event's.
type devSection struct{ emptySection }

func (devSection) name() string { return "dev" }

func (devSection) journeyStep() bool { return true }

func (devSection) kinds() []kindName {
	return []kindName{{KindDevRx, "rx", DirectionInbound}, {KindDevTx, "tx", DirectionOutbound}}
}

func (devSection) sample(base Event) Event {
	base.Point, base.Kind = PointDev, KindDevRx
	return base
}

func (devSection) Step(_ Lookup, _ TranslationHooks, e *Event) string {
	return e.Kind.String()
}

func (devSection) Detail(_ Lookup, e *Event, detail []string) []string {
	detail = append(detail, FormatTuple(e.Tuple))
	if e.HasInner() {
		detail = append(detail, "inner "+FormatTuple(e.Inner))
	}
	return detail
}

func (devSection) JSONKey() string { return "" }

func (devSection) JSONSchema() any { return nil }

func (devSection) AppendJSON(b []byte, _ Lookup, _ *Event) []byte { return b }

func (devSection) PCAPNG(_ Lookup, _ *Event, c []string) []string { return c }

func (devSection) AppendJSONFields(b []byte, _ *JSONObject, _ *Event) []byte { return b }
