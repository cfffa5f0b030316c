package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// The committed offsets are the compiled header's: a member added to or
// moved in bpf/include/nettrace.h without `go generate ./pkg/event`
// fails here. The object is bpf2go's, which `make generate` builds.
func TestLayoutIsCurrent(t *testing.T) {
	const obj = "../../../../internal/probe/nat_x86_bpfel.o"
	if _, err := os.Stat(obj); err != nil {
		t.Fatalf("%v: the BPF objects are built by `make generate`", err)
	}
	want, err := generateFrom(obj)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../layout_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("pkg/event/layout_gen.go is not what bpf/include/nettrace.h compiles to: run go generate ./pkg/event")
	}
}

var u32 = &btf.Int{Name: "__u32", Size: 4}

func member(name string, typ btf.Type, byteOffset uint32) btf.Member {
	return btf.Member{Name: name, Type: typ, Offset: btf.Bits(8 * byteOffset)}
}

// A record with a payload union: every struct it reaches is written in
// both forms, the header's shared members as constants, padding left out.
func records() (wide, narrow *btf.Struct) {
	tcp := &btf.Struct{Name: "nt_tcp", Size: 8, Members: []btf.Member{member("cookie", u32, 0), member("_pad", u32, 4)}}
	tcp4 := &btf.Struct{Name: "nt_tcp4", Size: 4, Members: []btf.Member{member("cookie", u32, 0)}}
	u := &btf.Union{Name: "nt_payload", Size: 8, Members: []btf.Member{member("tcp", tcp, 0)}}
	u4 := &btf.Union{Name: "nt_payload4", Size: 4, Members: []btf.Member{member("tcp", tcp4, 0)}}
	wide = &btf.Struct{Name: "nt_event", Size: 24, Members: []btf.Member{
		member("ts", u32, 0), member("dst_mtu", u32, 4), member("u", u, 8), member("skb_seen", u32, 16)}}
	narrow = &btf.Struct{Name: "nt_event4", Size: 16, Members: []btf.Member{
		member("ts", u32, 0), member("dst_mtu", u32, 4), member("u", u4, 8), member("skb_seen", u32, 12)}}
	return wide, narrow
}

func TestGenerateFollowsTheBTF(t *testing.T) {
	wide, narrow := records()
	src, err := generate(wide, narrow, "x.o")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"const RecordSize = 16",
		"const WideRecordSize = 24",
		"offDstMTU = 4",
		"formNarrow: {size: 16, ts: 0, dstMTU: 4, u: 8, skbSeen: 12}",
		"formWide:   {size: 24, ts: 0, dstMTU: 4, u: 8, skbSeen: 16}",
		"formNarrow: {size: 4, cookie: 0}",
		"formWide:   {size: 8, cookie: 0}",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("generated file lacks %q:\n%s", want, src)
		}
	}
	for _, absent := range []string{"offSkbSeen", "_pad", "offU "} {
		if strings.Contains(string(src), absent) {
			t.Errorf("generated file has %q", absent)
		}
	}
}

// A struct the wide record holds without a narrow twin is a header
// mistake, named.
func TestGenerateNeedsNarrowTwins(t *testing.T) {
	wide, narrow := records()
	narrow.Members[2].Type = &btf.Union{Name: "nt_payload4", Size: 4}
	if _, err := generate(wide, narrow, "x.o"); err == nil || !strings.Contains(err.Error(), "nt_tcp4") {
		t.Fatalf("got %v, want an error naming nt_tcp4", err)
	}
}
