package explain

import "net/netip"

// Pod is a Kubernetes pod a finding names by one of its addresses:
// users think in pods, and a pod's address tells them nothing until they
// look it up (kubectl get pods -o wide), which during an incident they
// should not have to.
type Pod struct {
	Address netip.Addr
	Name    string // namespace/name
}

// atPod writes an address and port with the pod it belongs to,
// "10.244.2.10:8080 (pod shop/web-5d8c)", and keeps the pod for the
// finding; the address alone when no pod is known to have it.
func (fd *Finding) atPod(n Context, ap netip.AddrPort) string {
	name := n.PodName(ap.Addr())
	if name == "" {
		return ap.String()
	}
	pod := Pod{Address: ap.Addr(), Name: name}
	known := false
	for _, p := range fd.Pods {
		known = known || p == pod
	}
	if !known {
		fd.Pods = append(fd.Pods, pod)
	}
	return ap.String() + " (pod " + name + ")"
}
