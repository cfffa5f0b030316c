package test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	ntrace "github.com/nettrace-dev/nettrace/pkg/trace"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// twoKernelsPort is where node 2's test waits for node 1's, on the
// underlay.
const twoKernelsPort = 7777

// TestTwoKernels: incident 1 across two kernels, each with its own clock.
// Two qemu guests (scripts/vmtest/pair.sh) are the lab's two nodes, their
// underlays joined by a virtual link between the guests; each guest's
// nettrace records its node. Node 2's test sets its node up, records, and
// waits on the underlay for node 1's; node 1's sets up, records, runs the
// client, takes node 2's recording over the link and replays both: the
// connection is one flow through both nodes, in an order where every
// packet arrives after it left, the finding named once (none on the
// healthy twin), the guests' clocks placed from the packets between them.
func TestTwoKernels(t *testing.T) {
	node := os.Getenv("NETTRACE_NODE")
	if node != "1" && node != "2" {
		t.Skip("runs in two guests as the lab's two nodes: scripts/vmtest/pair.sh (make vmtest) sets NETTRACE_NODE")
	}
	twins(t, "snat-missing", func(t *testing.T, name string, healthy bool) {
		on := lab.Placement{Nodes: []int{1}, NIC: "eth0"}
		namespaces := []string{lab.NsNode1, "ntlab-p1"}
		if node == "2" {
			on.Nodes = []int{2}
			namespaces = []string{lab.NsNode2, "ntlab-p2"}
		}
		// Neither records the underlay, where the tests talk to each
		// other: node 1's client waits for node 2's listener, and the
		// resets to its tries before are no part of the incident.
		sc, err := lab.UpOn(name, labBin, on)
		t.Cleanup(func() {
			if err := lab.Down(); err != nil {
				t.Errorf("lab down: %v", err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		recording := filepath.Join(t.TempDir(), "node"+node+".ntrace")
		args := []string{"-w", recording}
		for _, ns := range namespaces {
			args = append(args, "--netns", ns)
		}
		w := startWatch(t, args...)
		if node == "2" {
			serveRecording(t, w, recording)
			return
		}
		// Node 2 answers once it records: the client waits for it.
		conn := dialPeer(t)
		defer conn.Close()
		outs, err := lab.Traffic(sc)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			t.Log(o)
		}
		peer := fetchRecording(t, conn, filepath.Join(t.TempDir(), "node2.ntrace"))
		w.stop(t)
		checkTwoKernels(t, []string{recording, peer}, healthy)
	})
}

// serveRecording is node 2's part, once it records: it waits on the
// underlay for node 1's test, then for its word that the client is done,
// stops watching and sends the recording.
func serveRecording(t *testing.T, w *watch, recording string) {
	t.Helper()
	var ln net.Listener
	inNetns(t, lab.NsUnderlay, func() (err error) {
		ln, err = net.Listen("tcp", fmt.Sprintf("%s:%d", lab.PeerUnderlayIP, twoKernelsPort))
		return err
	})
	defer ln.Close()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(2 * lab.Patience))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("node 1 never came: %v", err)
	}
	defer conn.Close()
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || line != "done\n" {
		t.Fatalf("node 1 said %q: %v", line, err)
	}
	w.stop(t)
	f, err := os.Open(recording)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(conn, f); err != nil {
		t.Fatalf("send the recording: %v", err)
	}
}

// dialPeer connects to node 2's test, which listens once its node is up
// and recorded: until then (lab.Patience) the dial is retried.
func dialPeer(t *testing.T) net.Conn {
	t.Helper()
	deadline := time.Now().Add(lab.Patience)
	for {
		var conn net.Conn
		var err error
		inNetns(t, lab.NsUnderlay, func() error {
			conn, err = net.DialTimeout("tcp", fmt.Sprintf("%s:%d", lab.PeerUnderlayIP, twoKernelsPort), time.Second)
			return nil
		})
		if err == nil {
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 2 not reachable on the underlay after %s: %v", lab.Patience, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fetchRecording tells node 2's test the client is done and keeps node
// 2's recording at path.
func fetchRecording(t *testing.T, conn net.Conn, path string) string {
	t.Helper()
	if _, err := io.WriteString(conn, "done\n"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, conn); err != nil {
		t.Fatalf("receive node 2's recording: %v", err)
	}
	return path
}

// checkTwoKernels replays both nodes' recordings and requires the
// connection one flow through both, packets in causal order, and the
// finding once (none on the twin).
func checkTwoKernels(t *testing.T, recordings []string, healthy bool) {
	t.Helper()
	merged, log := replayMerged(t, recordings)
	t.Log(log)
	for _, x := range merged.explanations {
		t.Logf("%s: %s", x.Rule, x.Summary)
	}
	switch {
	case healthy && len(merged.explanations) != 0:
		t.Fatalf("%d findings on the healthy twin", len(merged.explanations))
	case !healthy && (len(merged.explanations) != 1 || merged.explanations[0].Rule != "snat-missing-on-tunnel"):
		t.Fatalf("findings %v, want snat-missing-on-tunnel once", merged.explanations)
	}
	requireFlowAcross(t, merged, healthy)
	if !strings.Contains(log, `"message":"clock aligned"`) {
		t.Fatalf("replay did not place node 2's clock:\n%s", log)
	}
	requireClockSummarized(t, merged)
	requireCausalOrder(t, merged)
	requireTunnelPacketsNamed(t, recordings[0])
	if !healthy {
		out, err := exec.Command(nettraceBin, append([]string{"replay", "--timelines", "findings"}, recordings...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, out)
		}
		t.Logf("the merged timeline:\n%s", out)
	}
}

// requireCausalOrder requires, of the flow through both nodes, its first
// packet to reach node 2 after it left node 1: the first SYN's last
// transmission in node 1 before its first reception in node 2, the steps
// the clocks are placed by. (Until the underlay's transmission shared its
// journey's bytes, it named no packet under qemu, and only the vxlan
// device's, 20 ms before it, bounded the clocks.)
func requireCausalOrder(t *testing.T, tr trace) {
	t.Helper()
	for _, f := range tr.flows {
		var left, arrived float64
		var sawLeft, sawArrived bool
		for _, p := range f.Packets {
			if p.Direction != "request" {
				continue
			}
			for _, s := range p.Steps {
				_, ns, _ := strings.Cut(s.Netns, ":")
				switch {
				case s.Point != "dev":
				case ns == lab.NsNode1 && s.Kind == "tx" && !sawArrived:
					left, sawLeft = s.OffsetUS, true
				case ns == lab.NsNode2 && s.Kind == "rx" && sawLeft && !sawArrived:
					arrived, sawArrived = s.OffsetUS, true
				}
			}
		}
		if !sawLeft || !sawArrived {
			continue
		}
		if arrived < left {
			t.Fatalf("flow %d: the SYN reached node 2 at %+.3f ms, before it left node 1 at %+.3f ms; its steps:\n%s",
				f.ID, arrived/1000, left/1000, requestSteps(f))
		}
		t.Logf("flow %d: the SYN left node 1 at %+.3f ms and reached node 2 at %+.3f ms", f.ID, left/1000, arrived/1000)
		return
	}
	t.Fatal("no flow with the SYN seen leaving node 1 and reaching node 2")
}

// requireTunnelPacketsNamed requires every encapsulated packet node 1
// transmitted on a device to name its packet on the wire (flow.WireID):
// the transmissions the clocks are placed by. Each had no bytes when the
// tunnel's encapsulation began its journey in the kernel.
func requireTunnelPacketsNamed(t *testing.T, recording string) {
	t.Helper()
	r, err := ntrace.Open(recording)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sent, named := 0, 0
	var e event.Event
	for r.Next(&e) == nil {
		if e.Point != event.PointDev || e.Kind != event.KindDevTx || !e.HasInner() {
			continue
		}
		sent++
		if _, ok := flow.WireID(&e); ok {
			named++
		}
	}
	if sent == 0 || named != sent {
		t.Fatalf("node 1 transmitted %d encapsulated packets, %d of them named on the wire", sent, named)
	}
}

// requestSteps lists the steps of a flow's requests, a line each, for a
// failure to show.
func requestSteps(f output.JSONFlow) string {
	var b strings.Builder
	for _, p := range f.Packets {
		if p.Direction != "request" {
			continue
		}
		for _, s := range p.Steps {
			fmt.Fprintf(&b, "%s %+.3f ms %s %s %s %s %s\n", p.Skb, s.OffsetUS/1000, s.Netns, s.Dev, s.Point, s.Kind, s.What)
		}
	}
	return b.String()
}
