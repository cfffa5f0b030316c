package test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/test/lab"
)

// flannel's network, as its vxlan backend and its etcd store are set up in
// the test: the cluster's pod CIDR, from which each flanneld leases its
// node's /24.
const (
	flannelNetwork = "10.244.0.0/16"
	flannelPrefix  = "/coreos.com/network"
	underlayNet    = "172.30.250.%d"
	etcdPort       = "2379"
)

// flannelCluster is two nodes whose pod network flannel runs: flanneld,
// built from flannel's own module (scripts/flanneld.sh), in each node's
// namespace with its vxlan backend and --ip-masq, and Debian's etcd as its
// store in the first node. The nodes' underlay is a veth pair between
// them, nothing else.
type flannelCluster struct {
	dir   string
	nodes [2]*flannelNode
}

// flannelNode is one node: its namespace, its underlay address and the
// subnet flanneld leased it (from the subnet file flanneld writes for the
// CNI plugin).
type flannelNode struct {
	ns, underlay string
	subnet       netip.Prefix
	mtu          string
}

// flanneldBin is flanneld's path: FLANNELD_BIN (the VM's), or what `make
// flanneld` built.
func flanneldBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("FLANNELD_BIN")
	if bin == "" {
		bin = "../bin/flanneld"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("needs flanneld, built from flannel's module by `make flanneld` (scripts/flanneld.sh): %v", err)
	}
	return bin
}

func newFlannelCluster(t *testing.T) *flannelCluster {
	t.Helper()
	flanneld := flanneldBin(t)
	for _, tool := range []string{"etcd", "etcdctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("needs %s (Debian packages etcd-server and etcd-client: make deps installs them): %v", tool, err)
		}
	}
	c := &flannelCluster{dir: t.TempDir()}
	for i, role := range []string{"flannel-a", "flannel-b"} {
		c.nodes[i] = &flannelNode{ns: newNetns(t, role), underlay: fmt.Sprintf(underlayNet, i+1)}
	}
	a, b := c.nodes[0], c.nodes[1]
	veth(t, a.ns, "ul0", a.underlay+"/24", b.ns, "ul0", b.underlay+"/24")
	store := "http://" + a.underlay + ":" + etcdPort
	c.start(t, a.ns, "etcd", "etcd", "--name", "node-a", "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", store, "--advertise-client-urls", store,
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "node-a=http://127.0.0.1:2380")
	config := fmt.Sprintf(`{"Network": %q, "Backend": {"Type": "vxlan"}}`, flannelNetwork)
	c.await(t, "etcd to take flannel's network config", func() bool {
		return exec.Command("ip", "netns", "exec", a.ns, "etcdctl", "--endpoints", store,
			"put", flannelPrefix+"/config", config).Run() == nil
	})
	for i, n := range c.nodes {
		subnetFile := filepath.Join(c.dir, fmt.Sprintf("subnet-%d.env", i))
		c.start(t, n.ns, fmt.Sprintf("flanneld-%d", i), flanneld, "--etcd-endpoints", store,
			"--etcd-prefix", flannelPrefix, "--iface", "ul0", "--ip-masq", "--subnet-file", subnetFile)
		c.await(t, "flanneld's subnet file", func() bool { return n.readSubnetFile(t, subnetFile) })
	}
	// flanneld writes its subnet file before its masquerade rules: the
	// chain is complete when its last rule, the MASQUERADE toward the
	// cluster's pods, is there.
	lastRule := fmt.Sprintf(`-A FLANNEL-POSTRTG ! -s %s -d %s -m comment --comment "flanneld masq" -j MASQUERADE`, flannelNetwork, flannelNetwork)
	for i, n := range c.nodes {
		peer := c.nodes[1-i].subnet.String()
		c.await(t, "flanneld's route to the other node's pods", func() bool {
			out, _ := exec.Command("ip", "-n", n.ns, "route", "show", peer).Output()
			return bytes.Contains(out, []byte("dev flannel.1"))
		})
		c.await(t, "flanneld's masquerade rules", func() bool {
			out, _ := exec.Command("ip", "netns", "exec", n.ns, "iptables", "-t", "nat", "-S", "FLANNEL-POSTRTG").Output()
			return bytes.Contains(out, []byte(lastRule))
		})
	}
	return c
}

// start runs a component in a namespace until the test ends, its output
// in the test's log when the test fails.
func (c *flannelCluster) start(t *testing.T, ns, name string, argv ...string) {
	t.Helper()
	logPath := filepath.Join(c.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Logf("%s's log (its end):\n%s", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
}

// await waits, up to lab.Patience, until ready says yes.
func (c *flannelCluster) await(t *testing.T, what string, ready func() bool) {
	t.Helper()
	for deadline := time.Now().Add(lab.Patience); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ready() {
			return
		}
	}
	t.Fatalf("waited %s for %s", lab.Patience, what)
}

// readSubnetFile reads the lease flanneld wrote for the CNI plugin
// (FLANNEL_SUBNET=10.244.28.1/24, FLANNEL_MTU=1450); false while it is not
// complete.
func (n *flannelNode) readSubnetFile(t *testing.T, path string) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	env := map[string]string{}
	for s := bufio.NewScanner(bytes.NewReader(data)); s.Scan(); {
		k, v, _ := strings.Cut(s.Text(), "=")
		env[k] = v
	}
	subnet, err := netip.ParsePrefix(env["FLANNEL_SUBNET"])
	if err != nil || env["FLANNEL_MTU"] == "" {
		return false
	}
	n.subnet, n.mtu = subnet.Masked(), env["FLANNEL_MTU"]
	return true
}

// pods is the node's pod network as flannel's CNI plugin sets it up: it
// reads flanneld's subnet file and delegates to the bridge plugin with
// this configuration (cni0, the node's lease, a route to the cluster's pod
// CIDR), followed by portmap as in flannel's own manifest. flannel's CNI
// plugin is a module of its own, which our module proxy does not serve;
// its delegation is written out here.
func (n *flannelNode) pods(t *testing.T) *cniNetwork {
	t.Helper()
	return cniNetworkOn(t, n.ns, func(ipamDir string) string {
		return fmt.Sprintf(`{"type": "bridge", "bridge": "cni0", "mtu": %s, "hairpinMode": true, "ipMasq": false,
			"isGateway": true, "isDefaultGateway": true,
			"ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": %q}], "dataDir": %q}}`,
			n.mtu, n.subnet, flannelNetwork, ipamDir)
	})
}

// kubeProxyService writes the nat rules kube-proxy's iptables mode makes
// on the node for a ClusterIP Service with one endpoint: OUTPUT's jump to
// KUBE-SERVICES, the Service's chain and its endpoint's DNAT, each rule
// commented with the Service's name.
func (n *flannelNode) kubeProxyService(t *testing.T, service, clusterIP string, port int, endpoint string) {
	t.Helper()
	const svc, sep = "KUBE-SVC-FLANNELTESTWEB0", "KUBE-SEP-FLANNELTESTWEB0"
	rules := strings.Join([]string{
		"*nat",
		":KUBE-SERVICES - [0:0]", ":" + svc + " - [0:0]", ":" + sep + " - [0:0]",
		`-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		fmt.Sprintf(`-A KUBE-SERVICES -d %s/32 -p tcp -m comment --comment "%s cluster IP" -m tcp --dport %d -j %s`, clusterIP, service, port, svc),
		fmt.Sprintf(`-A %s -m comment --comment "%s -> %s" -j %s`, svc, service, endpoint, sep),
		fmt.Sprintf(`-A %s -p tcp -m comment --comment "%s" -m tcp -j DNAT --to-destination %s`, sep, service, endpoint),
		"COMMIT", "",
	}, "\n")
	restore := exec.Command("ip", "netns", "exec", n.ns, "iptables-restore", "--noflush")
	restore.Stdin = strings.NewReader(rules)
	if out, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("iptables-restore in %s: %v\n%s", n.ns, err, out)
	}
}

// TestSNATMissingWithFlannel is incident 1 on flannel itself: a process on
// node A connects to a ClusterIP whose endpoint is a pod on node B; OUTPUT
// DNATs it, the re-route sends it through flannel's vxlan device. In the
// incident a stale RETURN for node B's lease sits in flannel's chain ahead
// of its MASQUERADE (flannel v0.20 and later flush FLANNEL-POSTRTG when
// they start, so the test leaves the rule as an old flanneld would have, in
// flannel's own words); the SYN leaves unSNATed, the pod answers over the
// underlay, and node A's strict rp_filter drops the reply. nettrace names
// the stale rule, the MASQUERADE it skipped, the Service and the pod. The
// twin is flannel's clean ruleset: the SYN is masqueraded to flannel.1's
// address, the reply returns through the tunnel, no finding.
func TestSNATMissingWithFlannel(t *testing.T) {
	for _, stale := range []bool{true, false} {
		t.Run(map[bool]string{true: "stale", false: "healthy"}[stale], func(t *testing.T) {
			c := newFlannelCluster(t)
			a, b := c.nodes[0], c.nodes[1]
			pods := b.pods(t)
			web := pods.add(t, "shop", "web-5d8c")
			listen(t, web.netns, web.ip+":8080", 0, true)
			const clusterIP = "10.96.0.10"
			a.kubeProxyService(t, "shop/web:http", clusterIP, 80, web.ip+":8080")
			script(t,
				// The ClusterIP is routed as a node routes it: by its default
				// route, over the underlay, until OUTPUT's DNAT re-routes it.
				"ip -n "+a.ns+" route add default via "+b.underlay,
				"ip netns exec "+a.ns+" sysctl -qw net.ipv4.conf.all.rp_filter=1 net.ipv4.conf.ul0.rp_filter=1",
				"ip netns exec "+b.ns+" sysctl -qw net.ipv4.conf.all.rp_filter=2 net.ipv4.conf.ul0.rp_filter=2")
			staleRule := fmt.Sprintf(`! -s %s -d %s -m comment --comment "flanneld masq" -j RETURN`, flannelNetwork, b.subnet)
			if stale {
				// No shell: busybox's (in the VM) would run its own ip.
				sh(t, "ip", "netns", "exec", a.ns, "iptables", "-t", "nat", "-I", "FLANNEL-POSTRTG", "4",
					"!", "-s", flannelNetwork, "-d", b.subnet.String(), "-m", "comment", "--comment", "flanneld masq", "-j", "RETURN")
			}
			recording := filepath.Join(t.TempDir(), "flannel.ntrace")
			w := startWatch(t, "--cni-cache", filepath.Join(pods.cacheDir, "results"), "-w", recording,
				"--netns", a.ns, "--netns", b.ns, "--netns", web.netns)
			err := dial(t, a.ns, "", clusterIP+":80", 4*time.Second)
			tr := w.stop(t)
			x, ok := twinFinding(t, tr, err, stale, "snat-missing-on-tunnel")
			if !ok {
				return
			}
			for _, want := range []string{"DNATed to " + web.ip + ":8080 (pod shop/web-5d8c)", "flannel.1", "IP_RPFILTER"} {
				if !strings.Contains(x.Summary, want) {
					t.Errorf("the finding does not say %q: %s", want, x.Summary)
				}
			}
			r := labRun{family: lab.IPv4}
			r.namedRule(t, x, a.ns, "decided", staleRule)
			r.namedRule(t, x, a.ns, "skipped", fmt.Sprintf(`! -s %s -d %s -m comment --comment "flanneld masq" -j MASQUERADE`, flannelNetwork, flannelNetwork))
			namedService(t, x, output.JSONService{Namespace: "shop", Name: "web", Port: "http", Address: "cluster IP"})
			if want := []output.JSONPod{{Address: web.ip, Pod: "shop/web-5d8c"}}; !slices.Equal(x.Pods, want) {
				t.Errorf("pods named %+v, want %+v", x.Pods, want)
			}
			requireSameReplay(t, recording, tr)
			t.Log(x.Summary)
		})
	}
}
