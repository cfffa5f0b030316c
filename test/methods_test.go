package test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// methodCheck is a point whose methods are compared: the facts it reports
// for the traffic of one lab scenario must not depend on the method.
type methodCheck struct {
	point      string
	candidates []string // the point's methods, in the order they are tried
	scenario   string   // a scenario whose traffic the point observes
	facts      func(r labRun) []string
}

// The points with more than one method and the scenario that exercises
// each: service-paths' connections are DNATed at OUTPUT (nat), re-routed
// after it (route) and carried over vxlan to node 2's endpoint (vxlan);
// syn-overflow's SYNs meet a full listener (syn); snat-missing's replies
// cross every device (dev) and are dropped by the reverse-path filter
// (drop).
var methodChecks = []methodCheck{
	{"nat", []string{"fentry", "kprobe", "netfilter"}, "service-paths", stepsTo("nat", pathsService, 80, withoutRoute)},
	{"route", []string{"fentry", "kprobe", "tp_btf"}, "service-paths", stepsTo("route", pathsService, 80, step)},
	{"vxlan", []string{"fentry", "kprobe", "tp_btf"}, "service-paths", stepsTo("vxlan", pathsService, 80, step)},
	{"syn", []string{"fentry", "kprobe", "tp_btf", "sock_diag"}, "syn-overflow", stepsTo("syn", node, lab.NodePort, outcome)},
	{"drop", []string{"tp_btf", "tracepoint"}, "snat-missing", stepsTo("drop", snatService, 80, step)},
	{"dev", []string{"tp_btf", "tracepoint"}, "snat-missing", stepsTo("dev", snatService, 80, step)},
}

func pathsService(f lab.Family) string { return f.PathsService }
func snatService(f lab.Family) string  { return f.SNATService }
func node(f lab.Family) string         { return f.Node1 }

// step is a step as a fact: where, which packet, what happened.
func step(p output.JSONPacket, s output.JSONStep) string {
	return fmt.Sprintf("%s %s %s %s %s: %s", p.Direction, p.Label, s.Netns, s.Dev, s.Hook, s.What)
}

// routeVia is a NAT step's route: the netfilter method, which runs after
// OUTPUT's re-route, names it; fentry and kprobe return with NAT's
// function, before it, and leave it to the route point (compared apart).
var routeVia = regexp.MustCompile(`, route via \S+$`)

func withoutRoute(p output.JSONPacket, s output.JSONStep) string {
	return routeVia.ReplaceAllString(step(p, s), "")
}

// queueLength is the accept queue's length beside a SYN's outcome: the
// kernel methods read it as the SYN arrives, sock_diag some time after.
var queueLength = regexp.MustCompile(` \(accept queue \d+/\d+\)`)

// outcome is a SYN's drop at the listener. The methods see the SYN at
// different places (tcp_conn_request, consume_skb, INPUT for sock_diag);
// sock_diag, the last resort, judges a SYN queued on a clock, which may
// leave it undecided, so only drops are compared.
func outcome(p output.JSONPacket, s output.JSONStep) string {
	if !strings.Contains(s.What, ": dropped") {
		return ""
	}
	return fmt.Sprintf("%s %s %s: %s", p.Direction, p.Label, s.Netns, queueLength.ReplaceAllString(s.What, ""))
}

// methodsAttaching forces each given point=method at once and returns
// those that attached on this kernel.
func methodsAttaching(t *testing.T, forced map[string]string) map[string]string {
	t.Helper()
	var args []string
	for p, m := range forced {
		args = append(args, "--method", p+"="+m)
	}
	r := runProbes(t, args...)
	attached := map[string]string{}
	for _, s := range r.Points {
		if m, ok := forced[s.Point]; ok && string(s.Method) == m {
			attached[s.Point] = m
		}
	}
	return attached
}

// clientPort matches a port other than the scenarios' services and
// endpoints: the clients' and the masquerade's, which differ from run to
// run.
var clientPort = regexp.MustCompile(`:(\d+)\b`)

func maskClientPorts(fact string) string {
	return clientPort.ReplaceAllStringFunc(fact, func(port string) string {
		switch port {
		case ":80", fmt.Sprintf(":%d", lab.PodPort), fmt.Sprintf(":%d", lab.NodePort):
			return port
		}
		return ":*"
	})
}

// hostVeth matches the bridge plugin's names of the pods' veths' node
// ends.
var hostVeth = regexp.MustCompile(`\bveth[0-9a-f]{8}\b`)

// maskHostVeths names a pod's veth by its pod: the bridge plugin names it
// at random, differently in each run compared.
func (r labRun) maskHostVeths(fact string) string {
	return hostVeth.ReplaceAllStringFunc(fact, func(dev string) string {
		if pod, ok := r.hostVeths[dev]; ok {
			return "veth(" + pod + ")"
		}
		return dev
	})
}

// stepsTo returns the steps a point added to the handshakes of the
// connections to a service (its address in the run's family and its
// port), each rendered as a fact, one string per distinct fact, client
// ports masked.
func stepsTo(point string, service func(lab.Family) string, port uint16, fact func(output.JSONPacket, output.JSONStep) string) func(r labRun) []string {
	return func(r labRun) []string {
		dst := service(r.family)
		var facts []string
		for _, fl := range r.flows {
			if fl.Tuple == nil || fl.Tuple.Dst != dst || fl.Tuple.Dport != port {
				continue
			}
			for _, p := range fl.Packets {
				// How a connection ends (FIN or RST, how many ACKs) depends
				// on timing under load, not on the method: the handshake's
				// packets, each translated both ways, are compared.
				if p.Label != "SYN" && p.Label != "SYN-ACK" {
					continue
				}
				for _, s := range p.Steps {
					if f := fact(p, s); s.Point == point && f != "" {
						facts = append(facts, maskClientPorts(r.maskHostVeths(f)))
					}
				}
			}
		}
		return distinct(facts)
	}
}

// distinct sorts xs and removes repeats.
func distinct(xs []string) []string {
	slices.Sort(xs)
	return slices.Compact(xs)
}

// Where a kernel offers more than one method for a point, every method
// reports the same facts for the same traffic, under the busy lab's
// background traffic with every namespace watched: the NAT hooks'
// translations, the re-route after the DNAT, the vxlan hop, the devices
// crossed, a SYN's outcome at a full listener and its drop. Round i forces
// each point's i-th method that attaches here, so that one run compares
// several points; every run must also pass its scenario's own check. A
// point with one method on this kernel is skipped: CI's kernel offers one
// method for most points; the VM kernels offer several.
func TestMethodsReportTheSameFacts(t *testing.T) {
	// facts[point][method] as reported in that method's round.
	facts := map[string]map[string][]string{}
	for round := 0; ; round++ {
		forced := map[string]string{}
		for _, c := range methodChecks {
			if round < len(c.candidates) {
				forced[c.point] = c.candidates[round]
			}
		}
		if len(forced) == 0 {
			break
		}
		attached := methodsAttaching(t, forced)
		// Every point of the round is forced in each run: a method may need
		// another point's (syn's tp_btf sees SYN-ACKs with nat's netfilter
		// programs).
		var args, names []string
		for _, c := range methodChecks {
			if m, ok := attached[c.point]; ok {
				args = append(args, "--method", c.point+"="+m)
				names = append(names, c.point+"="+m)
			}
		}
		for _, sc := range scenarioChecks {
			compared := slices.ContainsFunc(methodChecks, func(c methodCheck) bool {
				_, ok := attached[c.point]
				return ok && c.scenario == sc.scenario
			})
			if !compared {
				continue
			}
			t.Run(sc.scenario+"/"+strings.Join(names, ","), func(t *testing.T) {
				r := runLab(t, sc.scenario, "", runOptions{noise: true, allNetns: true}, append(args, "--ring-size", "67108864")...)
				// A scenario without a twin is a healthy one.
				sc.check(t, r.inLab(t).withoutTrueFaults(t), !sc.twins)
				for _, c := range methodChecks {
					if m, ok := attached[c.point]; ok && c.scenario == sc.scenario {
						if facts[c.point] == nil {
							facts[c.point] = map[string][]string{}
						}
						facts[c.point][m] = c.facts(r)
					}
				}
			})
		}
	}
	for _, c := range methodChecks {
		t.Run(c.point, func(t *testing.T) {
			var methods []string
			for _, m := range c.candidates {
				if _, ok := facts[c.point][m]; ok {
					methods = append(methods, m)
				}
			}
			if len(methods) < 2 {
				t.Skipf("%s: one method on this kernel (%v): nothing to compare", c.point, methods)
			}
			first := methods[0]
			want := facts[c.point][first]
			if len(want) == 0 {
				t.Errorf("%s=%s reported nothing on %s's connections", c.point, first, c.scenario)
			}
			t.Logf("%s=%s reported:\n%s", c.point, first, strings.Join(want, "\n"))
			for _, m := range methods[1:] {
				got := facts[c.point][m]
				if !slices.Equal(got, want) {
					t.Errorf("%s: %s and %s differ\nonly %s: %q\nonly %s: %q", c.point, first, m, first, missing(want, got), m, missing(got, want))
				}
			}
		})
	}
}

// missing lists the strings of a that b lacks.
func missing(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
