package cli

import (
	"fmt"
	"strings"

	"github.com/nettrace-dev/nettrace/internal/engine"
	"github.com/nettrace-dev/nettrace/internal/metrics"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// tellFindings makes each finding one structured log line (Info when the
// run prints no flows, as record does: the log is where a cluster looks;
// Debug beside watch's own output) and counts it in the metrics, and logs
// each flight file with the flows of the findings it holds: `kubectl logs`
// then says which file to fetch.
func (c *capture) tellFindings(o *engine.Options) {
	level := c.log.Debug
	if c.f.format == "none" {
		level = c.log.Info
	}
	o.Found = func(x engine.Found) {
		fd := x.Finding
		if c.metrics != nil {
			c.metrics.Found(fd)
		}
		e := level().Str("rule", fd.Rule).Str("severity", fd.Severity).Uint64("flow", x.Flow).Time("flow_start", c.meta.Wall(x.Start))
		if len(fd.Pods) > 0 {
			e = e.Str("pod", fd.Pods[0].Name)
		}
		if fd.Service != nil {
			e = e.Str("service", fd.Service.Namespace+"/"+fd.Service.Name)
		}
		e.Msg(fd.Summary)
	}
}

// flightWritten logs a flight file.
func (c *capture) flightWritten(path string, flows []uint64) {
	c.log.Info().Str("file", path).Str("flows", joinNumbers(flows)).Msg("flight recorder: file written")
}

func joinNumbers(ns []uint64) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

// serveMetrics serves the run's metrics at --metrics, once the pipeline
// that counts incomplete flows exists.
func (c *capture) serveMetrics(p *engine.Pipeline) error {
	if c.f.metrics == "" {
		return nil
	}
	named := func(read func() (map[event.Point]uint64, error)) func() (map[string]uint64, error) {
		return func() (map[string]uint64, error) {
			m, err := read()
			return engine.PointNames(m), err
		}
	}
	m, err := metrics.Listen(c.f.metrics, metrics.Counts{Lost: named(c.tr.Lost), Shed: named(c.tr.Shed), Incomplete: p.Incomplete})
	if err != nil {
		return err
	}
	c.metrics = m
	c.closers = append(c.closers, func() { m.Close() })
	c.log.Info().Str("addr", c.f.metrics).Msg("serving metrics at /metrics")
	return nil
}
