package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/nettrace-dev/nettrace/internal/engine"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/filter"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// partialError marks a run whose input was cut off or corrupt: the output
// covers what was readable (exit code 3).
type partialError struct{ error }

// splitArgs separates the recordings from the filter words that follow
// them. An argument is a recording when it is a file, standard input
// ("-"), or looks like one (recordingName): a mistyped file name is then
// reported as missing, not as a filter.
func splitArgs(args []string) (files []string, expr string, err error) {
	for i, a := range args {
		if _, serr := os.Stat(a); a == stdinName || serr == nil || recordingName.MatchString(a) {
			files = append(files, a)
			continue
		}
		if len(files) == 0 {
			return nil, "", usageError{fmt.Errorf("%s: no such recording (name the recordings first, then the filter)", a)}
		}
		return files, strings.Join(args[i:], " "), checkRecordingNames(files)
	}
	if len(files) == 0 {
		return nil, "", usageError{errors.New("name at least one recording")}
	}
	return files, "", checkRecordingNames(files)
}

// streamErr reports what cut a stream short, after its output.
func streamErr(s *trace.Stream) error {
	if len(s.Errs) == 0 {
		return nil
	}
	err := errors.Join(s.Errs...)
	for _, e := range s.Errs {
		if !errors.Is(e, trace.ErrTruncated) && !errors.Is(e, trace.ErrNoEnd) {
			return err
		}
	}
	return partialError{err}
}

func newReplayCommand(g *globalFlags) *cobra.Command {
	var format string
	var timelines output.Timelines
	var events bool
	var flowIdle time.Duration
	var maxFlows, maxPackets int
	cmd := &cobra.Command{
		Use:   "replay FILE... [FILTER]",
		Short: "Replay recordings into the same timelines and explanations as the live run",
		Long: `replay reads recordings made with record or watch -w and shows the same
flows and explanations, on any machine: no root, no BPF, any kernel. Several
recordings (from several nodes) replay as one stream ordered by wall-clock
time. FILTER narrows the replay as watch's filter would have.

FILE - reads a recording from standard input.

A recording cut off while it was written (crash, full disk) replays up to
its last complete record; replay then says where it ends and exits with 3.

` + exitCodesHelp,
		Example: `  nettrace replay incident.ntrace
  nettrace replay --timelines all incident.ntrace 'port 80'
  nettrace replay node1.ntrace node2.ntrace -o json 'host 10.96.0.10'
  nettrace replay node1.ntrace node2.ntrace -o html > incident.html   # open it in a browser
  ssh node1 cat /var/tmp/node.ntrace | nettrace replay -`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if err := checkFormat(format, events); err != nil {
				return err
			}
			if err := checkFlowFlags(flowIdle, maxFlows, maxPackets); err != nil {
				return err
			}
			names, expr, err := splitArgs(args)
			if err != nil {
				return err
			}
			prog, err := filter.Compile(expr)
			if err != nil {
				return usageError{err}
			}
			files, named, done, err := readableInputs(names)
			if err != nil {
				return err
			}
			defer done()
			s, skews, closeAll, err := engine.OpenRecordings(files)
			if err != nil {
				return named(err)
			}
			defer closeAll()
			logGaps(log, s, named)
			logSkews(log, skews)
			o := engine.Options{Format: format, Timelines: timelines, Events: events, FlowIdle: flowIdle, MaxFlows: maxFlows, MaxPackets: maxPackets,
				Colour: colourOn(os.Stdout), Clocks: skews, Summarize: g.summarize(log)}
			if err := engine.Replay(s, prog, o); err != nil {
				return named(err)
			}
			return named(streamErr(s))
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&format, "output", "o", "text", formatHelp)
	timelinesFlag(fl, &timelines)
	eventsFlag(fl, &events)
	fl.DurationVar(&flowIdle, "flow-timeout", flow.DefaultConfig.Idle, "a flow ends (and is explained) after this long without events (a connection whose sockets all closed: 1s, or this if shorter)")
	fl.IntVar(&maxFlows, "max-flows", flow.DefaultConfig.MaxFlows, "flows kept at once; past it the oldest ends early (counted)")
	fl.IntVar(&maxPackets, "max-packets", flow.DefaultConfig.MaxPackets, "packets kept per flow; later ones are counted, not kept")
	return cmd
}

// formatHelp describes -o.
const formatHelp = "output format: text, json, or html (one page, written at the end: each flow with a finding drawn as a sequence diagram)"

// checkFormat checks -o, and that --events goes with a format that shows
// events as they come.
func checkFormat(format string, events bool) error {
	switch {
	case format != "text" && format != "json" && format != "html":
		return usageError{fmt.Errorf("-o %q: want text, json or html", format)}
	case format == "html" && events:
		return usageError{errors.New("--events shows events as they come, in text or json; -o html draws the flows at the end")}
	}
	return nil
}

// logGaps warns of the parts missing between the parts of a split
// recording given: the flows open across a gap lack what it held.
func logGaps(log zerolog.Logger, s *trace.Stream, named func(error) error) {
	for _, g := range s.Gaps() {
		log.Warn().Msg(named(errors.New(g)).Error() + ": the flows open then lack what those parts held")
	}
}

// logSkews says how each recording's clock was placed against the first's,
// and between which bounds the packets seen on both put it.
func logSkews(log zerolog.Logger, skews []trace.ClockSkew) {
	for i, k := range skews {
		if i == 0 {
			continue
		}
		if k.Packets == 0 {
			log.Warn().Str("host", k.Host).Msg("clock not aligned: no packet seen both there and by the recordings aligned before it; its times are its own")
			continue
		}
		ev := log.Info().Str("host", k.Host).Dur("offset", k.Offset).Int("packets", k.Packets)
		if k.HasLower {
			ev = ev.Dur("at_least", k.Lower)
		}
		if k.HasUpper {
			ev = ev.Dur("at_most", k.Upper)
		}
		ev.Msg("clock aligned")
	}
}
