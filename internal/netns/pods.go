package netns

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// CNICacheDir is where libcni, the CNI library container runtimes call
// plugins through (containerd, CRI-O, podman), keeps what each sandbox's
// network was set up with (libcni.CacheDir/results): the sandbox's
// namespace path and the CNI_ARGS the runtime passed, which for a
// Kubernetes pod name it. Read with the file system alone: it needs no
// runtime to answer, and is there for as long as the pod's network is.
var CNICacheDir = "/var/lib/cni/results"

// cniCacheEntry is the part of libcni's cache file (its cachedInfo) that
// names a pod, and the addresses the plugins gave it (the result's ips).
// libcni before v1.1 (containerd 1.6's) writes no netns: the result's
// interface inside the sandbox names it.
type cniCacheEntry struct {
	Kind    string      `json:"kind"`
	NetNS   string      `json:"netns"`
	CNIArgs [][2]string `json:"cniArgs"`
	Result  struct {
		Interfaces []struct {
			Sandbox string `json:"sandbox"`
		} `json:"interfaces"`
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	} `json:"result"`
}

// netns is the sandbox's namespace path: the entry's, else the one its
// result's interfaces are in.
func (c *cniCacheEntry) netns() string {
	if c.NetNS != "" {
		return c.NetNS
	}
	for _, i := range c.Result.Interfaces {
		if i.Sandbox != "" {
			return i.Sandbox
		}
	}
	return ""
}

// varRun and its target: runtimes write a sandbox's namespace as
// /var/run/netns/NAME (containerd 1.6), which in a container whose root is
// not the host's (nettrace's own image, which mounts only /run/netns) is
// not there; on a host /var/run is a link to /run.
var varRun, runDir = "/var/run/", "/run/"

// hostCacheDir is libcni's cache on a host. A cache read from under
// another root (kubectl debug node mounts the host's at /host, and is told
// --cni-cache /host/var/lib/cni/results) names its sandboxes as the host
// sees them: they are under that root too.
const hostCacheDir = "/var/lib/cni/results"

// hostRoot is the root CNICacheDir is read from under, "" for the host's.
func hostRoot() string {
	root, _ := strings.CutSuffix(filepath.Clean(CNICacheDir), hostCacheDir)
	if root == filepath.Clean(CNICacheDir) {
		return ""
	}
	return root
}

// sandboxPath is where the namespace at a path a runtime wrote is, with
// its inode (0 when it is gone): under the host's root when the cache is
// read from under one, and also where /var/run is not the host's.
func sandboxPath(path string) (string, uint32) {
	candidates := []string{path}
	if rest, ok := strings.CutPrefix(path, varRun); ok {
		candidates = append(candidates, runDir+rest)
	}
	if root := hostRoot(); root != "" {
		// The host's view first: the container's own /run is not the
		// host's, and a path there would be another namespace or none.
		candidates = append([]string{root + candidates[len(candidates)-1]}, candidates...)
	}
	for _, at := range candidates {
		if ino, err := inode(at); err == nil {
			return at, ino
		}
	}
	return candidates[0], 0
}

// cniPod is a Kubernetes pod found in libcni's cache.
type cniPod struct {
	name  string // namespace/name
	netns string
	inode uint32 // 0: its namespace is gone
	addrs []netip.Addr
}

// cniPods reads libcni's cache (CNICacheDir). A cache file that cannot be
// read, or an entry without pod arguments, is left out.
func cniPods() []cniPod {
	files, _ := filepath.Glob(filepath.Join(CNICacheDir, "*"))
	var out []cniPod
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var c cniCacheEntry
		if json.Unmarshal(b, &c) != nil || c.Kind != "cniCacheV1" || c.netns() == "" {
			continue
		}
		pod := cniPod{name: podName(c.CNIArgs), netns: c.netns()}
		if pod.name == "" {
			continue
		}
		pod.netns, pod.inode = sandboxPath(pod.netns)
		for _, ip := range c.Result.IPs {
			// containerd sets up each sandbox's lo through libcni too: its
			// 127.0.0.1 is every pod's.
			if p, err := netip.ParsePrefix(ip.Address); err == nil && !p.Addr().IsLoopback() {
				pod.addrs = append(pod.addrs, p.Addr())
			}
		}
		out = append(out, pod)
	}
	return out
}

// Pods lists the namespaces of the Kubernetes pods set up through libcni
// (CNICacheDir), named "pod:namespace/name" (as "netns:INODE" names one
// nothing else names). A namespace gone is left out: the namespace keeps
// the name it has otherwise (the runtime's cni-UUID).
func Pods() []Target { return podTargets(cniPods()) }

func podTargets(pods []cniPod) []Target {
	var out []Target
	for _, p := range pods {
		if p.inode != 0 {
			out = append(out, Target{Name: "pod:" + p.name, Path: p.netns, Inode: p.inode})
		}
	}
	return out
}

// podAddresses names the addresses libcni's cache says the plugins gave
// pods (namespace/name). A pod whose namespace is gone keeps its address
// (a runtime stopped during a pod's removal leaves the entry, and rules
// still send to it), unless a live pod has it now.
func podAddresses(pods []cniPod) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	live := map[netip.Addr]bool{}
	for _, p := range pods {
		for _, a := range p.addrs {
			if _, taken := out[a]; !taken || (p.inode != 0 && !live[a]) {
				out[a], live[a] = p.name, p.inode != 0
			}
		}
	}
	return out
}

// podName is the pod the CNI_ARGS of a Kubernetes runtime name
// (namespace/name, from K8S_POD_NAMESPACE and K8S_POD_NAME), "" when they
// name none.
func podName(args [][2]string) string {
	var ns, name string
	for _, a := range args {
		switch a[0] {
		case "K8S_POD_NAMESPACE":
			ns = a[1]
		case "K8S_POD_NAME":
			name = a[1]
		}
	}
	if ns == "" || name == "" {
		return ""
	}
	return ns + "/" + name
}
