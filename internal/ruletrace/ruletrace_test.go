package ruletrace

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/pkg/filter"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// newNamespace creates a namespace with a veth pair, one end on
// 10.99.0.2/24, and
// runs setup in it (each command under ip netns exec); all is undone with
// the test.
func newNamespace(t *testing.T, setup ...string) netns.Target {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (Debian package nftables): make deps installs it")
	}
	name := fmt.Sprintf("nt-ruletrace-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	base := []string{"ip link set lo up", "ip link add d0 type veth peer name d1", "ip addr add 10.99.0.2/24 dev d0", "ip link set d0 up", "ip link set d1 up"}
	for _, cmd := range append(base, setup...) {
		inNamespace(t, name, cmd)
	}
	targets, err := netns.Resolve([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	return targets[0]
}

func inNamespace(t *testing.T, name, cmd string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", name, "bash", "-c", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", cmd, err, out)
	}
	return string(out)
}

// collector gathers the steps a Tracer delivers.
type collector struct {
	mu       sync.Mutex
	steps    []ruleset.Trace
	reported []error
}

func (c *collector) report(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reported = append(c.reported, err)
}

func (c *collector) add(t ruleset.Trace) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps = append(c.steps, t)
}

// waitFor returns the first step that satisfies ok, within 5 s.
func (c *collector) waitFor(t *testing.T, what string, ok func(ruleset.Trace) bool) ruleset.Trace {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c.mu.Lock()
		for _, s := range c.steps {
			if ok(s) {
				c.mu.Unlock()
				return s
			}
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Fatalf("no step %s among %d: %+v (reported: %v)", what, len(c.steps), c.steps, c.reported)
	return ruleset.Trace{}
}

// TestNamespaceGoneIsReported: a namespace deleted between its listing
// and the start of tracing (a pod deleted) is reported; the others are
// traced.
func TestNamespaceGoneIsReported(t *testing.T) {
	target := newNamespace(t)
	prog, err := filter.Compile("udp")
	if err != nil {
		t.Fatal(err)
	}
	gone := netns.Target{Name: "gone", Path: filepath.Join(t.TempDir(), "gone"), Inode: target.Inode + 1}
	var got collector
	tr, err := Start([]netns.Target{gone, target}, prog, got.add, got.report)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if len(got.reported) != 1 || !strings.Contains(got.reported[0].Error(), "rules of gone not traced") {
		t.Errorf("reported %v, want the namespace gone", got.reported)
	}
	if tables := inNamespace(t, target.Name, "nft list tables"); !strings.Contains(tables, "table ip "+TableName+"\n") {
		t.Errorf("the namespace that exists is not traced:\n%s", tables)
	}
}

// TestTracesNameRulesAndLeaveNothing traces real packets through real
// iptables-nft and ip6tables-nft rules: the DNAT rule of a chain jumped to
// and a DROP are reported at their positions, in each family, packets the
// filter leaves out are not traced, and Close leaves the ruleset as it was
// (counters aside: the test's packets move them).
func TestTracesNameRulesAndLeaveNothing(t *testing.T) {
	target := newNamespace(t,
		"iptables -t nat -N TEST-SVC",
		"iptables -t nat -A OUTPUT -d 10.99.0.1 -j TEST-SVC",
		"iptables -t nat -A TEST-SVC -p udp --dport 9 -j RETURN",
		"iptables -t nat -A TEST-SVC -p udp --dport 7 -m comment --comment svc -j DNAT --to-destination 127.0.0.1:7",
		"iptables -A OUTPUT -p udp --dport 8 -j DROP",
		"ip addr add fd00:99::1/128 dev lo",
		"ip6tables -t nat -N TEST-SVC6",
		"ip6tables -t nat -A OUTPUT -d fd00:99::1 -j TEST-SVC6",
		"ip6tables -t nat -A TEST-SVC6 -p udp --dport 9 -j RETURN",
		"ip6tables -t nat -A TEST-SVC6 -p udp --dport 7 -j DNAT --to-destination [::1]:7")
	before := inNamespace(t, target.Name, "nft --stateless list ruleset")
	prog, err := filter.Compile("udp and (host 10.99.0.1 or host fd00:99::1)")
	if err != nil {
		t.Fatal(err)
	}
	var got collector
	tr, err := Start([]netns.Target{target}, prog, got.add, got.report)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if len(got.reported) > 0 {
		t.Fatalf("reported: %v", got.reported)
	}
	for _, family := range []string{"ip", "ip6"} {
		if tables := inNamespace(t, target.Name, "nft list tables"); !strings.Contains(tables, "table "+family+" "+TableName+"\n") {
			t.Fatalf("no %s table of nettrace's while tracing:\n%s", family, tables)
		}
	}
	inNamespace(t, target.Name, "echo x > /dev/udp/10.99.0.1/7; echo x > /dev/udp/10.99.0.1/8 || true; "+
		"echo x > /dev/udp/fd00:99::1/7; timeout 1 bash -c 'echo x > /dev/tcp/10.99.0.1/7' || true")

	service := netip.MustParseAddr("10.99.0.1")
	dnat := got.waitFor(t, "of the DNAT rule", func(s ruleset.Trace) bool {
		return s.Table == "nat" && s.Chain == "TEST-SVC" && s.Verdict == "accept"
	})
	if dnat.Position != 2 || dnat.Hook != "OUTPUT" || dnat.Packet.Dst != service || dnat.Packet.Dport != 7 || dnat.Netns != target.Inode || dnat.Handle == 0 {
		t.Errorf("DNAT step: %+v", dnat)
	}
	jump := got.waitFor(t, "of the jump", func(s ruleset.Trace) bool { return s.ID == dnat.ID && s.Verdict == "jump TEST-SVC" })
	if jump.Chain != "OUTPUT" || jump.Position != 1 {
		t.Errorf("jump step: %+v", jump)
	}
	service6 := netip.MustParseAddr("fd00:99::1")
	dnat6 := got.waitFor(t, "of the IPv6 DNAT rule", func(s ruleset.Trace) bool {
		return s.Table == "nat" && s.Chain == "TEST-SVC6" && s.Verdict == "accept"
	})
	if dnat6.Position != 2 || dnat6.Hook != "OUTPUT" || dnat6.Packet.Dst != service6 || dnat6.Packet.Dport != 7 || dnat6.Handle == 0 {
		t.Errorf("IPv6 DNAT step: %+v", dnat6)
	}
	drop := got.waitFor(t, "of the DROP", func(s ruleset.Trace) bool { return s.Table == "filter" && s.Verdict == "drop" })
	if drop.Chain != "OUTPUT" || drop.Position != 1 || drop.Packet.Dport != 8 || drop.Hook != "OUTPUT" {
		t.Errorf("DROP step: %+v", drop)
	}
	got.mu.Lock()
	for _, s := range got.steps {
		if s.Packet.Proto != 17 || s.Table == TableName {
			t.Errorf("step of a packet the filter leaves out, or of nettrace's table: %+v", s)
		}
	}
	got.mu.Unlock()

	tr.Close()
	if after := inNamespace(t, target.Name, "nft --stateless list ruleset"); after != before {
		t.Errorf("the ruleset changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestReadThroughCoversDeliveredSteps: once ReadThrough passes the time a
// packet went through its rules, that packet's steps have been delivered,
// though delivering each one is slow; it keeps advancing on a namespace
// without traffic, the reader still delivers after such idle waits, and a
// closed tracer holds nothing back and reports no error.
func TestReadThroughCoversDeliveredSteps(t *testing.T) {
	// The jump's step comes before the DNAT's: a reader that said it was
	// through with the packet after delivering one step would be caught.
	target := newNamespace(t,
		"iptables -t nat -N TEST-SVC",
		"iptables -t nat -A OUTPUT -d 10.99.0.1 -j TEST-SVC",
		"iptables -t nat -A TEST-SVC -p udp --dport 7 -j DNAT --to-destination 127.0.0.1:7")
	prog, err := filter.Compile("udp and host 10.99.0.1")
	if err != nil {
		t.Fatal(err)
	}
	var got collector
	slowAdd := func(s ruleset.Trace) {
		time.Sleep(50 * time.Millisecond)
		got.add(s)
	}
	tr, err := Start([]netns.Target{target}, prog, slowAdd, got.report)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for round := range 2 {
		// Idle for several of the reader's waits before each packet.
		time.Sleep(3 * idleRead)
		inNamespace(t, target.Name, "echo x > /dev/udp/10.99.0.1/7")
		sent := kernel.MonotonicNow()
		for deadline := time.Now().Add(10 * time.Second); tr.ReadThrough() < sent; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: ReadThrough stuck at %d, the packet was sent by %d (reported: %v)", round, tr.ReadThrough(), sent, got.reported)
			}
		}
		got.mu.Lock()
		dnats := 0
		for _, s := range got.steps {
			if s.Table == "nat" && s.Verdict == "accept" {
				dnats++
			}
		}
		got.mu.Unlock()
		if dnats != round+1 {
			t.Fatalf("round %d: ReadThrough passed the packet with %d DNAT steps delivered, want %d", round, dnats, round+1)
		}
	}
	tr.Close()
	if through := tr.ReadThrough(); through != math.MaxUint64 {
		t.Errorf("closed tracer: ReadThrough %d, want no bound", through)
	}
	if len(got.reported) > 0 {
		t.Errorf("reported: %v", got.reported)
	}
}
