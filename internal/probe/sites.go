package probe

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf/link"
)

// site is a tracepoint several points observe with their tracepoint
// methods. One program (bpf/sites.bpf.c) runs there for all of them, each
// point's handler enabled by a constant: a packet pays one program run per
// tracepoint, however many points watch it.
type site struct {
	program    string
	tracepoint string
}

var sites = map[string]site{
	"xmit":    {program: "site_xmit", tracepoint: "net_dev_start_xmit"},
	"consume": {program: "site_consume", tracepoint: "consume_skb"},
}

// siteHandler is a point's handler enabled in a site, by the constant
// on_<name>.
type siteHandler struct {
	point, name, site string
}

// attachSites loads and attaches each site some point chose, with the
// handlers of the points that chose it. A site that fails takes its points
// down with it: they have no other program at that tracepoint.
func (t *Tracer) attachSites() {
	names := make([]string, 0, len(t.siteHandlers))
	for name := range t.siteHandlers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		handlers := t.siteHandlers[name]
		start := time.Now()
		err := t.attachSite(sites[name], handlers)
		t.opts.Log.Debug().Str("site", name).Float64("ms", msSince(start)).Err(err).Msg("site attached")
		if err != nil {
			for _, h := range handlers {
				t.fail(h.point, fmt.Errorf("%s: %w", sites[name].tracepoint, err))
			}
		}
	}
}

func (t *Tracer) attachSite(s site, handlers []siteHandler) error {
	load := loadSites
	if t.gateOn() {
		load = loadSitesGate
	}
	spec, err := load()
	if err != nil {
		return fmt.Errorf("load BPF object: %w", err)
	}
	if err := t.configure(spec); err != nil {
		return err
	}
	for _, h := range handlers {
		if err := spec.Variables["on_"+h.name].Set(true); err != nil {
			return fmt.Errorf("enable %s: %w", h.name, err)
		}
	}
	for name := range spec.Programs {
		if name != s.program {
			delete(spec.Programs, name)
		}
	}
	coll, err := t.newCollection(spec)
	if err != nil {
		return t.explain(MethodTpBTF, err)
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: coll.Programs[s.program]})
	if err != nil {
		coll.Close()
		return t.explain(MethodTpBTF, err)
	}
	t.colls = append(t.colls, coll)
	t.links = append(t.links, l)
	points := make([]string, len(handlers))
	for i, h := range handlers {
		points[i] = h.point
	}
	t.attachments = append(t.attachments, Attachment{Point: strings.Join(points, ","), Program: s.program, Method: MethodTpBTF, Target: s.tracepoint})
	return nil
}

// fail marks a point that chose a method as unavailable after all.
func (t *Tracer) fail(point string, err error) {
	for i := range t.statuses {
		s := &t.statuses[i]
		if s.Point == point && s.Active() {
			s.Skipped = append(s.Skipped, Attempt{Method: s.Method, Reason: err.Error()})
			s.Method, s.Target, s.Note = "", "", ""
		}
	}
}
