package trace

import (
	"errors"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/service"
)

// manyEvents is incident 1 repeated as n distinct connections.
func manyEvents(n int) []event.Event {
	var out []event.Event
	for c := 0; c < n; c++ {
		for _, e := range fixture.SNATMissing(false) {
			fixture.Repeat(&e, c, 50_000_000)
			out = append(out, e)
		}
	}
	return out
}

// A recording split into small files: each file is a whole recording,
// only the newest are kept, and the files kept replay as one recording
// with every event they hold, in order.
func TestRecorderRotates(t *testing.T) {
	events := manyEvents(200)
	nodes := map[netip.Addr]string{netip.MustParseAddr("172.20.0.1"): "node-1"}
	web := service.Service{Namespace: "shop", Name: "web", Port: "http", Address: service.NodePort}
	services := service.NewTable([]service.Frontend{{Protocol: 6, Port: 30080, Service: web}})
	atNode := netip.MustParseAddrPort("172.20.0.1:30080")
	for _, tc := range []struct {
		name  string
		files int
	}{{"all kept", 0}, {"newest 3 kept", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.ntrace")
			const fileBytes = 16 << 10
			r, err := NewRecorder(path, Meta{Nettrace: "test", Host: "n1", DropReasons: fixture.ReasonNames}, fixture.Context{Nodes: nodes, Services: services},
				RecordOptions{FileBytes: fileBytes, Files: tc.files})
			if err != nil {
				t.Fatal(err)
			}
			for i := range events {
				r.Event(&events[i])
				if i%100 == 0 {
					r.Flush()
				}
			}
			st, err := r.Close(Summary{Lost: map[string]uint64{"nat": 2}})
			if err != nil {
				t.Fatal(err)
			}
			if st.Events != uint64(len(events)) || st.Written != st.Events || st.Unwritten != 0 {
				t.Fatalf("stats %+v, want all %d events written", st, len(events))
			}
			files, _ := filepath.Glob(path + ".*")
			if tc.files > 0 && len(files) != tc.files || tc.files == 0 && len(files) < 5 {
				t.Fatalf("%d files: %v", len(files), files)
			}
			var readers []*Reader
			held := 0
			for _, f := range files {
				fi, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() > fileBytes+1024 {
					t.Errorf("%s: %d bytes, past the bound of %d by more than a record", f, fi.Size(), fileBytes)
				}
				rd, err := Open(f)
				if err != nil {
					t.Fatal(err)
				}
				got, err := readAll(rd)
				if err != io.EOF {
					t.Errorf("%s does not replay alone to its end: %v", f, err)
				}
				if last := rd.Summary != nil && !rd.Summary.Continued; last != (rd.Meta.Part == len(files)+st.Removed()) {
					t.Errorf("%s (part %d): summary %+v", f, rd.Meta.Part, rd.Summary)
				}
				if _, pods := rd.PodAddresses(); !maps.Equal(pods, fixture.PodNames) {
					t.Errorf("%s names pods %v, want %v", f, pods, fixture.PodNames)
				}
				if _, got := rd.NodeAddresses(); !maps.Equal(got, nodes) {
					t.Errorf("%s names nodes %v, want %v", f, got, nodes)
				}
				if _, got := rd.ServiceFrontends(); !slices.Equal(got.Frontends(), services.Frontends()) {
					t.Errorf("%s has Service frontends %+v, want %+v", f, got.Frontends(), services.Frontends())
				}
				held += len(got)
				rd.Close()
				rd, _ = Open(f)
				readers = append(readers, rd)
			}
			if tc.files == 0 && held != len(events) {
				t.Errorf("the files hold %d events, %d were recorded", held, len(events))
			}
			s := NewStream(readers)
			if s.multi {
				t.Fatal("the parts of one recording replay as several")
			}
			var e event.Event
			n, first := 0, len(events)-held
			for ; ; n++ {
				err := s.Next(&e)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if want := events[first+n]; e.Time != want.Time || e.Skb != want.Skb || s.NetnsName(e.Netns) != fixture.NetnsNames[want.Netns] {
					t.Fatalf("event %d of the set: %+v, want %+v", n, e, want)
				}
			}
			if n != held {
				t.Errorf("the set replays %d events, its files hold %d", n, held)
			}
			if pod := s.PodName(netip.MustParseAddr("10.244.2.10")); pod != "default/web-2" {
				t.Errorf("the set names 10.244.2.10's pod %q", pod)
			}
			if _, got := s.NodeAddresses(); !maps.Equal(got, nodes) {
				t.Errorf("the set names nodes %v, want %v", got, nodes)
			}
			_, merged := s.ServiceFrontends()
			if got, found := merged.At(6, atNode, true); !found || got != web {
				t.Errorf("the set names %s's Service %+v (%v), want %+v", atNode, got, found, web)
			}
			if lost := s.Lost()[event.PointNAT]; lost != 2 {
				t.Errorf("lost %d, want the run's 2", lost)
			}
			for _, rd := range readers {
				rd.Close()
			}
		})
	}
}

// BenchmarkRecorderEvent is what recording costs the event path per event
// (encoding into memory; the disk is another goroutine's), split into
// files of 100 MB.
func BenchmarkRecorderEvent(b *testing.B) {
	events := manyEvents(100)
	r, err := NewRecorder(filepath.Join(b.TempDir(), "bench.ntrace"), Meta{Nettrace: "bench", DropReasons: fixture.ReasonNames},
		fixture.Context{}, RecordOptions{FileBytes: 100_000_000})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Event(&events[i%len(events)])
		if i%1000 == 0 {
			r.Flush()
		}
	}
	st, err := r.Close(Summary{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Unwritten), "unwritten")
}
