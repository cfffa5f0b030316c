package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/service"
)

// A scrape shows the findings by rule, namespace and pod (a deleted pod
// by its name alone, a finding without a pod by its Service's namespace),
// the records lost and shed by point, the flows incomplete and the
// process's own CPU and memory; a count that cannot be read fails its
// metric, not the scrape.
func TestScrape(t *testing.T) {
	s, err := Listen("127.0.0.1:0", Counts{
		Lost:       func() (map[string]uint64, error) { return map[string]uint64{"nat": 3}, nil },
		Shed:       func() (map[string]uint64, error) { return nil, errors.New("map gone") },
		Incomplete: func() uint64 { return 2 },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := netip.MustParseAddr("10.244.1.2")
	for _, fd := range []*explain.Finding{
		{Rule: "syn-dropped-at-listener", Pods: []explain.Pod{{Address: a, Name: "shop/web-1"}}},
		{Rule: "syn-dropped-at-listener", Pods: []explain.Pod{{Address: a, Name: "shop/web-1, deleted at 05:40:12 UTC"}}},
		{Rule: "no-endpoints", Service: &service.Service{Namespace: "shop", Name: "web"}},
	} {
		s.Found(fd)
	}
	resp, err := http.Get("http://" + s.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`nettrace_findings_total{namespace="shop",pod="web-1",rule="syn-dropped-at-listener"} 2`,
		`nettrace_findings_total{namespace="shop",pod="",rule="no-endpoints"} 1`,
		`nettrace_records_lost_total{point="nat"} 3`,
		`nettrace_flows_incomplete_total 2`,
		"process_cpu_seconds_total", "process_resident_memory_bytes",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "nettrace_records_shed_total{") {
		t.Errorf("status %d with an unreadable count; body:\n%s", resp.StatusCode, body)
	}
}
