package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	ntrace "github.com/nettrace-dev/nettrace/pkg/trace"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// namedRule requires a finding to name, in a role, the rule of a
// namespace's live ruleset (ip6tables' for an IPv6 scenario) whose
// iptables-save line contains want: the
// same text, chain and position as iptables-save prints it now; the rule
// that decided as the kernel traced it (its nftables handle known) when
// the run traced rules, every other from the ruleset.
func (r labRun) namedRule(t *testing.T, x output.JSONExplanation, ns, role, want string) {
	t.Helper()
	save := "iptables-save"
	if r.family.IPv6 {
		save = "ip6tables-save"
	}
	out, err := exec.Command("ip", "netns", "exec", ns, save).Output()
	if err != nil {
		t.Fatalf("%s in %s: %v", save, ns, err)
	}
	var line, chain string
	pos := 0
	counts := map[string]int{}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "*") {
			clear(counts)
		}
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "-A" {
			continue
		}
		counts[f[1]]++
		if strings.Contains(l, want) {
			if line != "" {
				t.Fatalf("%q is in two rules of %s:\n%s\n%s", want, ns, line, l)
			}
			line, chain, pos = l, f[1], counts[f[1]]
		}
	}
	if line == "" {
		t.Fatalf("no rule of %s contains %q:\n%s", ns, want, out)
	}
	source := "ruleset"
	if r.traced && role == "decided" {
		source = "traced"
	}
	for _, n := range x.NetfilterRules {
		if n.Role != role {
			continue
		}
		if n.Text != line || n.Chain != chain || n.Position != pos || n.Source != source || n.Netns != ns || (source == "traced") != (n.Handle != 0) {
			t.Errorf("%s rule named: %s %s %d %q (%s, handle %d), iptables-save: %s %d %q (%s)", role, n.Netns, n.Chain, n.Position, n.Text, n.Source, n.Handle, chain, pos, line, source)
		}
		return
	}
	t.Errorf("%s: no %s rule named; named: %+v", x.Rule, role, x.NetfilterRules)
}

// namedNativeRule requires rules (a finding's or a step's) to name, in a
// role, the rule of kube-proxy's nftables table whose line contains want,
// as `nft -a -s` lists it now: its chain and position, and its handle when
// traced; the rule that decided as the kernel traced it when the run traced
// rules, every other from the ruleset.
func (r labRun) namedNativeRule(t *testing.T, rules []output.JSONNetfilterRule, ns, role, want string) {
	t.Helper()
	source := "ruleset"
	if r.traced && role == "decided" {
		source = "traced"
	}
	listing := sh(t, "ip", "netns", "exec", ns, "nft", "--handle", "--stateless", "list", "table", "ip", "kube-proxy")
	var line, chain string
	var pos, found int
	var handle uint64
	for _, l := range strings.Split(listing, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "chain" {
			chain, pos = f[1], 0
			continue
		}
		body, h, ok := strings.Cut(strings.TrimSpace(l), " # handle ")
		if !ok || strings.HasSuffix(body, ";") || chain == "" {
			continue
		}
		pos++
		if strings.Contains(body, want) {
			line, found = body, pos
			handle, _ = strconv.ParseUint(h, 10, 64)
			if n := strings.Count(listing, want); n != 1 {
				t.Fatalf("%q is in %d rules of %s", want, n, ns)
			}
			break
		}
	}
	if line == "" {
		t.Fatalf("no rule of %s's kube-proxy table contains %q:\n%s", ns, want, listing)
	}
	for _, n := range rules {
		if n.Role != role {
			continue
		}
		if source == "ruleset" {
			handle = 0
		}
		if n.Table != "kube-proxy" || n.Text != line || n.Chain != chain || n.Position != found || n.Handle != handle || n.Source != source || n.Netns != ns {
			t.Errorf("%s rule named: %s %s %s %d %q (%s, handle %d), nft: %s %d %q (%s, handle %d)", role, n.Netns, n.Table, n.Chain, n.Position, n.Text, n.Source, n.Handle, chain, found, line, source, handle)
		}
		return
	}
	t.Errorf("no %s rule named; named: %+v", role, rules)
}

// waitForRuleset waits until a recording being written holds a ruleset of
// a namespace (its ip6tables one for f IPv6) containing text: nettrace has
// read the ruleset since it changed.
func waitForRuleset(t *testing.T, recording string, ino uint32, f lab.Family, text string) {
	t.Helper()
	deadline := time.Now().Add(lab.Patience)
	for time.Now().Before(deadline) {
		if r, err := ntrace.Open(recording); err == nil {
			for {
				err := r.Next(new(event.Event))
				if err != nil {
					break
				}
			}
			rs := r.Rulesets.At(ino, ^uint64(0))
			if rs != nil && f.IPv6 {
				rs = rs.IPv6
			}
			r.Close()
			if rs != nil {
				for _, rule := range rs.Rules("filter") {
					if strings.Contains(rule.Text, text) {
						return
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the recording has no ruleset of namespace %d with %q after %s", ino, text, lab.Patience)
}

// A DROP rule is named by the dropped-by-netfilter finding as
// iptables-save (ip6tables-save) prints it, traced (--rules) and from the
// ruleset alone; a rule inserted during the run is named for the packets it
// drops from then on, while the packets dropped before are still named by
// the rule as it stood (its position then); replay names the same rules.
func TestDropRuleNamedAndFollowed(t *testing.T) {
	for _, fam := range []dropRuleFamily{
		{"IPv4", lab.IPv4, "iptables", "10.98.3.1/24", "10.98.3.2", "/24"},
		{"IPv6", lab.IPv6, "ip6tables", "fd00:98:3::1/64 nodad", "fd00:98:3::2", "/64 nodad"},
	} {
		for _, traced := range []bool{false, true} {
			t.Run(fam.name+"/"+map[bool]string{false: "ruleset", true: "traced"}[traced], func(t *testing.T) { testDropRule(t, fam, traced) })
		}
	}
}

// dropRuleFamily is what TestDropRuleNamedAndFollowed needs of a family:
// its iptables program and the two ends' addresses.
type dropRuleFamily struct {
	name             string
	f                lab.Family
	iptables, client string
	addr, prefix     string // the server's address, and its prefix on the link
}

func testDropRule(t *testing.T, fam dropRuleFamily, traced bool) {
	f, iptables, addr := fam.f, fam.iptables, fam.addr
	a, b := newNetns(t, "a"), newNetns(t, "b")
	veth(t, a, "a0", fam.client, b, "b0", addr+fam.prefix)
	script(t, `ip netns exec `+b+` `+iptables+` -A INPUT -p tcp --dport 9001 -m comment --comment first -j DROP`)
	before := sh(t, "ip", "netns", "exec", b, "nft", "--stateless", "list", "ruleset")
	recording := filepath.Join(t.TempDir(), "rules.ntrace")
	args := []string{"-w", recording, "--netns", a, "--netns", b, "host " + addr}
	if traced {
		args = append(args, "--rules")
	}
	w := startWatch(t, args...)
	if err := dial(t, a, "", f.HostPort(addr, 9001), 500*time.Millisecond); err == nil {
		t.Fatal("connected through the DROP rule")
	}
	script(t, `ip netns exec `+b+` `+iptables+` -I INPUT -p tcp --dport 9003 -m comment --comment added -j DROP`)
	waitForRuleset(t, recording, netnsInode(t, b), f, "--dport 9003")
	if err := dial(t, a, "", f.HostPort(addr, 9003), 500*time.Millisecond); err == nil {
		t.Fatal("connected through the added DROP rule")
	}
	tr := w.stop(t)
	var seen []string
	for _, x := range tr.explanations {
		if x.Rule != "dropped-by-netfilter" {
			continue
		}
		switch {
		case strings.Contains(x.Summary, ":9001"):
			// Position 1 when it dropped; 2 in today's ruleset.
			if len(x.NetfilterRules) != 1 || x.NetfilterRules[0].Position != 1 || x.NetfilterRules[0].Comment != "first" {
				t.Errorf("9001: %+v", x.NetfilterRules)
			}
			seen = append(seen, "9001")
		case strings.Contains(x.Summary, ":9003"):
			labRun{traced: traced, family: f}.namedRule(t, x, b, "decided", "--dport 9003")
			seen = append(seen, "9003")
		}
	}
	if strings.Join(seen, " ") != "9001 9003" && strings.Join(seen, " ") != "9003 9001" {
		t.Fatalf("dropped-by-netfilter findings for %v, want 9001 and 9003:\n%+v", seen, tr.explanations)
	}
	requireConntrackRead(t, tr)
	requireSameReplay(t, recording, tr)
	script(t, `ip netns exec `+b+` `+iptables+` -D INPUT 1`)
	if after := sh(t, "ip", "netns", "exec", b, "nft", "--stateless", "list", "ruleset"); after != before {
		t.Errorf("the ruleset is not as before:\n%s\nafter:\n%s", before, after)
	}
}

// requireConntrackRead requires every NETFILTER_DROP of a packet without
// a conntrack entry to carry the conntrack table nettrace read after it
// (internal/ctstat): the kernel's limit, and no packet dropped by conntrack.
func requireConntrackRead(t *testing.T, tr trace) {
	t.Helper()
	limit, err := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_max")
	if err != nil {
		t.Logf("no conntrack table to read (%v): conntrack is not loaded", err)
		return
	}
	n := 0
	for _, e := range tr.events {
		if e.Point != "drop" || e.Drop == nil || e.Drop.Reason != "NETFILTER_DROP" || e.CT != nil {
			continue
		}
		n++
		if fmt.Sprint(e.Drop.ConntrackMax) != strings.TrimSpace(string(limit)) || e.Drop.ConntrackDrops != 0 {
			t.Errorf("drop %s: conntrack table %d/%d, %d dropped; want the limit %s, none dropped",
				e.Skb, e.Drop.ConntrackCount, e.Drop.ConntrackMax, e.Drop.ConntrackDrops, strings.TrimSpace(string(limit)))
		}
	}
	if n == 0 {
		t.Fatal("no NETFILTER_DROP of a packet without a conntrack entry: the test shows nothing of the table's reading")
	}
}

// netnsInode is a named namespace's inode, as events carry it.
func netnsInode(t *testing.T, name string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat("/run/netns/"+name, &st); err != nil {
		t.Fatal(err)
	}
	return uint32(st.Ino)
}

// Tracing rules (--rules) adds a table to each watched namespace (one per
// family the filter selects) and leaves nothing behind: after SIGINT and after SIGKILL, no namespace has
// a table of nettrace's and every ruleset is as it was (counters aside:
// the scenario's packets move them).
func TestRulesTableLeavesNoResidue(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (Debian package nftables): make deps installs it")
	}
	for _, stop := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(stop.String(), func(t *testing.T) {
			sc, err := lab.Up("snat-missing", labBin)
			t.Cleanup(func() {
				if err := lab.Down(); err != nil {
					t.Errorf("lab down: %v", err)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			rulesets := func() map[string]string {
				out := map[string]string{}
				for _, ns := range lab.Namespaces() {
					out[ns] = sh(t, "ip", "netns", "exec", ns, "nft", "--stateless", "list", "ruleset")
				}
				return out
			}
			before := rulesets()
			// Both families selected: a table in each.
			args := []string{"--rules", "host " + lab.SNATServiceIP + " or host " + lab.IPv6.SNATService}
			for _, ns := range lab.Namespaces() {
				args = append(args, "--netns", ns)
			}
			w := startWatch(t, args...)
			for _, ns := range lab.Namespaces() {
				tables := sh(t, "ip", "netns", "exec", ns, "nft", "list", "tables")
				if !strings.Contains(tables, "table ip nettrace-") || !strings.Contains(tables, "table ip6 nettrace-") {
					t.Fatalf("%s lacks a table of nettrace's while it traces:\n%s", ns, tables)
				}
			}
			if _, err := lab.Traffic(sc); err != nil {
				t.Fatal(err)
			}
			w.cmd.Process.Signal(stop)
			w.cmd.Wait()
			for ns, was := range before {
				if tables := sh(t, "ip", "netns", "exec", ns, "nft", "list", "tables"); strings.Contains(tables, "nettrace") {
					t.Errorf("%s after %s: %s", ns, stop, tables)
				}
				if now := sh(t, "ip", "netns", "exec", ns, "nft", "--stateless", "list", "ruleset"); now != was {
					t.Errorf("%s's ruleset after %s:\n%s\nbefore:\n%s", ns, stop, now, was)
				}
			}
		})
	}
}
