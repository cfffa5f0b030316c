package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

func record(t *testing.T, events []event.Event, complete bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.ntrace")
	w, err := Create(path, Meta{Nettrace: "test", SnapLen: 128, DropReasons: map[uint32]string{10: "IP_RPFILTER"}}, fixture.Context{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range events {
		if err := w.Event(&events[i]); err != nil {
			t.Fatal(err)
		}
	}
	if complete {
		if err := w.Close(Summary{Lost: map[string]uint64{"nat": 0}}); err != nil {
			t.Fatal(err)
		}
	} else if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return path
}

func readAll(r *Reader) ([]event.Event, error) {
	var out []event.Event
	for {
		var e event.Event
		err := r.Next(&e)
		if err != nil {
			return out, err
		}
		e.Packet = append([]byte(nil), e.Packet...)
		if len(e.Packet) == 0 {
			e.Packet = nil
		}
		out = append(out, e)
	}
}

func encoded(e *event.Event) []byte {
	b := make([]byte, event.RecordedLen(e))
	return b[:event.Encode(e, b)]
}

func incident() []event.Event {
	evs := fixture.SNATMissing(false)
	evs[1].Packet = []byte{0x45, 0x00, 0x00, 0x3c, 1, 2, 3, 4}
	// An IPv6 packet beside them: its addresses take a block of their own.
	v6 := evs[0]
	v6.Skb++
	v6.Tuple = event.Tuple{Src: netip.MustParseAddr("fd00:20::1"), Dst: netip.MustParseAddr("fd00:10:96::10"),
		Sport: 40001, Dport: 80, Proto: event.ProtoTCP, TCPFlags: 2}
	v6.Packet = []byte{0x60, 0, 0, 0, 0, 20, 6, 64}
	return append(evs, v6)
}

func TestRoundTrip(t *testing.T) {
	want := incident()
	path := record(t, want, true)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("recording mode %v, %v; want 0600", st.Mode(), err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := readAll(r)
	if err != io.EOF {
		t.Fatalf("end of a complete recording: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events read, %d written", len(got), len(want))
	}
	for i := range want {
		if a, b := encoded(&got[i]), encoded(&want[i]); !bytes.Equal(a, b) {
			t.Errorf("event %d differs after a round trip:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if r.Meta.DropReasons[10] != "IP_RPFILTER" || r.NetnsName(fixture.Netns("n1")) != "n1" || r.Summary == nil {
		t.Errorf("names or summary lost: %+v %q %v", r.Meta, r.NetnsName(1), r.Summary)
	}
	if r.SymbolName(0) != "ip_rcv_finish_core+0x25b" {
		t.Errorf("drop location name lost")
	}
	if _, pods := r.PodAddresses(); !maps.Equal(pods, fixture.PodNames) {
		t.Errorf("pod addresses %v, want %v", pods, fixture.PodNames)
	}
}

// Every prefix of a recording reads up to its last complete record and
// says where it ends; none panics or ends silently.
func TestEveryTruncationIsReported(t *testing.T) {
	full, err := os.ReadFile(record(t, incident(), true))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := NewReader("full", bytes.NewReader(full))
	all, _ := readAll(r)
	for n := 0; n < len(full); n++ {
		r, err := NewReader("cut", bytes.NewReader(full[:n]))
		if err != nil {
			var te *Error
			if !errors.As(err, &te) || te.File != "cut" {
				t.Fatalf("prefix %d: header error %v is not a located error", n, err)
			}
			continue
		}
		got, err := readAll(r)
		var te *Error
		if !errors.As(err, &te) || !(errors.Is(err, ErrTruncated) || errors.Is(err, ErrNoEnd)) {
			t.Fatalf("prefix %d: %v, want a truncation error", n, err)
		}
		if te.Offset > int64(n) || len(got) > len(all) {
			t.Fatalf("prefix %d: error at offset %d, %d events", n, te.Offset, len(got))
		}
	}
}

func TestBadInput(t *testing.T) {
	valid, err := os.ReadFile(record(t, incident(), true))
	if err != nil {
		t.Fatal(err)
	}
	newer := append([]byte(nil), valid...)
	newer[8] = Version + 1
	flipped := append([]byte(nil), valid...)
	flipped[len(flipped)/2] ^= 0xff
	pcap := []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0}
	pcapng := []byte{0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "offset 0: empty file"},
		{"random bytes", []byte("\x13\x37 definitely not a trace file"), "offset 0: not a nettrace recording"},
		{"tcpdump pcap", pcap, "offset 0: this is a pcap capture (tcpdump?)"},
		{"pcapng", pcapng, "this is a pcapng capture"},
		{"newer version", newer, fmt.Sprintf("offset 8: format version %d is newer than this nettrace reads (%d)", Version+1, Version)},
		{"corrupt record", flipped, "checksum mismatch"},
		{"header only", valid[:headerSize], "ends inside a record"},
	}
	for _, tt := range tests {
		r, err := NewReader("in.ntrace", bytes.NewReader(tt.data))
		if err == nil {
			_, err = readAll(r)
		}
		if err == nil || err == io.EOF || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "in.ntrace: offset ") {
			t.Errorf("%s: error %v, want one naming the file and offset with %q", tt.name, err, tt.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans lines", tt.name)
		}
	}
}

func TestSparseEventsAreCompact(t *testing.T) {
	evs := incident()
	path := record(t, evs, true)
	st, _ := os.Stat(path)
	perEvent := float64(st.Size()) / float64(len(evs))
	if perEvent >= event.RecordSize {
		t.Errorf("%.0f bytes per event: no smaller than the raw record", perEvent)
	}
}
