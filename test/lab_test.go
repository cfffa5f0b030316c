package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// labRun is one scenario brought up, watched while its traffic runs, and
// torn down at cleanup.
type labRun struct {
	outcomes     []lab.Outcome
	noise        *lab.NoiseReport // the background traffic, when it ran
	events       []output.JSONEvent
	flows        []output.JSONFlow
	explanations []output.JSONExplanation
	summary      map[string]any
	// traced says nettrace traced the rules (--rules): findings name their
	// rule as traced, not attributed from the ruleset.
	traced bool
	// native says the scenario's kube-proxy writes native nftables rules
	// (its nftables mode).
	native bool
	// family is the scenario's: its fault, clients and servers.
	family lab.Family
	// hostVeths are the pods' veths' node ends, named at random by the
	// bridge plugin, with their pods (lab.Scenario.HostVeths).
	hostVeths map[string]string
	// insertFailed is each lab namespace's conntrack insert failures at
	// the end of the run (lab.ConntrackInsertFailed).
	insertFailed map[string]uint64
	// nat is how the nat point attached.
	nat attachment
	// warnings are watch's (logWarnings): records lost, programs the
	// kernel skipped.
	warnings []string
	// recording is the run's, removed when the test ends.
	recording string
}

// runOptions say how a scenario is run and watched.
type runOptions struct {
	noise bool // background traffic (lab.Noise) beside the scenario's clients
	// allNetns watches every namespace of the host (--netns all) rather
	// than the lab's.
	allNetns bool
	// noiseConfig replaces lab.DefaultNoise.
	noiseConfig *lab.NoiseConfig
	// clientTimeout replaces the Timeout of the scenario's clients.
	clientTimeout time.Duration
	// launcher runs nettrace with the arguments appended (the built
	// binary when nil).
	launcher []string
}

func runScenario(t *testing.T, name, filter string, watchArgs ...string) labRun {
	t.Helper()
	return runLab(t, name, filter, runOptions{}, watchArgs...)
}

func runLab(t *testing.T, name, filter string, o runOptions, watchArgs ...string) labRun {
	t.Helper()
	sc := upLab(t, name)
	if o.clientTimeout != 0 {
		for i := range sc.Clients {
			sc.Clients[i].Timeout = o.clientTimeout
		}
	}
	dir := t.TempDir()
	// NETTRACE_KEEP_RECORDINGS keeps the recordings of failed runs there,
	// to replay them (nettrace replay) and see what went wrong.
	if keep := os.Getenv("NETTRACE_KEEP_RECORDINGS"); keep != "" {
		dir = keep
	}
	recording := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".ntrace")
	t.Cleanup(func() {
		if !t.Failed() || dir != os.Getenv("NETTRACE_KEEP_RECORDINGS") {
			os.Remove(recording)
			return
		}
		t.Logf("recording kept: %s", recording)
	})
	args := append([]string{"-w", recording}, watchArgs...)
	if o.allNetns {
		args = append(args, "--netns", "all")
	} else {
		for _, ns := range lab.Namespaces() {
			args = append(args, "--netns", ns)
		}
	}
	if filter != "" {
		args = append(args, filter)
	}
	w := startWatchWith(t, o.launcher, args...)
	var noise *lab.NoiseReport
	var noiseErr error
	noiseDone := make(chan struct{})
	if o.noise {
		go func() {
			defer close(noiseDone)
			var rep lab.NoiseReport
			cfg := lab.DefaultNoise
			if o.noiseConfig != nil {
				cfg = *o.noiseConfig
			}
			rep, noiseErr = lab.Noise(context.Background(), cfg)
			noise = &rep
		}()
	} else {
		close(noiseDone)
	}
	outs, err := lab.Traffic(sc)
	<-noiseDone
	if err != nil {
		t.Fatal(err)
	}
	if noiseErr != nil {
		t.Fatalf("noise: %v", noiseErr)
	}
	tr := w.stop(t)
	for _, o := range outs {
		t.Log(o)
	}
	if noise != nil {
		t.Logf("noise: %s", noise)
	}
	for _, x := range tr.explanations {
		t.Logf("%s: %s", x.Rule, x.Summary)
	}
	requireSameReplay(t, recording, tr)
	insertFailed := map[string]uint64{}
	for _, ns := range lab.Namespaces() {
		if insertFailed[ns], err = lab.ConntrackInsertFailed(ns); err != nil {
			t.Fatal(err)
		}
	}
	return labRun{outs, noise, tr.events, tr.flows, tr.explanations, tr.summary, slices.Contains(watchArgs, "--rules"), sc.Nft != nil, sc.Family, sc.HostVeths, insertFailed, tr.attached["nat"], tr.warnings,
		recording}
}

func (r labRun) results() map[lab.Result]int {
	m := map[lab.Result]int{}
	for _, o := range r.outcomes {
		m[o.Result]++
	}
	return m
}

func (r labRun) require(t *testing.T, what string, pred func(e output.JSONEvent) bool) output.JSONEvent {
	t.Helper()
	got := find(r.events, pred)
	if len(got) == 0 {
		t.Fatalf("events (the background's left out):\n%snettrace did not show %s; %s", dump(r.foreground()), what, r.context())
	}
	return got[0]
}

func (r labRun) forbid(t *testing.T, what string, pred func(e output.JSONEvent) bool) {
	t.Helper()
	if got := find(r.events, pred); len(got) > 0 {
		t.Errorf("nettrace showed %s on the healthy path:\n%s", what, dump(got))
	}
}

// explained requires exactly the given rule over the faulty flows, with
// every fact in its summary, and returns its explanations.
func (r labRun) explained(t *testing.T, rule string, facts ...string) []output.JSONExplanation {
	t.Helper()
	var got []output.JSONExplanation
	for _, x := range r.explanations {
		if x.Rule != rule {
			t.Errorf("unexpected finding %s: %s%s", x.Rule, x.Summary, r.flowOf(x))
			continue
		}
		got = append(got, x)
	}
	if len(got) == 0 {
		t.Fatalf("flows (the background's left out):\n%sno %s finding; %s", dump(r.foregroundFlows()), rule, r.context())
	}
	for _, f := range facts {
		if !strings.Contains(got[0].Summary, f) {
			t.Errorf("%s summary lacks %q: %s", rule, f, got[0].Summary)
		}
	}
	return got
}

// healthy requires that no flow got a finding.
func (r labRun) healthy(t *testing.T) {
	t.Helper()
	for _, x := range r.explanations {
		t.Errorf("false positive on the healthy twin: %s: %s%s", x.Rule, x.Summary, r.flowOf(x))
	}
	if len(r.flows) == 0 {
		t.Errorf("no flow reported")
	}
}

// foreground is the run's events but the background traffic's (the
// noise pod's, also inside the tunnel), which would bury a failure's own
// in a busy run.
func (r labRun) foreground() []output.JSONEvent {
	return slices.DeleteFunc(slices.Clone(r.events), func(e output.JSONEvent) bool {
		return background(e.Tuple) || background(e.Inner)
	})
}

// foregroundFlows is the run's flows but the background traffic's.
func (r labRun) foregroundFlows() []output.JSONFlow {
	return slices.DeleteFunc(slices.Clone(r.flows), func(f output.JSONFlow) bool { return background(f.Tuple) })
}

// context says, for a failure message's last line, what the clients saw
// and what the run lost, shed, skipped or held in the kernel: where
// output is cut to its ends, the cause stays in view.
func (r labRun) context() string {
	var b strings.Builder
	fmt.Fprintf(&b, "clients: %v", r.outcomes)
	for _, k := range []string{"lost", "shed", "flows_incomplete", "gate"} {
		if v, ok := r.summary[k]; ok {
			fmt.Fprintf(&b, "; %s: %v", k, v)
		}
	}
	for _, w := range r.warnings {
		fmt.Fprintf(&b, "; warning: %s", w)
	}
	return b.String()
}

// flowOf renders the flow an explanation is about, for failure messages.
func (r labRun) flowOf(x output.JSONExplanation) string {
	for _, f := range r.flows {
		if f.ID == x.Flow.ID {
			return "\nits flow:\n" + dump([]output.JSONFlow{f})
		}
	}
	return ""
}

// reroutedVia says whether a DNATed packet was re-routed out of dev: the
// netfilter method sees the route after the NAT hook re-routed; with
// fentry/kprobe on the NAT function, which returns before the re-route,
// the route point's event of the same packet says it.
func reroutedVia(events []output.JSONEvent, dnat output.JSONEvent, dev string) bool {
	if dnat.OutDev == dev {
		return true
	}
	return len(find(events, func(e output.JSONEvent) bool {
		return e.Point == "route" && e.Skb == dnat.Skb && e.Route != nil && e.Route.Dev == dev
	})) > 0
}

// resetBy finds the client resetting an unexpected SYN-ACK: the tcp
// point's reset where the kernel traces resets sent without a socket
// (6.x), else the reset packet leaving the client.
func (r labRun) resetBy(ns, peer string) bool {
	return len(find(r.events, func(e output.JSONEvent) bool {
		return inNs(e, ns) && e.Tuple.Dst == peer &&
			((e.Point == "tcp" && e.Kind == "rst-sent") || (e.Point != "tcp" && strings.Contains(e.Tuple.Flags, "R")))
	})) > 0
}

func isSYN(e output.JSONEvent) bool { return e.Tuple.Proto == "tcp" && e.Tuple.Flags == "S" }

func inNs(e output.JSONEvent, ns string) bool { return e.Netns == ns }

// twins runs a test for a scenario and its healthy twin.
func twins(t *testing.T, base string, test func(t *testing.T, name string, healthy bool)) {
	for _, healthy := range []bool{false, true} {
		name := base
		if healthy {
			name += "-healthy"
		}
		t.Run(name, func(t *testing.T) { test(t, name, healthy) })
	}
}

func checkSNATMissing(t *testing.T, r labRun, healthy bool) {
	f := r.family
	res := r.results()
	dnat := r.require(t, "the DNAT of the ClusterIP at node 1's OUTPUT", func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode1) && e.Point == "nat" && e.Hook == "OUTPUT" && isSYN(e) && e.Translated &&
			e.Pre.Dst == f.SNATService && e.Tuple.Dst == f.Pod2 && e.Tuple.Dport == lab.PodPort
	})
	if !reroutedVia(r.events, dnat, f.Tunnel) {
		t.Errorf("no re-route out of %s after the DNAT (nat out_dev %q)", f.Tunnel, dnat.OutDev)
	}
	// The scenario's connection, not the background traffic's.
	post := r.require(t, "the SYN at node 1's POSTROUTING", func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode1) && e.Point == "nat" && e.Hook == "POSTROUTING" && isSYN(e) &&
			e.Tuple.Dst == f.Pod2 && e.Tuple.Dport == lab.PodPort
	})
	encap := r.require(t, "the vxlan encapsulation at node 1", func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode1) && e.Point == "vxlan" && e.Kind == "encap" && e.Inner != nil && e.Inner.Dst == f.Pod2 &&
			e.Inner.Dport == lab.PodPort
	})
	if encap.VXLAN.VNI != lab.VNI || encap.VXLAN.Remote != f.Node2 || encap.Dev != "eth0" {
		t.Errorf("encapsulation: VNI %d remote %s on %s", encap.VXLAN.VNI, encap.VXLAN.Remote, encap.Dev)
	}
	if got := find(r.events, func(e output.JSONEvent) bool {
		return e.Point == "vxlan" && inNs(e, lab.NsUnderlay) && e.Kind == "encap"
	}); len(got) > 0 {
		t.Errorf("encapsulation claimed by the underlay router, which only forwards it:\n%s", dump(got))
	}
	// IPv4's rp_filter drops with its own reason; IPv6's is the rpfilter
	// match of ip6tables' raw table.
	reason := "IP_RPFILTER"
	if f.IPv6 {
		reason = "NETFILTER_DROP"
	}
	rpfilter := func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode1) && e.Point == "drop" && e.Drop.Reason == reason && e.Tuple.Src == f.Pod2 && e.Dev == "eth0"
	}
	if !healthy {
		if res[lab.TimedOut] != 1 {
			t.Fatalf("client outcomes %v, want a timeout", res)
		}
		if post.Translated || post.Tuple.Src != f.Node1 || encap.Inner.Src != f.Node1 {
			t.Errorf("the SYN should leave un-SNATed from %s: POSTROUTING %+v, inner %+v", f.Node1, post.Tuple, encap.Inner)
		}
		r.require(t, "the reply dropped by reverse-path filtering on node 1's eth0", rpfilter)
		// The client's retransmitted SYN meets the request node 2's pod
		// already holds, which frees it with no reason: ordinary, and
		// labelled so, not a second fault.
		if !hasPacket(r.flows, func(p output.JSONPacket) bool {
			return p.Label == "SYN" && p.Tuple.Dst == f.SNATService && strings.Contains(p.Ordinary, "retransmitted SYN for a request the listener already holds")
		}) {
			t.Errorf("no retransmitted SYN to %s labelled as consumed by the listener's pending request", f.SNATService)
		}
		r.snatMissingExplained(t, reason)
		return
	}
	if res[lab.Connected] != 1 {
		t.Fatalf("client outcomes %v, want connected", res)
	}
	if !post.Translated || post.Tuple.Src != f.VTEP1 || encap.Inner.Src != f.VTEP1 {
		t.Errorf("the SYN should be SNATed to %s's %s: POSTROUTING %+v, inner %+v", f.Tunnel, f.VTEP1, post.Tuple, encap.Inner)
	}
	r.require(t, "the reply un-DNATed back to the ClusterIP", func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode1) && e.Point == "nat" && e.CT != nil && e.CT.Direction == "reply" &&
			e.Translated && e.Tuple.Src == f.SNATService
	})
	r.forbid(t, "a reverse-path filtering drop", rpfilter)
	r.healthy(t)
}

// snatMissingExplained requires incident 1's finding, with its facts,
// the rule to delete and the one it skipped, its Service and its pod; the
// reply was dropped with reason.
func (r labRun) snatMissingExplained(t *testing.T, reason string) {
	t.Helper()
	f := r.family
	facts := []string{"DNATed to " + f.HostPort(f.Pod2, lab.PodPort), lab.NsNode1 + " OUTPUT",
		f.Tunnel, "VNI 1", "remote VTEP " + f.Node2, "not SNATed", "came back on eth0", reason}
	if f.IPv6 {
		facts = append(facts, `dropped by raw PREROUTING rule 1 (DROP, "rpfilter")`)
	}
	xs := r.explained(t, "snat-missing-on-tunnel", facts...)
	// The stale flannel RETURN for node 2's subnet in flannel's own
	// chain, reached by POSTROUTING's jump, before the MASQUERADE it kept
	// the SYN from (not the policy that took the packet after).
	cidr, node2 := f.ClusterCIDR, lab.NodePodCIDR(f, 2)
	r.namedRule(t, xs[0], lab.NsNode1, "decided", "-d "+node2+" -m comment --comment \"flanneld masq\" -j RETURN")
	r.namedRule(t, xs[0], lab.NsNode1, "skipped", "! -s "+cidr+" -d "+cidr+" -m comment --comment \"flanneld masq\" -j MASQUERADE")
	namedService(t, xs[0], output.JSONService{Namespace: "default", Name: "web", Address: "cluster IP"})
	namedPods(t, xs[0], map[string]string{f.Pod2: "p2"})
	jump := `-A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG`
	if i := slices.IndexFunc(xs[0].NetfilterRules, func(n output.JSONNetfilterRule) bool {
		return n.Role == "decided" && n.Verdict == "RETURN"
	}); i < 0 || !slices.Equal(xs[0].NetfilterRules[i].Via, []string{jump}) {
		t.Errorf("the stale RETURN was not named as reached by the jump %q: %+v", jump, xs[0].NetfilterRules)
	}
}

func checkSYNOverflow(t *testing.T, r labRun, healthy bool) {
	f := r.family
	res := r.results()
	r.require(t, "the NodePort DNAT to the pod", func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode1) && e.Point == "nat" && e.Hook == "PREROUTING" && isSYN(e) && e.Translated &&
			e.Pre.Dport == lab.NodePort && e.Tuple.Dst == f.Pod1 && e.Tuple.Dport == lab.PodPort
	})
	listener := f.HostPort(f.Pod1, lab.PodPort)
	dropped := func(e output.JSONEvent) bool { return e.Point == "syn" && e.SYN.Dropped }
	if healthy {
		if res[lab.Connected] != 8 {
			t.Fatalf("client outcomes %v, want 8 connected", res)
		}
		r.forbid(t, "a dropped SYN", dropped)
		r.require(t, "SYNs queued at the listener", func(e output.JSONEvent) bool {
			return e.Point == "syn" && e.SYN.Outcome == "queued" && inNs(e, lab.NetnsName("p1")) && e.SYN.Listener == listener
		})
		r.healthy(t)
		return
	}
	if res[lab.TimedOut] == 0 {
		t.Fatalf("client outcomes %v, want timeouts", res)
	}
	syn := r.require(t, "a SYN dropped at the listener", dropped)
	if syn.SYN.Outcome != "dropped: accept queue full" || syn.SYN.Listener != listener || !inNs(syn, lab.NetnsName("p1")) {
		t.Errorf("syn event %+v in %s, want accept queue full at %s in %s", syn.SYN, syn.Netns, listener, lab.NetnsName("p1"))
	}
	if syn.SYN.AcceptMax != lab.SYNOverflowQueue || syn.SYN.AcceptQueue <= syn.SYN.AcceptMax {
		t.Errorf("accept queue %d/%d, want more than %d queued", syn.SYN.AcceptQueue, syn.SYN.AcceptMax, lab.SYNOverflowQueue)
	}
	xs := r.explained(t, "syn-dropped-at-listener", "SYN to "+listener, "netns "+lab.NetnsName("p1"),
		fmt.Sprintf("accept queue full (%d/%d)", syn.SYN.AcceptQueue, lab.SYNOverflowQueue), "DNATed to "+listener)
	if len(xs) != res[lab.TimedOut] {
		t.Errorf("%d findings for %d timed-out clients", len(xs), res[lab.TimedOut])
	}
	for _, x := range xs {
		namedService(t, x, output.JSONService{Namespace: "default", Name: "echo", Address: "node port"})
		namedPods(t, x, map[string]string{f.Pod1: "p1"})
	}
}

// The walk of incident 3: both endpoints' DNAT and SNAT appear.
func checkServicePaths(t *testing.T, r labRun, _ bool) {
	f := r.family
	if res := r.results(); res[lab.Connected] < 16 || res[lab.Connected] != len(r.outcomes) {
		t.Fatalf("client outcomes %v, want every one of 16 or more connected", res)
	}
	r.healthy(t)
	// The timelines show both endpoints' DNAT and SNAT.
	service := f.HostPort(f.PathsService, 80)
	for _, want := range []string{"DNAT " + service + " -> " + f.HostPort(f.Pod1, lab.PodPort), "DNAT " + service + " -> " + f.HostPort(f.Pod2, lab.PodPort),
		"SNAT " + f.HostPort(f.Node1, ""), "-> " + f.HostPort(f.Bridge1, ""), "-> " + f.HostPort(f.VTEP1, "")} {
		if !timelineHas(r.flows, want) {
			t.Errorf("no timeline step contains %q", want)
		}
	}
	for _, ep := range []struct{ pod, snat, dev string }{{f.Pod1, f.Bridge1, "cni0"}, {f.Pod2, f.VTEP1, f.Tunnel}} {
		dnat := r.require(t, "the DNAT to "+ep.pod, func(e output.JSONEvent) bool {
			return inNs(e, lab.NsNode1) && e.Point == "nat" && e.Hook == "OUTPUT" && isSYN(e) && e.Translated &&
				e.Pre.Dst == f.PathsService && e.Tuple.Dst == ep.pod && slices.Equal(e.Translations, []string{"dnat"})
		})
		if !reroutedVia(r.events, dnat, ep.dev) {
			t.Errorf("the DNAT to %s was not re-routed out of %s", ep.pod, ep.dev)
		}
		r.require(t, "the MASQUERADE to "+ep.snat+" for "+ep.pod, func(e output.JSONEvent) bool {
			return inNs(e, lab.NsNode1) && e.Point == "nat" && e.Hook == "POSTROUTING" && isSYN(e) && e.Translated &&
				e.Tuple.Dst == ep.pod && e.Tuple.Src == ep.snat && e.CT != nil && hasString(e.CT.Status, "SRC_NAT") &&
				slices.Equal(e.Translations, []string{"snat"})
		})
		// The reply's reverse translations, each named for what it
		// undoes: the masquerade as it comes in, the DNAT as it is
		// delivered to the client.
		r.require(t, "the reply from "+ep.pod+" un-SNATed back to the client", func(e output.JSONEvent) bool {
			return inNs(e, lab.NsNode1) && e.Point == "nat" && e.Pre != nil && e.Pre.Src == ep.pod && e.Pre.Dst == ep.snat &&
				e.Tuple.Dst == f.Node1 && slices.Equal(e.Translations, []string{"unsnat"})
		})
		r.require(t, "the reply from "+ep.pod+" un-DNATed back to the Service", func(e output.JSONEvent) bool {
			return inNs(e, lab.NsNode1) && e.Point == "nat" && e.Pre != nil && e.Pre.Src == ep.pod && e.Tuple.Src == f.PathsService &&
				e.Tuple.Sport == 80 && slices.Equal(e.Translations, []string{"undnat"})
		})
		for _, want := range []string{"reply restored: " + f.HostPort(ep.pod, lab.PodPort) + " -> " + service + " (undoes the DNAT at OUTPUT)",
			"(undoes the SNAT at POSTROUTING)"} {
			if !timelineHas(r.flows, want) {
				t.Errorf("no timeline step contains %q", want)
			}
		}
		if r.native {
			// Each first SYN's DNAT step names kube-proxy's endpoint rule.
			steps := 0
			for _, fl := range r.flows {
				for _, s := range fl.Packets[0].Steps {
					if s.Netns == lab.NsNode1 && s.Point == "nat" && s.Hook == "OUTPUT" && strings.HasPrefix(s.What, "DNAT "+service+" -> "+f.HostPort(ep.pod, lab.PodPort)) {
						r.namedNativeRule(t, s.NetfilterRules, lab.NsNode1, "decided", "dnat to "+f.HostPort(ep.pod, lab.PodPort))
						steps++
					}
				}
			}
			if steps == 0 {
				t.Errorf("no flow's first packet was DNATed to %s", ep.pod)
			}
		}
	}
}

func checkStaleHostPort(t *testing.T, r labRun, healthy bool) {
	f := r.family
	res := r.results()
	target := f.DeadHostPortPod
	if healthy {
		target = f.LiveHostPortPod
	}
	r.require(t, "the hostPort DNAT to "+target, func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode1) && e.Point == "nat" && e.Hook == "PREROUTING" && isSYN(e) && e.Translated &&
			e.Pre.Dport == lab.HostPortNum && e.Tuple.Dst == target && e.Tuple.Dport == 443
	})
	// ARP's failure has its reason; neighbour discovery's packets are
	// freed without one, where the failed entry is invalidated.
	neighFailed := func(e output.JSONEvent) bool {
		return e.Point == "drop" && e.Tuple.Dst == f.DeadHostPortPod &&
			(e.Drop.Reason == "NEIGH_FAILED" || f.IPv6 && e.Drop.Reason == "NOT_SPECIFIED" && strings.HasPrefix(e.Drop.Location, "neigh_invalidate+"))
	}
	reason := "NEIGH_FAILED"
	if f.IPv6 {
		reason = "freed by neigh_invalidate"
	}
	if healthy {
		if res[lab.Connected] != 1 {
			t.Fatalf("client outcomes %v, want connected", res)
		}
		r.forbid(t, "a neighbour failure", neighFailed)
		r.healthy(t)
		return
	}
	if res[lab.Connected] != 0 {
		t.Fatalf("client outcomes %v, want no connection", res)
	}
	r.require(t, "the SYN to the dead pod dropped for a failed neighbour", neighFailed)
	xs := r.explained(t, "dnat-to-dead-endpoint", fmt.Sprintf("SYN to %s was DNATed to %s", f.HostPort(f.Node1, lab.HostPortNum), f.HostPort(f.DeadHostPortPod, 443)),
		lab.NsNode1+" PREROUTING", "never answered", "neighbour resolution failed", reason)
	// The stale CNI-DN chain's DNAT, and the live chain's behind it.
	r.namedRule(t, xs[0], lab.NsNode1, "decided", "-j DNAT --to-destination "+f.HostPort(f.DeadHostPortPod, 443))
	r.namedRule(t, xs[0], lab.NsNode1, "other", "-j DNAT --to-destination "+f.HostPort(f.LiveHostPortPod, 443))
	if xs[0].Service != nil {
		t.Errorf("a hostPort's DNAT (CNI portmap's) named Service %+v", xs[0].Service)
	}
}

func checkHairpin(t *testing.T, r labRun, healthy bool) {
	f := r.family
	res := r.results()
	r.require(t, "the DNAT of the load-balancer address to the ingress pod", func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode1) && e.Point == "nat" && e.Hook == "PREROUTING" && isSYN(e) && e.Translated &&
			e.Pre.Dst == f.LoadBalancer && e.Tuple.Dst == f.IngressPod
	})
	post := r.require(t, "the request at POSTROUTING", func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode1) && e.Point == "nat" && e.Hook == "POSTROUTING" && isSYN(e) && e.Tuple.Dst == f.IngressPod
	})
	client := lab.NetnsName("p1")
	bypassed := func(e output.JSONEvent) bool {
		return inNs(e, client) && e.Point == "dev" && e.Kind == "rx" && e.Tuple.Src == f.IngressPod && e.Tuple.Flags == "S."
	}
	if healthy {
		if res[lab.Connected] != 1 {
			t.Fatalf("client outcomes %v, want connected", res)
		}
		if !post.Translated || post.Tuple.Src != f.Bridge1 {
			t.Errorf("request should be SNATed to cni0's %s: %+v", f.Bridge1, post.Tuple)
		}
		r.forbid(t, "a reply from the ingress pod's own address at the client", bypassed)
		r.healthy(t)
		return
	}
	if res[lab.Connected] != 0 {
		t.Fatalf("client outcomes %v, want no connection", res)
	}
	if post.Translated || post.Tuple.Src != f.Pod1 {
		t.Errorf("request should leave un-SNATed from %s: %+v", f.Pod1, post.Tuple)
	}
	r.require(t, "the SYN-ACK reaching the client from the ingress pod's own address", bypassed)
	if !r.resetBy(client, f.IngressPod) {
		t.Errorf("nettrace did not show the client resetting the unexpected SYN-ACK")
	}
	ingress := f.HostPort(f.IngressPod, 443)
	xs := r.explained(t, "reply-bypassed-nat", "reply from "+ingress, "called "+f.HostPort(f.LoadBalancer, 443),
		"received from "+ingress, "DNATed in "+lab.NsNode1+" PREROUTING and not SNATed", client, "reset")
	namedPods(t, xs[0], map[string]string{f.IngressPod: "ingress", f.Pod1: "p1"})
	if r.native {
		r.namedNativeRule(t, xs[0].NetfilterRules, lab.NsNode1, "decided", "dnat to "+ingress)
		namedService(t, xs[0], output.JSONService{Namespace: "default", Name: "ingress", Address: "external or load balancer IP"})
		return
	}
	r.namedRule(t, xs[0], lab.NsNode1, "decided", "-j DNAT --to-destination "+ingress)
	namedService(t, xs[0], output.JSONService{Namespace: "default", Name: "ingress", Address: "load balancer IP"})
}

// namedService requires a finding to name the Service kube-proxy's rules
// DNATed its request for, as those rules name it (the lab's Services
// have unnamed ports).
func namedService(t *testing.T, x output.JSONExplanation, want output.JSONService) {
	t.Helper()
	if x.Service == nil || *x.Service != want {
		t.Errorf("%s names Service %+v, want %+v: %s", x.Rule, x.Service, want, x.Summary)
	}
}

// namedPods requires the finding to name the lab's pods by their
// addresses (address -> pod), in its summary and its JSON pods, as
// nettrace learnt them from the lab's libcni cache.
func namedPods(t *testing.T, x output.JSONExplanation, want map[string]string) {
	t.Helper()
	for addr, pod := range want {
		name := lab.KubeNamespace + "/" + pod
		if !slices.Contains(x.Pods, output.JSONPod{Address: addr, Pod: name}) || !strings.Contains(x.Summary, " (pod "+name+")") {
			t.Errorf("%s does not name pod %s by its address %s: pods %+v, summary %s", x.Rule, name, addr, x.Pods, x.Summary)
		}
	}
}

// checkConntrackClash: nettrace names a clash exactly when the kernel
// counted one. Where the kernel resolves the queued SYN's clash when the
// queue gives it back (6.1), nothing is dropped and nothing may be
// claimed; elsewhere the first SYN is dropped at confirmation.
func checkConntrackClash(t *testing.T, r labRun, healthy bool) {
	f := r.family
	if res := r.results(); res[lab.Connected] != 1 {
		t.Fatalf("client outcomes %v, want connected (by the retransmitted SYN when the first is dropped)", res)
	}
	if healthy {
		r.healthy(t)
		return
	}
	if r.insertFailed[lab.NsNode2] == 0 {
		t.Logf("conntrack in %s counted no insert failure: this kernel resolved the clash when the queue reinjected the SYN", lab.NsNode2)
		r.healthy(t)
		return
	}
	r.require(t, "the first SYN dropped in node 2 with NETFILTER_DROP", func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode2) && e.Point == "drop" && e.Drop != nil && e.Drop.Reason == "NETFILTER_DROP" && isSYN(e) && e.Tuple.Dst == f.Pod2
	})
	xs := r.explained(t, "conntrack-clash", "-> "+f.HostPort(f.Pod2, lab.PodPort)+" (pod "+lab.KubeNamespace+"/p2) was dropped by conntrack in "+lab.NsNode2+" POSTROUTING", "conntrack clash")
	namedPods(t, xs[0], map[string]string{f.Pod1: "p1", f.Pod2: "p2"})
}

// twinConnected checks a healthy twin whose one client connects: it did,
// and nothing was found. It says whether r was the healthy twin.
func (r labRun) twinConnected(t *testing.T, healthy bool) bool {
	t.Helper()
	if !healthy {
		return false
	}
	if res := r.results(); res[lab.Connected] != 1 {
		t.Fatalf("client outcomes %v, want connected", res)
	}
	r.healthy(t)
	return true
}

// checkHairpinMode: a pod calling itself through its Service is named,
// with its bridge port and the setting to change, exactly when the port's
// hairpin mode is off.
func checkHairpinMode(t *testing.T, r labRun, healthy bool) {
	if r.twinConnected(t, healthy) {
		return
	}
	f := r.family
	res := r.results()
	if res[lab.Connected] != 0 {
		t.Fatalf("client outcomes %v, want no connection", res)
	}
	var port string
	for dev, pod := range r.hostVeths {
		if pod == "p1" {
			port = dev
		}
	}
	r.require(t, "the SYN freed by the bridge on p1's port", func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode1) && e.Point == "drop" && isSYN(e) && e.Dev == port && e.Tuple.Dst == f.Pod1 &&
			strings.HasPrefix(e.Drop.Location, "br_")
	})
	xs := r.explained(t, "bridge-hairpin-off", "was DNATed to "+f.HostPort(f.Pod1, lab.PodPort)+", the sender itself, in "+lab.NsNode1+" PREROUTING",
		"the bridge cni0 had to send it back out the port it came in on, "+port, "hairpin mode is off", "ip link set "+port+" type bridge_slave hairpin on")
	namedPods(t, xs[0], map[string]string{f.Pod1: "p1"})
	namedService(t, xs[0], output.JSONService{Namespace: "default", Name: "self", Address: "cluster IP"})
}

// lbDropCheck: a client's connection to the load-balancer address, dropped
// by kube-proxy's filter rule in chain whose comment contains comment, is
// named with the rule, the Service and why (the first of why after the
// hooks, the rest anywhere); in FORWARD when traced, in INPUT or FORWARD
// from the ruleset (nothing seen says whether the address was local). The
// twin connects, and nothing is found.
func lbDropCheck(chain, comment string, why ...string) func(t *testing.T, r labRun, healthy bool) {
	return func(t *testing.T, r labRun, healthy bool) {
		if r.twinConnected(t, healthy) {
			return
		}
		f := r.family
		if res := r.results(); res[lab.TimedOut] != 1 {
			t.Fatalf("client outcomes %v, want a timeout", res)
		}
		hooks := "INPUT or FORWARD"
		if r.traced {
			hooks = "FORWARD"
		}
		facts := append([]string{"-> " + f.HostPort(f.LoadBalancer, 443) + " (Service default/ingress) was dropped by filter " + chain + " rule 1",
			"in " + lab.NsNode1 + " " + hooks + ": " + why[0]}, why[1:]...)
		xs := r.explained(t, "dropped-by-netfilter", facts...)
		r.namedRule(t, xs[0], lab.NsNode1, "decided", comment)
		namedService(t, xs[0], output.JSONService{Namespace: "default", Name: "ingress"})
	}
}

// checkConntrackInvalid: a segment of an open connection that conntrack
// judged INVALID is named with its verdict, the rule that dropped it and
// the setting that makes conntrack accept it; with conntrack liberal the
// segment reaches p1, whose TCP discards it, and nothing is found.
func checkConntrackInvalid(t *testing.T, r labRun, healthy bool) {
	if r.twinConnected(t, healthy) {
		return
	}
	f := r.family
	if res := r.results(); res[lab.Connected] != 1 {
		t.Fatalf("client outcomes %v, want connected", res)
	}
	if r.nat.method != "netfilter" && r.nat.target != "nf_nat_ipv4_fn" {
		// NAT's hook function nf_nat_inet_fn, traced where nf_nat_ipv4_fn
		// is inlined, is called only for a packet with an entry: the
		// verdict is not seen, and the drop is named by its rule alone.
		t.Logf("the nat point traces %s (%s): conntrack's INVALID verdict is not seen", r.nat.target, r.nat.method)
		xs := r.explained(t, "dropped-by-netfilter", f.HostPort(f.Pod2, lab.PodPort)+" (pod default/p2) -> "+f.Pod1+":",
			"was dropped by filter KUBE-FORWARD rule 1 (DROP", "in "+lab.NsNode2+" FORWARD")
		r.namedRule(t, xs[0], lab.NsNode2, "decided", "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP")
		return
	}
	r.require(t, "conntrack's INVALID verdict on p2's segment in node 2", func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode2) && e.Point == "nat" && e.CTInvalid && e.Tuple.Src == f.Pod2
	})
	xs := r.explained(t, "conntrack-invalid", "TCP segment [P.] "+f.HostPort(f.Pod2, lab.PodPort)+" (pod default/p2) -> "+f.Pod1+":",
		"of the connection to "+f.HostPort(lab.StreamServiceIP, 80)+" (Service default/stream, cluster IP) was judged INVALID by conntrack in "+lab.NsNode2+" PREROUTING, and filter KUBE-FORWARD rule 1 (DROP",
		"dropped it in FORWARD", "net.netfilter.nf_conntrack_tcp_be_liberal=1` in "+lab.NsNode2)
	r.namedRule(t, xs[0], lab.NsNode2, "decided", "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP")
	namedPods(t, xs[0], map[string]string{f.Pod1: "p1", f.Pod2: "p2"})
	namedService(t, xs[0], output.JSONService{Namespace: "default", Name: "stream", Address: "cluster IP"})
}

// checkStaleUDPEntry: a UDP entry that goes on DNATing p1's queries to
// the endpoint gone is named, with the rule that chooses the new endpoint
// and the conntrack command that removes the entry; with the entry
// deleted, p1's queries reach p2 and nothing is found.
func checkStaleUDPEntry(t *testing.T, r labRun, healthy bool) {
	res, served := r.results(), map[string]int{}
	for _, o := range r.outcomes {
		served[o.ServedBy]++
	}
	if healthy {
		if served["dns-old"] != 12 || served["p2"] != 12 {
			t.Fatalf("client outcomes %v, answered by %v: want 12 answers from dns-old, then 12 from p2", res, served)
		}
		r.healthy(t)
		return
	}
	if served["dns-old"] != 12 || res[lab.TimedOut] != 12 {
		t.Fatalf("client outcomes %v, answered by %v: want 12 answers from dns-old, then 12 unanswered", res, served)
	}
	f := r.family
	svc := f.HostPort(lab.DNSServiceIP, lab.DNSPort)
	xs := r.explained(t, "stale-conntrack-entry", "UDP "+f.Pod1+":", " (pod default/p1) -> "+svc+" (Service default/dns, cluster IP) was DNATed to "+f.HostPort(lab.OldDNSPodIP, lab.DNSPort),
		" in "+lab.NsNode1+" PREROUTING by an existing conntrack entry",
		"which no current rule chooses: the rules now choose "+f.HostPort(f.Pod2, lab.DNSPort)+" (pod default/p2) by nat KUBE-SEP-",
		"`conntrack -D -p udp --orig-dst "+lab.DNSServiceIP+" --dst-nat "+lab.OldDNSPodIP+"` in "+lab.NsNode1)
	r.namedRule(t, xs[0], lab.NsNode1, "other", "-j DNAT --to-destination "+f.HostPort(f.Pod2, lab.DNSPort))
	namedPods(t, xs[0], map[string]string{f.Pod1: "p1", f.Pod2: "p2"})
	namedService(t, xs[0], output.JSONService{Namespace: "default", Name: "dns", Address: "cluster IP"})
}

// checkSNATPortClash: two connections masqueraded to one source port are
// named, with the MASQUERADE that keeps ports and --random-fully, exactly
// when node 1's conntrack counted the clash; the twin's MASQUERADE picks
// ports at random, and nothing clashes.
func checkSNATPortClash(t *testing.T, r labRun, healthy bool) {
	f := r.family
	if res := r.results(); res[lab.Connected] != 2 {
		t.Fatalf("client outcomes %v, want both connected (p1 by its retransmitted SYN when the first is dropped)", res)
	}
	clashes := r.insertFailed[lab.NsNode1]
	if healthy || clashes == 0 {
		if !healthy {
			t.Logf("conntrack in %s counted no insert failure: this kernel resolved the clash when the queue reinjected the SYN", lab.NsNode1)
		} else if clashes != 0 {
			t.Fatalf("conntrack in %s counted %d insert failures with --random-fully", lab.NsNode1, clashes)
		}
		r.healthy(t)
		return
	}
	snat, server := f.HostPort(f.Node1, lab.ClashSrcPort), f.HostPort(f.Router, lab.DatabasePort)
	xs := r.explained(t, "conntrack-clash", " -> "+server+
		" was dropped by conntrack in "+lab.NsNode1+" POSTROUTING: its new conntrack entry, translated to "+snat+" -> ",
		"Two connections were given source "+snat+" by SNAT: the other, ", "had its entry confirmed first, and the retransmission was given port ",
		"nat FLANNEL-POSTRTG rule ", "with `--random-fully` it picks ports at random")
	r.namedRule(t, xs[0], lab.NsNode1, "decided", "-s "+f.ClusterCIDR+" ! -d "+f.Multicast+` -m comment --comment "flanneld masq" -j MASQUERADE`)
	// The queue holds whichever SYN reaches it first: p1's, unless p3's
	// overtook it on a busy machine; the finding names the other as the
	// winner.
	pods := map[string]string{"p1": f.Pod1, "p3": lab.Pod3IP}
	var held []string
	for pod, addr := range pods {
		if strings.HasPrefix(xs[0].Summary, "SYN "+f.HostPort(addr, lab.ClashSrcPort)+" (pod default/"+pod+") -> ") {
			held = append(held, pod)
		}
	}
	if len(held) != 1 {
		t.Fatalf("the finding names neither p1's SYN nor p3's: %s", xs[0].Summary)
	}
	winner := map[string]string{"p1": "p3", "p3": "p1"}[held[0]]
	if other := "the other, " + f.HostPort(pods[winner], lab.ClashSrcPort) + " (pod default/" + winner + ") -> " + server + " (entry 0x"; !strings.Contains(xs[0].Summary, other) {
		t.Errorf("the finding does not name %s's connection as the winner (%q): %s", winner, other, xs[0].Summary)
	}
}

// checkMTUBlackHole: p2's answer, larger than flannel.1 carries, is named
// with its size, the MTUs around it and the rule that dropped the ICMP
// message that would have told p2 the path's MTU; with the pods' MTU the
// tunnel's, the answer arrives and nothing is found.
func checkMTUBlackHole(t *testing.T, r labRun, healthy bool) {
	if len(r.outcomes) != 1 || r.outcomes[0].Result != lab.Connected {
		t.Fatalf("client outcomes %v, want one connection", r.outcomes)
	}
	if healthy {
		if r.outcomes[0].ServedBy != "p2" {
			t.Fatalf("p2's answer did not arrive: %v", r.outcomes[0])
		}
		r.healthy(t)
		return
	}
	if r.outcomes[0].ServedBy != "" {
		t.Fatalf("p2's answer arrived: %v", r.outcomes[0])
	}
	f := r.family
	r.require(t, "p2's answer dropped in node 2 as too big for flannel.1", func(e output.JSONEvent) bool {
		return inNs(e, lab.NsNode2) && e.Point == "drop" && e.Drop.Reason == "PKT_TOO_BIG" && e.Tuple.Src == f.Pod2 &&
			e.Drop.RouteMTU == lab.TunnelMTU
	})
	xs := r.explained(t, "mtu-black-hole", "Packets "+f.HostPort(f.Pod2, lab.PodPort)+" (pod default/p2) -> "+f.Pod1+":",
		"1500 bytes with DF set (the sender's device has MTU 1500), were too big for flannel.1 (MTU 1450, over eth0 of MTU 1500) in "+
			lab.NsNode2+", which dropped them in ip_forward",
		"the ICMP \"fragmentation needed\" (type 3, code 4) the node sent "+f.Pod2+" (pod default/p2) was dropped by filter OUTPUT rule 1 "+
			"(DROP, \"stealth: no unreachable replies\") in "+lab.NsNode2+" OUTPUT",
		"Give the pods an MTU of at most 1450")
	r.namedRule(t, xs[0], lab.NsNode2, "decided", `--comment "stealth: no unreachable replies" -j DROP`)
	namedPods(t, xs[0], map[string]string{f.Pod1: "p1", f.Pod2: "p2"})
}

// scenarioCheck is what one lab scenario (and its healthy twin) must show.
type scenarioCheck struct {
	scenario string
	filter   string // the filter a user would type for this incident
	twins    bool
	check    func(t *testing.T, r labRun, healthy bool)
}

// incidentChecks are what each kind of lab incident (lab.Incident.Kind)
// must show, in either family.
var incidentChecks = map[string]func(t *testing.T, r labRun, healthy bool){
	"snat-missing":      checkSNATMissing,
	"syn-overflow":      checkSYNOverflow,
	"service-paths":     checkServicePaths,
	"stale-hostport":    checkStaleHostPort,
	"hairpin":           checkHairpin,
	"service-paths-nft": checkServicePaths,
	"hairpin-nft":       checkHairpin,
	"conntrack-clash":   checkConntrackClash,
	"hairpin-mode":      checkHairpinMode,
	"lb-source-ranges": lbDropCheck("KUBE-PROXY-FIREWALL",
		`"default/ingress traffic not accepted by KUBE-FW-`, "the source is not in the Service's loadBalancerSourceRanges"),
	"lb-local-no-endpoint": lbDropCheck("KUBE-EXTERNAL-SERVICES",
		`"default/ingress has no local endpoints"`, "the Service's externalTrafficPolicy is Local and no endpoint runs on this node",
		"or set externalTrafficPolicy: Cluster"),
	"conntrack-invalid": checkConntrackInvalid,
	"stale-udp-entry":   checkStaleUDPEntry,
	"snat-port-clash":   checkSNATPortClash,
	"mtu-black-hole":    checkMTUBlackHole,
}

// scenarioChecks are the lab's incidents (lab.Incidents) with their checks,
// but for those that need a kernel of their own, which have tests of their
// own (TestConntrackTableFull).
var scenarioChecks = func() []scenarioCheck {
	var out []scenarioCheck
	for _, in := range lab.Incidents() {
		if !in.OwnKernel {
			out = append(out, scenarioCheck{in.Name, in.Filter, in.Twins, incidentChecks[in.Kind]})
		}
	}
	return out
}()

// Every incident of the lab has its check, and every check an incident.
func TestEveryIncidentIsChecked(t *testing.T) {
	kinds := map[string]bool{}
	for _, in := range lab.Incidents() {
		kinds[in.Kind] = true
		if _, ok := incidentChecks[in.Kind]; !ok && !in.OwnKernel {
			t.Errorf("lab incident %s has no check in incidentChecks", in.Name)
		}
	}
	for kind := range incidentChecks {
		if !kinds[kind] {
			t.Errorf("incidentChecks has %s, which the lab does not declare", kind)
		}
	}
}

// eachScenario runs test for every scenario and twin.
func eachScenario(t *testing.T, test func(t *testing.T, c scenarioCheck, name string, healthy bool)) {
	for _, c := range scenarioChecks {
		if !c.twins {
			t.Run(c.scenario, func(t *testing.T) { test(t, c, c.scenario, true) })
			continue
		}
		twins(t, c.scenario, func(t *testing.T, name string, healthy bool) { test(t, c, name, healthy) })
	}
}

// Each incident and its healthy twin, on a quiet lab, with the incident's
// filter and its rules traced.
func TestLab(t *testing.T) {
	eachScenario(t, func(t *testing.T, c scenarioCheck, name string, healthy bool) {
		c.check(t, runScenario(t, name, c.filter, "--rules"), healthy)
	})
}

func hasPacket(flows []output.JSONFlow, match func(p output.JSONPacket) bool) bool {
	for _, f := range flows {
		for _, p := range f.Packets {
			if match(p) {
				return true
			}
		}
	}
	return false
}

func timelineHas(flows []output.JSONFlow, what string) bool {
	for _, f := range flows {
		for _, p := range f.Packets {
			for _, s := range p.Steps {
				if strings.Contains(s.What, what) {
					return true
				}
			}
		}
	}
	return false
}

func TestLabDownRemovesEverything(t *testing.T) {
	if _, err := lab.Up("snat-missing", labBin); err != nil {
		lab.Down()
		t.Fatal(err)
	}
	if err := lab.Down(); err != nil {
		t.Fatal(err)
	}
	if left := lab.Namespaces(); len(left) > 0 {
		t.Fatalf("namespaces left after down: %s", strings.Join(left, ", "))
	}
}
