package engine

import (
	"bufio"
	"io"
	"os"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
)

// sink is where a pipeline's output goes: event lines, flows and the
// summary, in the format asked for, on stdout.
type sink struct {
	out io.Writer
	// buffered holds what is written as events come, until flush.
	buffered *bufio.Writer
	w        output.Writer    // nil: nothing on stdout (record)
	jw       *jsonLines       // JSON with events among the flows
	jsonOut  bool             // -o json
	page     *output.HTMLPage // -o html: written at the end
	// brief, when healthy flows are shown as one line, bounds how many
	// such lines are written a second.
	brief *briefLines
	// writeErr is the first error of writing flows on their goroutine.
	writeErr error
}

// outBuffer is how much output is held between flushes: about a tick's
// worth of events on a busy node.
const outBuffer = 256 << 10

// newSink makes the sink o asks for, and what gives each goroutine that
// renders flows a renderer of its own (nil: none is shown).
func newSink(o Options) (*sink, func() flowRenderer) {
	k := &sink{out: o.Stdout}
	if k.out == nil {
		k.out = os.Stdout
	}
	out := k.out
	if o.Events && o.Format == "text" {
		// Events are written as they come, one to a few hundred bytes each:
		// a write each would make the reader wait on stdout's reader. They
		// reach it within a tick (flush).
		k.buffered = bufio.NewWriterSize(k.out, outBuffer)
		out = k.buffered
	}
	switch o.Format {
	case "json":
		k.jsonOut = true
		if o.Events {
			// Event lines are converted and encoded on goroutines of
			// their own (jsonLines); flows take their place among them.
			k.jw = newJSONLines(out, o.Names, o.Timelines)
			k.w = k.jw
			return k, nil
		}
		flows := output.JSONFlows{Names: o.Names, Timelines: o.Timelines}
		return k, func() flowRenderer { return flows }
	case "html":
		k.page = output.NewHTMLPage()
		flows := &output.HTMLFlows{Names: o.Names, All: o.Timelines == output.TimelinesAll}
		return k, func() flowRenderer { return flows.Copy() }
	case "text":
		text := output.NewText(out, o.Names)
		text.Colour = o.Colour
		text.Timelines = o.Timelines
		if o.Timelines == output.TimelinesBrief {
			k.brief = &briefLines{}
		}
		k.w = text
		return k, func() flowRenderer { return text.Copy() }
	}
	return k, nil
}

// write writes b to stdout, keeping the first error.
func (k *sink) write(b []byte) {
	if len(b) == 0 {
		return
	}
	if _, err := k.out.Write(b); err != nil && k.writeErr == nil {
		k.writeErr = err
	}
}

// writeFlow writes a rendered flow's text, unless the brief lines' bound
// leaves a healthy flow out.
func (k *sink) writeFlow(y renderedFlow) {
	if k.page != nil {
		k.page.Add(y.id, y.finding, y.text, y.outcome)
		return
	}
	if y.text == nil {
		return
	}
	if k.brief != nil {
		k.write(k.brief.held(time.Now(), y.rule != ""))
		if y.rule == "" && !k.brief.allow() {
			return
		}
	}
	k.write(y.text)
}

// flush hands the output held so far to stdout.
func (k *sink) flush() error {
	var err error
	if k.buffered != nil {
		err = k.buffered.Flush()
	}
	if k.jw != nil {
		k.jw.Flush()
	}
	return err
}
