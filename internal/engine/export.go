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

// NATStepRules correlates a recording into flows, explains each as replay
// explains them, and returns the netfilter rules each report names for
// its NAT steps: what the pcapng export comments them with.
func NATStepRules(s output.EventSource, sources explain.Sources) (output.NATRules, error) {
	rules := output.NATRules{}
	c := flow.New(flow.DefaultConfig)
	sources.SNATs = c.SNATs()
	done := func(f *flow.Flow) {
		if len(f.Packets) == 0 {
			return
		}
		r := explain.NewReport(f, sources, explain.Detail{NATRules: explain.AllFlows})
		for i, p := range f.Packets {
			for k, s := range r.Packets[i].Steps {
				if len(s.NATRules) > 0 {
					rules[output.StepOf(&p.Events[k])] = s.NATRules
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
			return nil, err
		}
		c.Add(&e, done)
		if n%exportExpireEvery == 0 {
			c.Expire(e.Time, done)
		}
	}
	c.Flush(done)
	return rules, nil
}
