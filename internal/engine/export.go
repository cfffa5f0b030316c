package engine

import (
	"io"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// exportExpireEvery is how many events the export's reading takes between
// ending idle flows: a recording has no clock but its own.
const exportExpireEvery = 4096

// StepNotes correlates a recording into flows, explains each as replay
// explains them, and returns what each report says of its packets' steps:
// the packet's id, and the netfilter rules of a NAT step. The pcapng export
// gives them to Wireshark.
func StepNotes(s output.EventSource, sources explain.Sources) (output.StepNotes, error) {
	notes := output.StepNotes{Packets: map[output.StepKey]uint64{}, NATRules: map[output.StepKey][]explain.NetfilterRule{}}
	c := flow.New(flow.DefaultConfig)
	sources.SNATs = c.SNATs()
	done := func(f *flow.Flow) {
		if len(f.Packets) == 0 {
			return
		}
		r := explain.NewReport(f, sources, explain.Detail{NATRules: explain.AllFlows})
		for i, p := range f.Packets {
			rp := &r.Packets[i]
			for k := range p.Events {
				step := output.StepOf(&p.Events[k])
				notes.Packets[step] = rp.ID
				if rules := rp.Steps[k].NATRules; len(rules) > 0 {
					notes.NATRules[step] = rules
				}
			}
		}
	}
	var e event.Event
	for n := 0; ; n++ {
		err := s.Next(&e)
		if err == io.EOF {
			break
		}
		if err != nil {
			return output.StepNotes{}, err
		}
		c.Add(&e, done)
		if n%exportExpireEvery == 0 {
			c.Expire(e.Time, done)
		}
	}
	c.Flush(done)
	return notes, nil
}
