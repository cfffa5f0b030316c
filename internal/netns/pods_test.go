package netns

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestPods: libcni's cache names a pod's namespace (found by its inode)
// from the CNI_ARGS the kubelet passed; entries of other runtimes' users
// (no pod arguments), of namespaces gone, of another kind or unreadable
// are left out. The addresses the plugins gave pods are named after them,
// a pod gone keeping its address unless a live pod has it now.
func TestPods(t *testing.T) {
	dir := t.TempDir()
	was := CNICacheDir
	CNICacheDir = filepath.Join(dir, "results")
	t.Cleanup(func() { CNICacheDir = was })
	if err := os.Mkdir(CNICacheDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Any file stands for a namespace: it is found by its inode.
	ns, ns2 := filepath.Join(dir, "cni-1234"), filepath.Join(dir, "cni-5678")
	for _, f := range []string{ns, ns2} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(file, kind, netns, args string, ips ...string) {
		result := `{"cniVersion": "1.0.0", "ips": [`
		for i, ip := range ips {
			result += fmt.Sprintf(`%s{"interface": 2, "address": %q}`, map[bool]string{true: ", "}[i > 0], ip)
		}
		body := fmt.Sprintf(`{"kind": %q, "containerId": "abc", "ifName": "eth0", "networkName": "cbr0", "netns": %q, "cniArgs": %s, "result": %s]}}`, kind, netns, args, result)
		if err := os.WriteFile(filepath.Join(CNICacheDir, file), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	entry("cbr0-abc-eth0", "cniCacheV1", ns, `[["IgnoreUnknown", "1"], ["K8S_POD_NAMESPACE", "shop"], ["K8S_POD_NAME", "checkout-7d9f"]]`,
		"10.88.7.3/24", "fd00:88::3/64")
	entry("podman-def-eth0", "cniCacheV1", ns, `[["IgnoreUnknown", "1"]]`, "10.88.7.9/24")
	// containerd 1.6's libcni: no netns field, the sandbox's interface
	// names it; and the sandbox's lo, whose address is no pod's.
	loopback := `{"kind": "cniCacheV1", "networkName": "cni-loopback", "cniArgs": [["K8S_POD_NAMESPACE", "shop"], ["K8S_POD_NAME", "cart"]],
		"result": {"interfaces": [{"name": "lo", "sandbox": %q}], "ips": [{"interface": 0, "address": "127.0.0.1/8"}]}}`
	// Its sandbox written as /var/run/netns/..., where /var/run is not the
	// host's (a container's root): found where it is, under /run.
	wasVarRun, wasRun := varRun, runDir
	varRun, runDir = filepath.Join(dir, "var-run")+"/", dir+"/"
	t.Cleanup(func() { varRun, runDir = wasVarRun, wasRun })
	written := varRun + filepath.Base(ns2)
	if err := os.WriteFile(filepath.Join(CNICacheDir, "cni-loopback-ghi-lo"), fmt.Appendf(nil, loopback, written), 0o600); err != nil {
		t.Fatal(err)
	}
	// Read before the live pod's entry, which takes 10.88.7.3 from it.
	entry("cbr0-a-gone-eth0", "cniCacheV1", filepath.Join(dir, "gone"), `[["K8S_POD_NAMESPACE", "shop"], ["K8S_POD_NAME", "gone"]]`,
		"10.88.7.2/24", "10.88.7.3/24")
	entry("other-kind", "cniCacheV2", ns, `[["K8S_POD_NAMESPACE", "shop"], ["K8S_POD_NAME", "v2"]]`)
	if err := os.WriteFile(filepath.Join(CNICacheDir, "broken"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	ino, err := inode(ns)
	if err != nil {
		t.Fatal(err)
	}
	ino2, err := inode(ns2)
	if err != nil {
		t.Fatal(err)
	}
	got := Pods()
	want := []Target{{Name: "pod:shop/checkout-7d9f", Path: ns, Inode: ino}, {Name: "pod:shop/cart", Path: ns2, Inode: ino2}}
	sort.Slice(got, func(i, j int) bool { return got[i].Name > got[j].Name })
	if !slices.Equal(got, want) {
		t.Fatalf("pods %+v, want %+v", got, want)
	}
	// The pod's name wins over the runtime's name for its namespace.
	n := NewNamer([]Target{{Name: "cni-1234", Path: ns, Inode: ino}})
	if name := n.Name(ino); name != "pod:shop/checkout-7d9f" {
		t.Errorf("named %q", name)
	}
	_, addrs := n.PodAddresses()
	wantAddrs := map[netip.Addr]string{
		netip.MustParseAddr("10.88.7.3"):  "shop/checkout-7d9f",
		netip.MustParseAddr("fd00:88::3"): "shop/checkout-7d9f",
		netip.MustParseAddr("10.88.7.2"):  "shop/gone",
	}
	if !maps.Equal(addrs, wantAddrs) {
		t.Errorf("pod addresses %v, want %v", addrs, wantAddrs)
	}
}

// Read from under the host's root (kubectl debug node: --cni-cache
// /host/var/lib/cni/results), a pod's sandbox is found under that root,
// where the runtime's path names it on the host, /var/run or not, and not
// at that path in the container reading it.
func TestPodsUnderHostRoot(t *testing.T) {
	host := t.TempDir()
	was, wasVarRun, wasRun := CNICacheDir, varRun, runDir
	t.Cleanup(func() { CNICacheDir, varRun, runDir = was, wasVarRun, wasRun })
	CNICacheDir = host + hostCacheDir
	varRun, runDir = "/var/run/", "/run/"
	if err := os.MkdirAll(CNICacheDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(host, "run/netns"), 0o700); err != nil {
		t.Fatal(err)
	}
	var want []Target
	for i, written := range []string{"/run/netns/cni-host-root-1", "/var/run/netns/cni-host-root-2"} {
		at := filepath.Join(host, "run/netns", filepath.Base(written))
		if err := os.WriteFile(at, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		ino, err := inode(at)
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"kind": "cniCacheV1", "netns": %q, "cniArgs": [["K8S_POD_NAMESPACE", "shop"], ["K8S_POD_NAME", "web-%d"]]}`, written, i)
		if err := os.WriteFile(filepath.Join(CNICacheDir, fmt.Sprint("cbr0-", i)), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		want = append(want, Target{Name: fmt.Sprint("pod:shop/web-", i), Path: at, Inode: ino})
	}
	if got := Pods(); !slices.Equal(got, want) {
		t.Fatalf("pods %+v, want %+v", got, want)
	}
}

// A pod's sandbox has traffic before its runtime's CNI call writes
// libcni's cache: its namespace is first named after a process in it,
// and after its pod once the cache has it.
func TestPodNameReplacesAProcessName(t *testing.T) {
	was := CNICacheDir
	CNICacheDir = t.TempDir()
	t.Cleanup(func() { CNICacheDir = was })
	ino, err := inode("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	n := NewNamer(nil)
	first := n.Name(ino)
	if strings.HasPrefix(first, "pod:") {
		t.Fatalf("named %q before the cache has a pod", first)
	}
	entry := `{"kind": "cniCacheV1", "netns": "/proc/self/ns/net", "cniArgs": [["K8S_POD_NAMESPACE", "shop"], ["K8S_POD_NAME", "late"]], "result": {"ips": []}}`
	if err := os.WriteFile(filepath.Join(CNICacheDir, "cbr0-late-eth0"), []byte(entry), 0o600); err != nil {
		t.Fatal(err)
	}
	n.lastLook = time.Time{} // the look a second later
	if name := n.Name(ino); name != "pod:shop/late" {
		t.Errorf("named %q after the cache named its pod (first %q)", name, first)
	}
}
