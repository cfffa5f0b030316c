package netns

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// CNICacheDir is where libcni, the CNI library container runtimes call
// plugins through (containerd, CRI-O, podman), keeps what each sandbox's
// network was set up with (libcni.CacheDir/results): the sandbox's
// namespace path and the CNI_ARGS the runtime passed, which for a
// Kubernetes pod name it. Read with the file system alone: it needs no
// runtime to answer, and is there for as long as the pod's network is.
var CNICacheDir = "/var/lib/cni/results"

// cniCacheEntry is the part of libcni's cache file (its cachedInfo) that
// names a pod.
type cniCacheEntry struct {
	Kind    string      `json:"kind"`
	NetNS   string      `json:"netns"`
	CNIArgs [][2]string `json:"cniArgs"`
}

// Pods lists the namespaces of the Kubernetes pods set up through libcni
// (CNICacheDir), named "pod:namespace/name" (as "netns:INODE" names one
// nothing else names). A cache file that cannot be read, an entry without
// pod arguments, or a namespace gone is left out: the namespace keeps the
// name it has otherwise (the runtime's cni-UUID).
func Pods() []Target {
	files, _ := filepath.Glob(filepath.Join(CNICacheDir, "*"))
	var out []Target
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var c cniCacheEntry
		if json.Unmarshal(b, &c) != nil || c.Kind != "cniCacheV1" || c.NetNS == "" {
			continue
		}
		name := podName(c.CNIArgs)
		if name == "" {
			continue
		}
		if ino, err := inode(c.NetNS); err == nil {
			out = append(out, Target{Name: name, Path: c.NetNS, Inode: ino})
		}
	}
	return out
}

// podName is the pod the CNI_ARGS of a Kubernetes runtime name
// (K8S_POD_NAMESPACE, K8S_POD_NAME), "" when they name none.
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
	return "pod:" + ns + "/" + name
}
