// Package lab reproduces the incidents of nettrace's mission on one machine:
// a two-node flannel-style overlay in network namespaces (underlay bridge,
// nodes with eth0, vxlan flannel.1 and a cni0 pod bridge, pods behind veth
// pairs), with iptables rules written the way kube-proxy, flannel and the
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
	ns, ip, podCIDR, vtepAddr, vtepMAC, bridgeIP string
}

var nodes = []node{
	{NsNode1, Node1IP, "10.244.1.0/24", "10.244.1.0", "02:00:0a:f4:01:00", "10.244.1.1"},
	{NsNode2, Node2IP, "10.244.2.0/24", "10.244.2.0", "02:00:0a:f4:02:00", "10.244.2.1"},
}

// Pod is a pod: its own namespace behind a veth on its node's cni0.
type Pod struct {
	Name string
	Node int // 1 or 2
	IP   string
}

// Namespace is the pod's namespace name.
func (p Pod) Namespace() string { return Prefix + p.Name }

// Server is a TCP server a scenario runs in a pod.
type Server struct {
	Pod     string
	Port    int
	Backlog int  // 0: the system default
	Accept  bool // false: connections stay in the accept queue
}

func run(args ...string) error {
	cmd := exec.Command(args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func runAll(cmds [][]string) error {
	for _, c := range cmds {
		if err := run(c...); err != nil {
			return err
		}
	}
	return nil
}

func ipn(ns string, args ...string) []string { return append([]string{"ip", "-n", ns}, args...) }

func sysctl(ns, key, value string) []string {
	return []string{"ip", "netns", "exec", ns, "sysctl", "-qw", key + "=" + value}
}

// cluster builds the underlay and both nodes with their overlay.
func cluster() [][]string {
	cmds := [][]string{
		{"ip", "netns", "add", NsUnderlay},
		ipn(NsUnderlay, "link", "set", "lo", "up"),
		ipn(NsUnderlay, "link", "add", "br0", "type", "bridge"),
		ipn(NsUnderlay, "addr", "add", RouterIP+"/24", "dev", "br0"),
		ipn(NsUnderlay, "link", "set", "br0", "up"),
		sysctl(NsUnderlay, "net.ipv4.ip_forward", "1"),
	}
	for i, n := range nodes {
		port := fmt.Sprintf("ul-n%d", i+1)
		cmds = append(cmds,
			[]string{"ip", "netns", "add", n.ns},
			ipn(n.ns, "link", "set", "lo", "up"),
			[]string{"ip", "link", "add", "eth0", "netns", n.ns, "type", "veth", "peer", "name", port, "netns", NsUnderlay},
			ipn(NsUnderlay, "link", "set", port, "master", "br0", "up"),
			ipn(n.ns, "addr", "add", n.ip+"/24", "dev", "eth0"),
			ipn(n.ns, "link", "set", "eth0", "up"),
			ipn(n.ns, "route", "add", "default", "via", RouterIP),
			sysctl(n.ns, "net.ipv4.ip_forward", "1"),
			ipn(n.ns, "link", "add", "flannel.1", "type", "vxlan", "id", strconv.Itoa(VNI), "local", n.ip,
				"dev", "eth0", "dstport", strconv.Itoa(VXLANPort), "nolearning"),
			ipn(n.ns, "link", "set", "flannel.1", "address", n.vtepMAC),
			ipn(n.ns, "addr", "add", n.vtepAddr+"/32", "dev", "flannel.1"),
			ipn(n.ns, "link", "set", "flannel.1", "up"),
			// The querier makes the bridge send IGMP queries, as a busy
			// node's bridges do.
			ipn(n.ns, "link", "add", "cni0", "type", "bridge", "mcast_querier", "1"),
			ipn(n.ns, "addr", "add", n.bridgeIP+"/24", "dev", "cni0"),
			ipn(n.ns, "link", "set", "cni0", "up"),
		)
		for j, peer := range nodes {
			if j == i {
				continue
			}
			cmds = append(cmds,
				ipn(n.ns, "route", "add", peer.podCIDR, "via", peer.vtepAddr, "dev", "flannel.1", "onlink"),
				ipn(n.ns, "neigh", "add", peer.vtepAddr, "lladdr", peer.vtepMAC, "dev", "flannel.1", "nud", "permanent"),
				[]string{"bridge", "-n", n.ns, "fdb", "append", peer.vtepMAC, "dev", "flannel.1", "dst", peer.ip},
			)
		}
	}
	return cmds
}

func podCmds(p Pod) [][]string {
	n := nodes[p.Node-1]
	host := "veth-" + p.Name
	return [][]string{
		{"ip", "netns", "add", p.Namespace()},
		ipn(p.Namespace(), "link", "set", "lo", "up"),
		{"ip", "link", "add", "eth0", "netns", p.Namespace(), "type", "veth", "peer", "name", host, "netns", n.ns},
		ipn(n.ns, "link", "set", host, "master", "cni0", "up"),
		ipn(p.Namespace(), "addr", "add", p.IP+"/24", "dev", "eth0"),
		ipn(p.Namespace(), "link", "set", "eth0", "up"),
		ipn(p.Namespace(), "route", "add", "default", "via", n.bridgeIP),
	}
}

func iptablesRestore(ns, rules string) error {
	cmd := exec.Command("ip", "netns", "exec", ns, "iptables-restore")
	cmd.Stdin = strings.NewReader(rules)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables-restore in %s: %w: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Up builds the scenario. labBin is the ntlab binary, which serves the
// scenario's servers in their pods. A scenario already up is replaced.
func Up(name, labBin string) (*Scenario, error) {
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
	cmds := cluster()
	for _, p := range sc.Pods {
		cmds = append(cmds, podCmds(p)...)
	}
	for _, s := range sc.Sysctls {
		cmds = append(cmds, sysctl(s[0], s[1], s[2]))
	}
	cmds = append(cmds, sc.Extra...)
	if err := runAll(cmds); err != nil {
		return fail(err)
	}
	for _, ns := range sortedKeys(sc.Rules) {
		if err := iptablesRestore(ns, sc.Rules[ns]); err != nil {
			return fail(err)
		}
	}
	for _, ns := range sortedKeys(sc.Nft) {
		if err := nftRestore(ns, sc.Nft[ns]); err != nil {
			return fail(err)
		}
	}
	for _, s := range sc.Servers {
		if err := startServer(labBin, sc.pod(s.Pod), s); err != nil {
			return fail(err)
		}
	}
	return sc, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// startServer runs `ntlab serve` in the pod, detached, and waits until it
// listens.
func startServer(labBin string, p Pod, s Server) error {
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return err
	}
	addr := fmt.Sprintf("%s:%d", p.IP, s.Port)
	ready := filepath.Join(StateDir, fmt.Sprintf("%s-%d.ready", p.Name, s.Port))
	os.Remove(ready)
	args := []string{"netns", "exec", p.Namespace(), labBin, "serve", "--addr", addr, "--name", p.Name,
		"--backlog", strconv.Itoa(s.Backlog), "--ready-file", ready}
	if !s.Accept {
		args = append(args, "--no-accept")
	}
	cmd := exec.Command("ip", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start server %s: %w", addr, err)
	}
	pidFile := filepath.Join(StateDir, fmt.Sprintf("%s-%d.pid", p.Name, s.Port))
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	go cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return nil
		}
	}
	return fmt.Errorf("server %s did not start", addr)
}

// Down stops the lab's servers and removes every lab namespace (which
// takes their devices, routes and rules with them).
func Down() error {
	pids, _ := filepath.Glob(filepath.Join(StateDir, "*.pid"))
	for _, f := range pids {
		if b, err := os.ReadFile(f); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	}
	os.RemoveAll(StateDir)
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var errs []error
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
func Namespaces() []string {
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}
