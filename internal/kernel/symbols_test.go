package kernel

import (
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
