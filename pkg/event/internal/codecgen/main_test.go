package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// The committed codecs are what the payloads' tags generate: a tag or
// field changed without `go generate ./pkg/event` fails here.
func TestCodecIsCurrent(t *testing.T) {
	const obj = "../../../../internal/probe/nat_x86_bpfel.o"
	if _, err := os.Stat(obj); err != nil {
		t.Fatalf("%v: the BPF objects are built by `make generate`", err)
	}
	want, err := generateDir("../..", "section_codec.go", obj)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../section_codec.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("pkg/event/section_codec.go is not what the payloads' nt tags generate: run go generate ./pkg/event")
	}
}

func parse(t *testing.T, src string) []*ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package event\n"+src, 0)
	if err != nil {
		t.Fatal(err)
	}
	return []*ast.File{f}
}

const event = `type Event struct { Probe Probe }
type probeSection struct{}
type Outcome uint8
`

var (
	u8, u16, u32 = &btf.Int{Size: 1}, &btf.Int{Size: 2}, &btf.Int{Size: 4}
	addr4        = &btf.Array{Type: u32, Nelems: 4}
	ifname       = &btf.Array{Type: &btf.Int{Size: 1}, Nelems: 16}
	tuple        = &btf.Struct{Name: "nt_tuple", Size: 40}
	tuple4       = &btf.Struct{Name: "nt_tuple4", Size: 16}
)

// probeStructs are the C structs of the test's payload: struct nt_probe,
// wide, and nt_probe4.
func probeStructs(name string) (*btf.Struct, error) {
	wide := name == "nt_probe"
	if !wide && name != "nt_probe4" {
		return nil, fmt.Errorf("no struct %s", name)
	}
	pick := func(w, n btf.Type) btf.Type {
		if wide {
			return w
		}
		return n
	}
	var members []btf.Member
	for _, m := range []struct {
		name string
		typ  btf.Type
	}{
		{"pre", pick(tuple, tuple4)}, {"out_ifname", ifname}, {"gateway", pick(addr4, u32)},
		{"laddr", pick(addr4, u32)}, {"lport", u16}, {"outcome", u8}, {"_pad", u8}, {"dst_mtu", u16}, {"err", u32},
	} {
		members = append(members, btf.Member{Name: m.name, Type: m.typ})
	}
	return &btf.Struct{Name: name, Members: members}, nil
}

// Each tag form becomes its reads and writes in every form, at the
// generated layout's offsets, and a hand-written operation keeps its name.
func TestEveryTagForm(t *testing.T) {
	src, err := generate(parse(t, event+`
type Probe struct {
	Pre      Tuple          `+"`nt:\"pre,if=FlagPre\"`"+`
	Dev      Name           `+"`nt:\"out_ifname\"`"+`
	Gateway  netip.Addr     `+"`nt:\"gateway\"`"+`
	Listener netip.AddrPort `+"`nt:\"laddr+lport\"`"+`
	Outcome  Outcome        `+"`nt:\"outcome\"`"+`
	MTU      uint16         `+"`nt:\"dst_mtu,varint\"`"+`
	Err      int32          `+"`nt:\"err\"`"+`
}
func (probeSection) appendCompact(b []byte, e *Event) []byte { return b }
`), probeStructs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"o := probeAt[l.form]",
		"if e.Flags&FlagPre != 0 {\n\t\tl.tupleOf(p[o.pre:], &e.Probe.Pre)",
		"copy(e.Probe.Dev[:], p[o.outIfname:])",
		"e.Probe.Gateway = l.addr(p[o.gateway:], ipv6)",
		"e.Probe.Listener = netip.AddrPortFrom(l.addr(p[o.laddr:], ipv6), le.Uint16(p[o.lport:]))",
		"e.Probe.Outcome = Outcome(p[o.outcome])",
		"e.Probe.MTU = le.Uint16(p[o.dstMTU:])",
		"e.Probe.Err = int32(le.Uint32(p[o.err:]))",
		"o := probeAt[formNarrow]",
		"le.PutUint32(p[o.err:], uint32(e.Probe.Err))",
		"func (probeSection) appendCompactFields(b []byte, e *Event) []byte",
		"b = binary.AppendUvarint(b, uint64(e.Probe.MTU))",
		"e.Probe.MTU = uint16(r.uvarint())",
		"b = le.AppendUint16(appendAddr(b, e.Probe.Listener.Addr()), e.Probe.Listener.Port())",
		"a[0] = e.Probe.Pre.Src",
		"a[2] = e.Probe.Gateway",
		"a[3] = e.Probe.Listener.Addr()",
		"case 3:\n\t\te.Probe.Listener = netip.AddrPortFrom(a, e.Probe.Listener.Port())",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("generated code lacks %q:\n%s", want, src)
		}
	}
}

func TestBadTags(t *testing.T) {
	for _, c := range []struct{ field, err string }{
		{"X uint32", "no nt tag"},
		{"X uint32 `nt:\"pre\"`", "nt_probe4.pre: 16 bytes, the field reads 4"},
		{"X Tuple `nt:\"pre\"`", "no field is tagged with dst_mtu, err, gateway, laddr, lport, out_ifname, outcome of struct nt_probe"},
		{"X uint32 `nt:\"dst_mtu\"`", "nt_probe4.dst_mtu: 2 bytes, the field reads 4"},
		{"X Tuple `nt:\"gateway\"`", "a Tuple reads a struct nt_tuple4"},
		{"X uint32 `nt:\"snd_wnd\"`", "struct nt_probe has no member snd_wnd"},
		{"X uint32 `nt:\"x,fixed\"`", `unknown option "fixed"`},
		{"X netip.AddrPort `nt:\"laddr\"`", "holds 2 members"},
		{"X Name `nt:\"x,varint\"`", "varint is for integers"},
		{"X float64 `nt:\"x\"`", "neither an integer"},
	} {
		_, err := generate(parse(t, event+"type Probe struct {\n"+c.field+"\n}\n"), probeStructs)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: got %v, want an error saying %q", c.field, err, c.err)
		}
	}
}
