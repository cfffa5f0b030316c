package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The committed dispatch is what the registry generates: a point added to
// the registry without `go generate ./pkg/event` fails here.
func TestDispatchIsCurrent(t *testing.T) {
	src, err := os.ReadFile("../../section.go")
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate("section.go", src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../section_dispatch.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("pkg/event/section_dispatch.go is not what the sections registry generates: run go generate ./pkg/event")
	}
}

// Each registry line becomes a case of every operation taking the event,
// and an operation without it (a test's sample) gets no dispatch.
func TestEveryOperationDispatchesEveryPoint(t *testing.T) {
	src := `package event

import "net/netip"

type section interface {
	decode(e *Event, p []byte)
	appendCompact(b []byte, e *Event) []byte
	addrs(e *Event) [2]netip.Addr
	sample(base Event) Event
}

var sections = [...]section{
	PointA: aSection{},
	PointB: bSection{},
}
`
	code, err := generate("section.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out := string(code)
	for _, want := range []string{
		"func decodeSection(e *Event, p []byte) {",
		"case PointB:\n\t\tbSection{}.decode(e, p)",
		"func appendCompactSection(b []byte, e *Event) []byte {",
		"case PointA:\n\t\treturn aSection{}.appendCompact(b, e)",
		"default:\n\t\treturn emptySection{}.appendCompact(b, e)",
		"func addrsSection(e *Event) [2]netip.Addr {",
		`import "net/netip"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("generated dispatch lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sampleSection") {
		t.Errorf("an operation without the event got a dispatch:\n%s", out)
	}
	if _, err := generate("section.go", []byte(strings.Replace(src, "PointB: bSection{},", "PointB: newB(),", 1))); err == nil {
		t.Error("a registry line that is not `Point: section{}` was accepted")
	}
}
