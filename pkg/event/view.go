package event

import "fmt"

// A View is how the renderers show one point's events, beside the point's
// payload in its section's file: what an event did to its packet, its
// words in an event line, its JSON payload and its pcapng comments. Every
// section is one (the sections registry holds them); ViewOf finds it. A
// view only renders what the event carries and what the renderer names
// for it (Lookup, TranslationHooks): diagnosis is explain's.
type View interface {
	// Step says in a few words what the event did to its packet, for
	// timelines and flows' steps; hooks names the hook of the request's
	// translation a reply's undoes.
	Step(l Lookup, hooks TranslationHooks, e *Event) string
	// Detail appends the words of the event's line (text --events).
	Detail(l Lookup, e *Event, detail []string) []string
	// JSONKey is the key of the point's payload object in an event's JSON
	// object ("" for none), JSONSchema a nil pointer to the type whose
	// encoding/json form it is (nil for none), and AppendJSON appends
	// that object.
	JSONKey() string
	JSONSchema() any
	AppendJSON(b []byte, l Lookup, e *Event) []byte
	// AppendJSONFields appends the point's fields that sit at the top of
	// an event's object, after its tuples (the nat point's pre-NAT tuple).
	AppendJSONFields(b []byte, o *JSONObject, e *Event) []byte
	// PCAPNG appends the point's packet comments ("key: value") to c.
	PCAPNG(l Lookup, e *Event, c []string) []string
}

// Lookup names what an event's numbers stand for where only the renderer
// knows it: drop reasons (the running kernel's enum, or a recording's) and
// kernel addresses. It is two functions, passed by value: the renderers
// show every event, and an interface holding their names would cost an
// allocation each time.
type Lookup struct {
	DropReason func(uint32) string
	Symbol     func(uint64) string
}

// ReasonName names a drop reason, by its number when unknown.
func (l Lookup) ReasonName(r uint32) string {
	if l.DropReason != nil {
		if s := l.DropReason(r); s != "" {
			return s
		}
	}
	return fmt.Sprintf("reason(%d)", r)
}

// SymbolName names a kernel address, by its value when unknown.
func (l Lookup) SymbolName(a uint64) string {
	if l.Symbol != nil {
		return l.Symbol(a)
	}
	return fmt.Sprintf("%#x", a)
}

// TranslationHooks finds where a packet's flow was translated: the hook
// of translation t in namespace netns, if the flow shows it (flow.Flow;
// nil when the flow is unknown).
type TranslationHooks interface {
	TranslationHook(netns uint32, t Translation) (Hook, bool)
}

// ViewOf returns a point's view; a point this build does not know (a newer
// recording's) is shown by its kind alone.
func ViewOf(p Point) View {
	if int(p) < len(sections) && sections[p] != nil {
		return sections[p]
	}
	return unknownView{}
}

// unknownView shows an event of a point this build does not know.
type unknownView struct{}

func (unknownView) Step(_ Lookup, _ TranslationHooks, e *Event) string  { return e.Kind.String() }
func (unknownView) Detail(_ Lookup, _ *Event, detail []string) []string { return detail }
func (unknownView) JSONKey() string                                     { return "" }
func (unknownView) JSONSchema() any                                     { return nil }
func (unknownView) AppendJSON(b []byte, _ Lookup, _ *Event) []byte      { return b }
func (unknownView) AppendJSONFields(b []byte, _ *JSONObject, _ *Event) []byte {
	return b
}
func (unknownView) PCAPNG(_ Lookup, _ *Event, c []string) []string { return c }
