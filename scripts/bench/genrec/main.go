// Command genrec writes a synthetic recording for replay benchmarks: the
// five incidents and their healthy twins (shaped like the lab's real
// runs), repeated as distinct connections until it holds N events; with
// -failing-every K, the incidents only every K-th round (a node where
// about one connection in 2K fails).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

func main() {
	out := flag.String("o", "bench.ntrace", "recording to write")
	n := flag.Int("n", 1_000_000, "events")
	failingEvery := flag.Int("failing-every", 1, "write the incidents every this many rounds (their healthy twins every round)")
	flag.Parse()
	if *failingEvery < 1 {
		fmt.Fprintln(os.Stderr, "genrec: -failing-every: want at least 1")
		os.Exit(2)
	}
	var failing, healthy [][]event.Event
	for _, h := range []bool{false, true} {
		seqs := [][]event.Event{fixture.SNATMissing(h), fixture.SYNOverflow(h), fixture.StaleHostPort(h), fixture.Hairpin(h)}
		if h {
			healthy = seqs
		} else {
			failing = seqs
		}
	}
	reasons := map[uint32]string{}
	for k, v := range fixture.ReasonNames {
		reasons[k] = v
	}
	w, err := trace.Create(*out, trace.Meta{Nettrace: "genrec", SnapLen: 128, DropReasons: reasons}, fixture.Context{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	packet := make([]byte, 60) // an IPv4 + TCP header's worth
	packet[0] = 0x45
	written := 0
	for c := 0; written < *n; c++ {
		seqs := healthy
		if c%*failingEvery == 0 {
			seqs = append(failing, healthy...)
		}
		for _, seq := range seqs {
			for _, e := range seq {
				// Connection c starts 200 µs after c-1: flows overlap and end
				// as in a busy capture, and a client port comes back only
				// after 4 s, past the flow timeout.
				fixture.Repeat(&e, c, 200_000)
				if e.Skb != 0 {
					e.Packet = packet
				}
				if err := w.Event(&e); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				written++
			}
		}
	}
	if err := w.Close(trace.Summary{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, size := w.Stats()
	fmt.Printf("%s: %d events, %d bytes (%d bytes per event)\n", *out, written, size, size/int64(written))
}
