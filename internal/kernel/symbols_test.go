package kernel

import (
	"fmt"
	"strings"
	"testing"
)

const kallsyms = `ffffffff81000000 T _stext
ffffffff81000100 t tcp_conn_request
ffffffff81000100 t tcp_conn_request_alias
ffffffff81000200 T inet_csk_listen_start
ffffffff81000180 d some_data
ffffffff81000300 t helper	[nf_nat]
ffffffff81000280 t helper
0000000000000000 t hidden_inline_candidate
ffffffff81000400 T _etext
`

func TestSymbols(t *testing.T) {
	s, err := parseSymbols(strings.NewReader(kallsyms))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"tcp_conn_request": true, "hidden_inline_candidate": true, "helper": true,
		"some_data": false, "nf_nat_ipv4_fn": false, "": false,
	} {
		if s.Has(name) != want {
			t.Errorf("Has(%q) = %v, want %v", name, !want, want)
		}
	}
	for addr, want := range map[uint64]string{
		0xffffffff81000000: "_stext+0x0",
		0xffffffff81000104: "tcp_conn_request_alias+0x4", // the last of the symbols at its address
		0xffffffff810001f0: "tcp_conn_request_alias+0xf0",
		0xffffffff81000290: "helper+0x10",
		0xffffffff81000500: "_etext+0x100",
		0xffffffff80000000: "0xffffffff80000000",
		0:                  "0x0",
	} {
		if got := s.Name(addr); got != want {
			t.Errorf("Name(%#x) = %q, want %q", addr, got, want)
		}
	}
	if start, end, ok := s.Range("helper"); !ok || start != 0xffffffff81000280 || end != 0xffffffff81000300 {
		t.Errorf("Range(helper) = %#x, %#x, %v: want the lower of the two", start, end, ok)
	}
	if _, _, ok := s.Range("hidden_inline_candidate"); ok {
		t.Error("a symbol without an address has no range")
	}
	if _, _, ok := s.Range("_etext"); ok {
		t.Error("the last symbol has no end")
	}
}

// BenchmarkParseSymbols parses a listing the size of a distribution
// kernel's with its modules (150,000 lines, most of them text, the
// kernel's in address order and the modules' after them in any order):
// every capture does it once before it attaches.
func BenchmarkParseSymbols(b *testing.B) {
	var listing strings.Builder
	for i := range 150_000 {
		addr, kind, module := 0xffffffff81000000+uint64(i)*64, "t", ""
		if i > 120_000 {
			addr, module = 0xffffffffc0000000+uint64(i*7919%30_000)*64, "\t[nf_nat]"
		}
		switch i % 10 {
		case 0:
			kind = "d"
		case 1:
			kind = "T"
		}
		fmt.Fprintf(&listing, "%016x %s fn_%d_%x%s\n", addr, kind, i%5000, i, module)
	}
	text := listing.String()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseSymbols(strings.NewReader(text)); err != nil {
			b.Fatal(err)
		}
	}
}
