package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// kubeletTunables are the kernel settings the kubelet insists on (it sets
// them, or with protectKernelDefaults refuses to start): bound, in the
// node's mount namespace only, over the files it reads, so that two
// kubelets on one machine change nothing of the host's (kernel.panic_on_oops
// among them).
var kubeletTunables = []struct{ path, value string }{
	{"vm/overcommit_memory", "1"},
	{"vm/panic_on_oom", "0"},
	{"kernel/panic", "10"},
	{"kernel/panic_on_oops", "1"},
	{"kernel/keys/root_maxkeys", "1000000"},
	{"kernel/keys/root_maxbytes", "25000000"},
}

// holderScript makes the node's mount namespace (unshare's, slave to the
// host's so that nothing mounted in it reaches the host), then sleeps: the
// node's components join it through the holder's pid. Its own file systems
// are shared, as systemd makes a node's: a pod's namespace that containerd
// mounts under /run/netns reaches the containers that mount /run/netns
// with HostToContainer propagation (nettrace's DaemonSet) also when the pod
// came after them.
const holderScript = `set -e
for d in /run /var/lib /var/log; do mount -t tmpfs nettrace-cluster "$d"; mount --make-rshared "$d"; done
i=0
for kv in $TUNABLES; do
	i=$((i+1)); f=$DIR/tunable-$i
	echo "${kv#*=}" > "$f"
	mount --bind "$f" "/proc/sys/${kv%%=*}"
done
touch "$DIR/holder.ready"
exec sleep 2147483647
`

// startHolder starts the node's mount namespace and returns its holder's
// pid once its mounts are made.
func startHolder(n Node) (int, error) {
	var tunables []string
	for _, t := range kubeletTunables {
		tunables = append(tunables, t.path+"="+t.value)
	}
	if err := os.MkdirAll(n.dir(), 0o755); err != nil {
		return 0, err
	}
	ready := filepath.Join(n.dir(), "holder.ready")
	p, err := start(n.Name+"-holder", place{netns: n.Netns}, []string{"DIR=" + n.dir(), "TUNABLES=" + strings.Join(tunables, " ")},
		"unshare", "--mount", "--propagation", "slave", "sh", "-c", holderScript)
	if err != nil {
		return 0, err
	}
	err = waitFor(n.Name+"'s mount namespace", func() error {
		if _, err := os.Stat(ready); err != nil {
			if syscall.Kill(p.Pid, 0) != nil {
				return exited(n.Name + "-holder")
			}
			return err
		}
		return nil
	})
	return p.Pid, err
}

// containerdSocket is where the node's containerd listens: in StateDir,
// so that the host reaches it (to import images) without entering the
// node.
func (n Node) containerdSocket() string { return filepath.Join(n.dir(), "containerd.sock") }

// cniBinDir holds the CNI plugins the nodes' containerd calls: Debian's
// reference plugins, and flannel's.
func cniBinDir() string { return filepath.Join(StateDir, "cni-bin") }

// startContainerd runs Debian's containerd with its CRI plugin on the node,
// kube-flannel's CNI configuration its network (writeConflist).
func startContainerd(n Node, holder int) error {
	if err := writeConflist(n, NetworkName); err != nil {
		return err
	}
	config := filepath.Join(n.dir(), "containerd.toml")
	err := writeFile(config, ContainerdConfig{Root: "/var/lib/containerd", State: "/run/containerd", Socket: n.containerdSocket(),
		Opt: filepath.Join(n.dir(), "opt"), SandboxImage: PauseImage, CNIBinDir: cniBinDir(), CNIConfDir: filepath.Dir(conflistPath(n))}.TOML())
	if err != nil {
		return err
	}
	p, err := start(n.Name+"-containerd", place{n.Netns, holder}, nil, "containerd", "--config", config)
	if err != nil {
		return err
	}
	return waitFor(n.Name+"'s containerd", func() error {
		if syscall.Kill(p.Pid, 0) != nil {
			return exited(n.Name + "-containerd")
		}
		_, err := os.Stat(n.containerdSocket())
		return err
	})
}

// startKubelet runs the node's kubelet: cgroupfs under the node's own
// cgroup root, containerd's socket, the node's name and address.
func startKubelet(n Node, b Binaries, holder int) error {
	config := filepath.Join(n.dir(), "kubelet.yaml")
	err := writeFile(config, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
# This machine's cgroups are v1, which the kubelet refuses by default.
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
clusterDomain: cluster.local
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
# The node's filesystems are tmpfs of the host's memory: no eviction or
# image collection for their sake.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, n.IP, filepath.Join(StateDir, "pki", "ca.crt"), n.cgroupRoot(), n.containerdSocket()))
	if err != nil {
		return err
	}
	_, err = start(n.Name+"-kubelet", place{n.Netns, holder}, nil, b.kube("kubelet"),
		"--config", config, "--kubeconfig", kubeconfigPath(n.Name+"-kubelet"),
		"--hostname-override", n.Name, "--node-ip", n.IP, "--v", "1")
	return err
}

// startFlanneld runs flanneld as kube-flannel does: the Kubernetes subnet
// manager (the node's pod CIDR from its Node object), kube-flannel.yml's
// net-conf, vxlan, masquerading pods' traffic that leaves the cluster.
func startFlanneld(n Node, b Binaries, holder int) error {
	netConf := filepath.Join(StateDir, "net-conf.json")
	if err := writeFile(netConf, fmt.Sprintf(`{"Network": %q, "EnableNFTables": false, "Backend": {"Type": "vxlan"}}`, ClusterCIDR)); err != nil {
		return err
	}
	_, err := start(n.Name+"-flanneld", place{n.Netns, holder}, []string{"NODE_NAME=" + n.Name}, b.Flanneld,
		"--kube-subnet-mgr", "--kubeconfig-file", kubeconfigPath("flannel"), "--net-config-path", netConf,
		"--iface", "eth0", "--ip-masq")
	return err
}

// startKubeProxy runs kube-proxy on the node as o says. It leaves the
// kernel's conntrack table size alone (maxPerCore 0): that setting is the
// host's, not the node's.
func startKubeProxy(n Node, b Binaries, holder int, o Options) error {
	clusterCIDR := ClusterCIDR
	if o.NoProxyClusterCIDR {
		clusterCIDR = ""
	}
	config := filepath.Join(n.dir(), "kube-proxy.yaml")
	err := writeFile(config, fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
clusterCIDR: %q
mode: %s
conntrack: {maxPerCore: 0, min: 0}
metricsBindAddress: 127.0.0.1:10249
`, kubeconfigPath("kube-proxy"), n.Name, clusterCIDR, o.ProxyMode))
	if err != nil {
		return err
	}
	_, err = start(n.Name+"-kube-proxy", place{n.Netns, holder}, nil, b.kube("kube-proxy"), "--config", config, "--v", "1")
	return err
}

// ImportImage imports an OCI archive (an image built here: nothing can
// be pulled) into every node's containerd.
func ImportImage(archive string) error {
	for _, n := range AllNodes() {
		if err := importImage(n, archive); err != nil {
			return err
		}
	}
	return nil
}

// importImage imports an OCI archive into the node's containerd, in the
// namespace the CRI plugin uses.
func importImage(n Node, archive string) error {
	return waitFor("import "+filepath.Base(archive)+" on "+n.Name, func() error {
		return run([]string{"ctr", "--address", n.containerdSocket(), "--namespace", "k8s.io", "images", "import", archive})
	})
}

func writeFile(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

// holderPid reads a running node's holder pid (for `ntlab cluster` and
// tests that enter a node after Up returned).
func holderPid(n Node) (int, error) {
	b, err := os.ReadFile(filepath.Join(StateDir, "pids", n.Name+"-holder.pid"))
	if err != nil {
		return 0, fmt.Errorf("cluster is not up: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// PodLogs is the end of the logs of every container the node ran (the
// kubelet's /var/log/pods, in the node's mount namespace), for a test that
// failed.
func PodLogs(n Node) string {
	holder, err := holderPid(n)
	if err != nil {
		return err.Error()
	}
	out, _ := exec.Command("nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", holder), "--",
		"sh", "-c", "tail -n 5 /var/log/pods/*/*/*.log").CombinedOutput()
	return string(out)
}

// PodNetns is the path of a running container's network namespace (its
// pod's), for a test that calls from a pod: the pods' namespaces are
// mounted in the node's mount namespace only, so the path is the
// container's process's (/proc/PID/ns/net). containerID is the API's
// (containerd://ID).
func PodNetns(n Node, containerID string) (string, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	out, err := exec.Command("ctr", "--address", n.containerdSocket(), "--namespace", "k8s.io", "tasks", "ls").Output()
	if err != nil {
		return "", fmt.Errorf("ctr tasks ls on %s: %w", n.Name, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == id {
			return "/proc/" + f[1] + "/ns/net", nil
		}
	}
	return "", fmt.Errorf("no running task %s on %s", id, n.Name)
}
