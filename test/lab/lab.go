// Package lab reproduces the incidents of nettrace's mission on one machine:
// a two-node flannel-style overlay in network namespaces (underlay bridge,
// nodes with eth0, vxlan flannel.1 and a cni0 pod bridge, pods set up by
// the reference CNI plugins as flannel delegates them), with iptables rules written the way kube-proxy, flannel and the
// CNI portmap plugin write them, loaded with iptables-restore. Each
// scenario has a -healthy twin that differs only by the fault.
//
// Nothing is connected to the host's interfaces: all traffic stays between
// the lab's namespaces. Every namespace is named with Prefix, so Down can
// remove all of them, whatever state a failed run left.
package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Prefix starts the name of every lab namespace.
const Prefix = "ntlab-"

// StateDir holds the pid files of the lab's servers.
const StateDir = "/run/nettrace-lab"

// Namespace names.
const (
	NsUnderlay = Prefix + "ul"
	NsNode1    = Prefix + "n1"
	NsNode2    = Prefix + "n2"
)

// Addresses of the lab.
const (
	ClusterCIDR = "10.244.0.0/16"
	Node1IP     = "172.20.0.1"
	Node2IP     = "172.20.0.2"
	RouterIP    = "172.20.0.254"
	VNI         = 1
	VXLANPort   = 8472
)

type node struct {
	ns     string
	v4, v6 nodeAddrs
}

var nodes = []node{
	{NsNode1, nodeAddrs{Node1IP, "10.244.1.0/24", "10.244.1.0", "02:00:0a:f4:01:00", "10.244.1.1"},
		nodeAddrs{IPv6.Node1, "fd00:10:244:1::/64", IPv6.VTEP1, "02:00:0a:f4:61:00", IPv6.Bridge1}},
	{NsNode2, nodeAddrs{Node2IP, "10.244.2.0/24", "10.244.2.0", "02:00:0a:f4:02:00", "10.244.2.1"},
		nodeAddrs{IPv6.Node2, "fd00:10:244:2::/64", "fd00:10:244:2::", "02:00:0a:f4:62:00", "fd00:10:244:2::1"}},
}

// Pod is a pod: its own namespace behind a veth on its node's cni0, with
// an address of each family, its network set up through CNI (podNetwork)
// as Kubernetes pod KubeNamespace/Name.
type Pod struct {
	Name string
	Node int // 1 or 2
	IP   string
	IP6  string
}

// Namespace is the pod's namespace name.
func (p Pod) Namespace() string { return Prefix + p.Name }

// Server is a TCP server a scenario runs in a pod, or a UDP one.
type Server struct {
	Pod string
	// Off, instead of Pod, is a server off the cluster: in a namespace of
	// the lab's that is no pod's (the underlay's router), on its address
	// and Port.
	Off     *Peer
	Port    int
	Backlog int  // 0: the system default
	Accept  bool // false: connections stay in the accept queue
	Hold    bool // keep each connection open until the client closes it
	Bulk    int  // answer with this many bytes more, in one line (a TLS server's certificates)
	UDP     bool // answer each datagram with the pod's name instead
}

// Queue is a netfilter queue served in a namespace (ntlab queue): every
// packet accepted, with HoldFirst the first held until the second has
// passed (ServeQueue).
type Queue struct {
	Namespace string
	Num       uint16
	HoldFirst bool
}

// Patience bounds every wait for something expected (a link up, a server
// listening, a tracer attached, its programs freed): far longer than any
// machine of ours takes, a TCG guest beside a CPU hog included, so that
// only a hang fails for it, never a slow machine.
const Patience = 5 * time.Minute

func run(args ...string) error {
	cmd := exec.Command(args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// runAll runs the commands in order, each run of consecutive ip commands
// in one namespace as one ip -batch and each run of sysctls in one
// namespace as one sysctl: a lab is a hundred and more commands, and in a
// TCG guest every process started costs tens of milliseconds (60 fewer
// took the hairpin lab's bring-up there from 12.8 s to 10.6 s).
func runAll(cmds [][]string) error {
	for len(cmds) > 0 {
		b, part := batchOf(cmds[0])
		parts := []string{part}
		n := 1
		for ; b != (batch{}) && n < len(cmds); n++ {
			next, part := batchOf(cmds[n])
			if next != b {
				break
			}
			parts = append(parts, part)
		}
		var err error
		switch {
		case n == 1:
			err = run(cmds[0]...)
		case b.sysctl:
			err = run(sysctls(b.ns, parts...)...)
		default:
			err = ipBatch(b.ns, parts)
		}
		if err != nil {
			return err
		}
		cmds = cmds[n:]
	}
	return nil
}

// batch is what a command can be run with: the ip commands or the sysctls
// of one namespace. The zero batch is none.
type batch struct {
	ns     string
	sysctl bool
}

// batchOf says which batch a command can join and what it adds to it: an
// ip command in a namespace (ipn) its line of ip -batch, a sysctl (sysctl)
// its assignment. An ip command with an option first (-6) stays alone, as
// do arguments that ip's batch lines would split or quote.
func batchOf(c []string) (batch, string) {
	switch {
	case len(c) == 7 && c[0] == "ip" && c[1] == "netns" && c[2] == "exec" && c[4] == "sysctl" && c[5] == "-qw":
		return batch{ns: c[3], sysctl: true}, c[6]
	case len(c) > 3 && c[0] == "ip" && c[1] == "-n" && !strings.HasPrefix(c[3], "-"):
		for _, a := range c[3:] {
			if a == "" || strings.ContainsAny(a, " \t\"'#\\") {
				return batch{}, ""
			}
		}
		return batch{ns: c[2]}, strings.Join(c[3:], " ")
	}
	return batch{}, ""
}

// ipBatch runs ip command lines in a namespace as one ip -batch.
func ipBatch(ns string, lines []string) error {
	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip -n %s -batch: %w: %s; its lines:\n%s", ns, err, strings.TrimSpace(string(out)), strings.Join(lines, "\n"))
	}
	return nil
}

func ipn(ns string, args ...string) []string { return append([]string{"ip", "-n", ns}, args...) }

func sysctl(ns, key, value string) []string { return sysctls(ns, key+"="+value) }

// sysctls sets key=value assignments in a namespace, in one process.
func sysctls(ns string, assignments ...string) []string {
	return append([]string{"ip", "netns", "exec", ns, "sysctl", "-qw"}, assignments...)
}

// newNetns creates a namespace with IPv6 duplicate address detection off:
// the lab's addresses are unique by construction, and a tentative address
// would hold its first packets for a second.
func newNetns(ns string) [][]string {
	return [][]string{
		{"ip", "netns", "add", ns},
		sysctl(ns, "net.ipv6.conf.all.accept_dad", "0"),
		sysctl(ns, "net.ipv6.conf.default.accept_dad", "0"),
		ipn(ns, "link", "set", "lo", "up"),
	}
}

// Placement says which of the lab's nodes this machine holds: both (the
// lab on one kernel), or one, its underlay bridged to a network device
// (NIC) that leads to the machine holding the other (two guests, two
// kernels).
type Placement struct {
	Nodes []int // 1, 2 or both
	NIC   string
}

// Whole is the lab on one kernel.
var Whole = Placement{Nodes: []int{1, 2}}

// PeerUnderlayIP is the underlay's address on the machine that holds node
// 2 alone (node 1's has RouterIP): two machines' tests talk over it.
const PeerUnderlayIP = "172.20.0.253"

func (on Placement) holds(node int) bool { return slices.Contains(on.Nodes, node) }

// cluster builds the underlay and the nodes on holds, with their overlay,
// in both families: flannel's dual-stack layout, one vxlan device per
// family over an underlay of the same family.
func cluster(on Placement) [][]string {
	cmds := newNetns(NsUnderlay)
	cmds = append(cmds, ipn(NsUnderlay, "link", "add", "br0", "type", "bridge"))
	if on.holds(1) {
		cmds = append(cmds,
			ipn(NsUnderlay, "addr", "add", RouterIP+"/24", "dev", "br0"),
			ipn(NsUnderlay, "addr", "add", IPv6.Router+"/64", "dev", "br0"))
	} else {
		cmds = append(cmds, ipn(NsUnderlay, "addr", "add", PeerUnderlayIP+"/24", "dev", "br0"))
	}
	cmds = append(cmds,
		ipn(NsUnderlay, "link", "set", "br0", "up"),
		sysctl(NsUnderlay, "net.ipv4.ip_forward", "1"),
		sysctl(NsUnderlay, "net.ipv6.conf.all.forwarding", "1"),
	)
	if on.NIC != "" {
		cmds = append(cmds,
			[]string{"ip", "link", "set", on.NIC, "netns", NsUnderlay},
			ipn(NsUnderlay, "link", "set", on.NIC, "master", "br0", "up"))
	}
	for i, n := range nodes {
		if !on.holds(i + 1) {
			continue
		}
		port := fmt.Sprintf("ul-n%d", i+1)
		cmds = append(cmds, newNetns(n.ns)...)
		cmds = append(cmds,
			[]string{"ip", "link", "add", "eth0", "netns", n.ns, "type", "veth", "peer", "name", port, "netns", NsUnderlay},
			ipn(NsUnderlay, "link", "set", port, "master", "br0", "up"),
			ipn(n.ns, "addr", "add", n.v4.ip+"/24", "dev", "eth0"),
			ipn(n.ns, "addr", "add", n.v6.ip+"/64", "dev", "eth0"),
			ipn(n.ns, "link", "set", "eth0", "up"),
			ipn(n.ns, "route", "add", "default", "via", RouterIP),
			ipn(n.ns, "-6", "route", "add", "default", "via", IPv6.Router),
			sysctl(n.ns, "net.ipv4.ip_forward", "1"),
			sysctl(n.ns, "net.ipv6.conf.all.forwarding", "1"),
			// The querier makes the bridge send IGMP and MLD queries, as a
			// busy node's bridges do.
			ipn(n.ns, "link", "add", "cni0", "type", "bridge", "mcast_querier", "1"),
			ipn(n.ns, "addr", "add", n.v4.bridgeIP+"/24", "dev", "cni0"),
			ipn(n.ns, "addr", "add", n.v6.bridgeIP+"/"+prefixLen(n.v6.podCIDR), "dev", "cni0"),
			ipn(n.ns, "link", "set", "cni0", "up"),
		)
		for _, f := range []Family{IPv4, IPv6} {
			a := n.addrs(f)
			cmds = append(cmds,
				ipn(n.ns, "link", "add", f.Tunnel, "type", "vxlan", "id", strconv.Itoa(VNI), "local", a.ip,
					"dev", "eth0", "dstport", strconv.Itoa(VXLANPort), "nolearning"),
				ipn(n.ns, "link", "set", f.Tunnel, "address", a.vtepMAC),
				ipn(n.ns, "addr", "add", f.host(a.vtepAddr), "dev", f.Tunnel),
				ipn(n.ns, "link", "set", f.Tunnel, "up"),
			)
			for j, peer := range nodes {
				if j == i {
					continue
				}
				pa := peer.addrs(f)
				cmds = append(cmds,
					ipn(n.ns, "route", "add", pa.podCIDR, "via", pa.vtepAddr, "dev", f.Tunnel, "onlink"),
					ipn(n.ns, "neigh", "add", pa.vtepAddr, "lladdr", pa.vtepMAC, "dev", f.Tunnel, "nud", "permanent"),
					[]string{"bridge", "-n", n.ns, "fdb", "append", pa.vtepMAC, "dev", f.Tunnel, "dst", pa.ip},
				)
			}
		}
	}
	return cmds
}

// addPods makes each pod's namespace and has the CNI plugins set up its
// network (podNetwork); it returns the pod's and the node's ends of each
// pod's veth, and the pod of each node end.
func addPods(sc *Scenario, on Placement) ([][2]string, map[string]string, error) {
	networks := map[int]*podNetwork{}
	var ends [][2]string
	hostVeths := map[string]string{}
	for _, p := range sc.Pods {
		if !on.holds(p.Node) {
			continue
		}
		if err := runAll(newNetns(p.Namespace())); err != nil {
			return nil, nil, err
		}
		pn := networks[p.Node]
		if pn == nil {
			var err error
			if pn, err = newPodNetwork(nodes[p.Node-1], !sc.HairpinOff, sc.PodMTU); err != nil {
				return nil, nil, err
			}
			networks[p.Node] = pn
		}
		host, err := pn.add(p)
		if err != nil {
			return nil, nil, err
		}
		ends = append(ends, [2]string{p.Namespace(), "eth0"}, [2]string{nodes[p.Node-1].ns, host})
		hostVeths[host] = p.Name
	}
	return ends, hostVeths, nil
}

func iptablesRestore(f Family, ns, rules string) error {
	cmd := exec.Command("ip", "netns", "exec", ns, f.restore())
	cmd.Stdin = strings.NewReader(rules)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s in %s: %w: %s", f.restore(), ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Up builds the scenario. labBin is the ntlab binary, which serves the
// scenario's servers in their pods. A scenario already up is replaced.
func Up(name, labBin string) (*Scenario, error) { return UpOn(name, labBin, Whole) }

// UpOn builds the part of the scenario on the nodes this machine holds:
// their namespaces, pods, rules, settings and servers (a scenario that
// prepares itself by other means runs whole only).
func UpOn(name, labBin string, on Placement) (*Scenario, error) {
	sc, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if err := Down(); err != nil {
		return nil, err
	}
	fail := func(err error) (*Scenario, error) {
		Down()
		return nil, fmt.Errorf("lab up %s: %w", name, err)
	}
	if sc.Prepare != nil && len(on.Nodes) != len(nodes) {
		return nil, fmt.Errorf("lab up %s: the scenario prepares itself and runs on one machine only", name)
	}
	if on.NIC != "" {
		if err := waitLink(on.NIC); err != nil {
			return fail(err)
		}
	}
	if err := runAll(cluster(on)); err != nil {
		return fail(err)
	}
	podEnds, hostVeths, err := addPods(sc, on)
	if err != nil {
		return fail(err)
	}
	sc.HostVeths = hostVeths
	here := Namespaces()
	var cmds [][]string
	for _, s := range sc.Sysctls {
		if slices.Contains(here, s[0]) {
			cmds = append(cmds, sysctl(s[0], s[1], s[2]))
		}
	}
	for _, c := range sc.Extra {
		if namesOnly(c, here) {
			cmds = append(cmds, c)
		}
	}
	if err := runAll(cmds); err != nil {
		return fail(err)
	}
	if sc.ConntrackMax > 0 {
		if err := setConntrackMax(sc.ConntrackMax); err != nil {
			return fail(err)
		}
	}
	if err := waitVethsUp(on, podEnds); err != nil {
		return fail(err)
	}
	if err := sc.loadRules(here); err != nil {
		return fail(err)
	}
	if sc.Prepare != nil {
		if err := sc.Prepare(); err != nil {
			return fail(err)
		}
	}
	if err := sc.startServers(labBin, here); err != nil {
		return fail(err)
	}
	return sc, nil
}

// waitLink waits until a network device is in this machine's own
// namespace: a lab taken down gives its underlay's device back only when
// the kernel has cleaned the namespace up, after ip netns del returned.
func waitLink(dev string) error {
	deadline := time.Now().Add(Patience)
	for exec.Command("ip", "link", "show", "dev", dev).Run() != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("device %s not back in the host's namespace after %s", dev, Patience)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// namesOnly says whether a command names no lab namespace but those here.
func namesOnly(cmd []string, here []string) bool {
	for _, a := range cmd {
		if strings.HasPrefix(a, Prefix) && !slices.Contains(here, a) {
			return false
		}
	}
	return true
}

// loadRules loads the scenario's iptables and nftables rules into the
// namespaces here.
func (sc *Scenario) loadRules(here []string) error {
	for _, f := range []Family{IPv4, IPv6} {
		rules := sc.rules(f)
		for _, ns := range sortedKeys(rules) {
			if !slices.Contains(here, ns) {
				continue
			}
			if err := iptablesRestore(f, ns, rules[ns]); err != nil {
				return err
			}
		}
	}
	for _, ns := range sortedKeys(sc.Nft) {
		if !slices.Contains(here, ns) {
			continue
		}
		if err := nftRestore(ns, sc.Nft[ns]); err != nil {
			return err
		}
	}
	return nil
}

// startServers starts the scenario's servers and queues in the namespaces
// here.
func (sc *Scenario) startServers(labBin string, here []string) error {
	for _, s := range sc.Servers {
		ns := ""
		if s.Off != nil {
			ns = s.Off.Namespace
		} else {
			ns = sc.pod(s.Pod).Namespace()
		}
		if !slices.Contains(here, ns) {
			continue
		}
		if err := sc.startServer(labBin, s); err != nil {
			return err
		}
	}
	for _, q := range sc.Queues {
		if !slices.Contains(here, q.Namespace) {
			continue
		}
		if err := startQueue(labBin, q); err != nil {
			return err
		}
	}
	return nil
}

// waitVethsUp waits until both ends of every veth of the lab (the
// underlay's and podEnds) are operationally up. Until the kernel's link watch has run (up to a second
// after a link came up, when others changed just before), a link drops what
// it sends and a neighbour change flushes what waits for resolution: the
// first connection would lose its SYN and retransmit it a second later.
func waitVethsUp(on Placement, podEnds [][2]string) error {
	var ends [][2]string
	for _, n := range on.Nodes {
		ends = append(ends, [2]string{NsUnderlay, fmt.Sprintf("ul-n%d", n)}, [2]string{nodes[n-1].ns, "eth0"})
	}
	if on.NIC != "" {
		ends = append(ends, [2]string{NsUnderlay, on.NIC})
	}
	ends = append(ends, podEnds...)
	deadline := time.Now().Add(Patience)
	for _, e := range ends {
		for {
			out, err := exec.Command("ip", "-n", e[0], "-o", "link", "show", "dev", e[1]).Output()
			if err != nil {
				return fmt.Errorf("link %s/%s: %w", e[0], e[1], err)
			}
			if strings.Contains(string(out), "state UP") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("link %s/%s not operationally up after %s", e[0], e[1], Patience)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// startServer runs `ntlab serve` on its pod's address of the scenario's
// family (or its address off the cluster), detached, and waits until it
// listens.
func (sc *Scenario) startServer(labBin string, s Server) error {
	name := "off"
	var ns, addr string
	if s.Off != nil {
		ns, addr = s.Off.Namespace, sc.Family.HostPort(s.Off.Addr.Addr().String(), s.Port)
	} else {
		p := sc.pod(s.Pod)
		ns, name, addr = p.Namespace(), p.Name, sc.Family.HostPort(p.addr(sc.Family), s.Port)
	}
	args := []string{"serve", "--addr", addr, "--name", name, "--backlog", strconv.Itoa(s.Backlog)}
	if !s.Accept {
		args = append(args, "--no-accept")
	}
	if s.Hold {
		args = append(args, "--hold")
	}
	if s.Bulk > 0 {
		args = append(args, "--bulk", strconv.Itoa(s.Bulk))
	}
	if s.UDP {
		args = append(args, "--udp")
	}
	if err := startDetached(labBin, ns, fmt.Sprintf("%s-%d", name, s.Port), args...); err != nil {
		return fmt.Errorf("server %s: %w", addr, err)
	}
	return nil
}

// startQueue runs `ntlab queue` for q, detached, and waits until the
// queue is bound.
func startQueue(labBin string, q Queue) error {
	args := []string{"queue", "--num", strconv.Itoa(int(q.Num))}
	if q.HoldFirst {
		args = append(args, "--hold-first")
	}
	if err := startDetached(labBin, q.Namespace, fmt.Sprintf("%s-queue-%d", q.Namespace, q.Num), args...); err != nil {
		return fmt.Errorf("queue %d in %s: %w", q.Num, q.Namespace, err)
	}
	return nil
}

// startDetached runs an ntlab command in namespace ns in a session of its
// own (Down kills it by its pid file, name.pid) and waits until it creates
// its ready file.
func startDetached(labBin, ns, name string, args ...string) error {
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return err
	}
	ready := filepath.Join(StateDir, name+".ready")
	os.Remove(ready)
	cmd := exec.Command("ip", append(append([]string{"netns", "exec", ns, labBin}, args...), "--ready-file", ready)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(StateDir, name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	go cmd.Wait()
	for deadline := time.Now().Add(Patience); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return nil
		}
	}
	return fmt.Errorf("did not start within %s", Patience)
}

// Down stops the lab's servers, removes every lab namespace (which takes
// their devices, routes and rules with them) and puts back the kernel's
// conntrack limit a scenario set.
func Down() error {
	pids, _ := filepath.Glob(filepath.Join(StateDir, "*.pid"))
	for _, f := range pids {
		if b, err := os.ReadFile(f); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	}
	var errs []error
	if err := restoreConntrackMax(); err != nil {
		errs = append(errs, err)
	}
	os.RemoveAll(StateDir)
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) {
			if err := run("ip", "netns", "del", e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Namespaces lists the lab's namespaces that exist now.
func Namespaces() []string { return NamespacesNamed(Prefix) }

// NamespacesNamed lists the named network namespaces (/run/netns) whose
// names start with prefix.
func NamespacesNamed(prefix string) []string {
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}
