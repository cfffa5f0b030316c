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
// finding; with its node for a node's address; the address alone when
// neither is known to have it.
func (fd *Finding) atPod(n Context, ap netip.AddrPort) string {
	return ap.String() + fd.podNote(n, ap.Addr())
}

// addrAtPod is atPod for an address without a port.
func (fd *Finding) addrAtPod(n Context, a netip.Addr) string {
	return a.String() + fd.podNote(n, a)
}

// podNote is " (pod NAME)" for an address a pod has, kept for the
// finding, else " (node NAME)" for a node's, or "".
func (fd *Finding) podNote(n Context, a netip.Addr) string {
	name := n.PodName(a)
	if name == "" {
		if node := n.NodeName(a); node != "" {
			return " (node " + node + ")"
		}
		return ""
	}
	pod := Pod{Address: a, Name: name}
	known := false
	for _, p := range fd.Pods {
		known = known || p == pod
	}
	if !known {
		fd.Pods = append(fd.Pods, pod)
	}
	return " (pod " + name + ")"
}
