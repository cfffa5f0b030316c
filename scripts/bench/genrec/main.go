// Command genrec writes a synthetic recording for replay benchmarks: the
// five incidents and their healthy twins (shaped like the lab's real
// runs), repeated as distinct connections until it holds N events.
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
	flag.Parse()
	var seqs [][]event.Event
	for _, healthy := range []bool{false, true} {
		seqs = append(seqs, fixture.SNATMissing(healthy), fixture.SYNOverflow(healthy), fixture.StaleHostPort(healthy), fixture.Hairpin(healthy))
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
