// Package metrics serves what an always-on recorder's operators alert on,
// in Prometheus' exposition format: the findings by rule and by the
// namespace and pod they name, the records the kernel lost or shed, the
// flows incomplete for it, and nettrace's own CPU and memory (the
// standard process metrics). A finding's details are in the log line it
// gets and in its flight file; a metric only says that one came, and
// where.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nettrace-dev/nettrace/pkg/explain"
)

// Counts are what the run counts, read at each scrape (on the server's
// goroutine).
type Counts struct {
	// Lost and Shed are the records the kernel did not deliver, by point
	// name: lost to a full ring buffer, or shed to keep room for evidence.
	Lost, Shed func() (map[string]uint64, error)
	// Incomplete is the flows records were lost around.
	Incomplete func() uint64
}

// Server serves a run's metrics over HTTP at /metrics.
type Server struct {
	findings *prometheus.CounterVec
	srv      *http.Server
	addr     net.Addr
	done     chan error
}

// Listen starts serving at addr (host:port; ":9476" on every address).
func Listen(addr string, c Counts) (*Server, error) {
	reg := prometheus.NewRegistry()
	s := &Server{
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nettrace_findings_total",
			Help: "Findings, by rule and by the Kubernetes namespace and pod the finding names first (empty when it names none).",
		}, []string{"rule", "namespace", "pod"}),
		done: make(chan error, 1),
	}
	reg.MustRegister(s.findings,
		undelivered{c.Lost, prometheus.NewDesc("nettrace_records_lost_total", "Records the kernel could not deliver (the ring buffer was full), by point.", []string{"point"}, nil)},
		undelivered{c.Shed, prometheus.NewDesc("nettrace_records_shed_total", "Records the kernel did not send to keep room for evidence of failure, by point.", []string{"point"}, nil)},
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "nettrace_flows_incomplete_total",
			Help: "Flows that records were lost around: nothing is concluded from what they lack.",
		}, func() float64 { return float64(c.Incomplete()) }),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	// A count that cannot be read is left out; the others are served.
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	s.srv, s.addr = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln.Addr()
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is where the server listens.
func (s *Server) Addr() net.Addr { return s.addr }

// Found counts a finding.
func (s *Server) Found(fd *explain.Finding) {
	namespace, pod := where(fd)
	s.findings.WithLabelValues(fd.Rule, namespace, pod).Inc()
}

// where is the namespace and pod a finding names first: its first pod,
// else its Service's namespace.
func where(fd *explain.Finding) (namespace, pod string) {
	if len(fd.Pods) > 0 {
		// A pod deleted lately is named with when it went: the labels
		// keep its name alone.
		name, _, _ := strings.Cut(fd.Pods[0].Name, ",")
		namespace, pod, _ = strings.Cut(name, "/")
		return namespace, pod
	}
	if fd.Service != nil {
		return fd.Service.Namespace, ""
	}
	return "", ""
}

// Close stops serving.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// undelivered collects a per-point count of records read at each scrape.
type undelivered struct {
	read func() (map[string]uint64, error)
	desc *prometheus.Desc
}

func (u undelivered) Describe(ch chan<- *prometheus.Desc) { ch <- u.desc }

func (u undelivered) Collect(ch chan<- prometheus.Metric) {
	counts, err := u.read()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(u.desc, err)
		return
	}
	for point, n := range counts {
		ch <- prometheus.MustNewConstMetric(u.desc, prometheus.CounterValue, float64(n), point)
	}
}
