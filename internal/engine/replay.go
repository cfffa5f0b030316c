package engine

import (
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/filter"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// OpenRecordings opens recordings as one stream ordered by wall-clock
// time, the clocks of several hosts aligned by the packets they saw pass
// between them (skews says what was found of each); closeAll closes them.
func OpenRecordings(files []string) (s *trace.Stream, skews []trace.ClockSkew, closeAll func(), err error) {
	var readers []*trace.Reader
	closeAll = func() {
		for _, r := range readers {
			r.Close()
		}
	}
	for _, f := range files {
		r, err := trace.Open(f)
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		readers = append(readers, r)
	}
	s, skews, err = trace.NewAlignedStream(readers, flow.WireID)
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	return s, skews, closeAll, nil
}

// StreamNames are the names a stream's recordings keep for the renderers:
// namespaces, drop reasons, kernel symbols and wall-clock time.
func StreamNames(s *trace.Stream) output.Names {
	n := output.Names{DropReason: s.ReasonName, Symbol: s.SymbolName, Netns: s.NetnsName, Wall: s.Wall}
	if s.Merged() {
		n.Host = s.NetnsHost
	}
	return n
}

// StreamSources are what a stream's recordings keep for the rules: those
// names, rulesets, rule traces, and pod and node addresses.
func StreamSources(s *trace.Stream) explain.Sources {
	return explain.Sources{Names: s, Rulesets: s.Ruleset, RuleTraces: s.RuleTrace, Pods: s.PodAddresses, Nodes: s.NodeAddresses, Services: s.ServiceFrontends}
}

// replayTickEvery is how many events replay takes between ticks when the
// recording has none of its run's (trace.Meta.Ticks): flows end by event
// time.
const replayTickEvery = 4096

// Replay feeds a stream's events, narrowed by prog as watch's filter would
// have narrowed them, through a pipeline made with o (its names and losses
// are the stream's), and finishes it. It ends idle flows where the run did
// when the recording says where (trace.Stream.Ticks).
func Replay(s *trace.Stream, prog *filter.Program, o Options) error {
	o.Names, o.Sources = StreamNames(s), StreamSources(s)
	var marks StreamMarks
	if s.CountsLosses() {
		// As the live run decided: a flow's completeness once its losses
		// are counted, as the recording says they were, where it says so.
		o.Losses = &flow.Losses{}
		marks.Loss = o.Losses.Add
	}
	o.CrossHost = s.Merged()
	p := New(o)
	marks.Tick = p.Tick
	follow := filter.NewFollower(prog)
	ticks := s.Ticks()
	var first, last uint64
	n := 0
	for e := range ReadAhead(s, marks) {
		if first == 0 {
			first = e.Time
		}
		last = e.Time
		if follow.Follow(e, p.Event) {
			p.Event(e)
		}
		if !ticks && n%replayTickEvery == 0 {
			p.Tick(e.Time)
		}
		n++
		if p.err != nil {
			return p.err
		}
	}
	p.about = output.About{Recordings: s.Recordings(), Namespaces: s.NetnsNames()}
	p.Finish(s.Lost(), s.Shed(), time.Duration(last-first))
	return p.err
}
