package kube

import (
	"maps"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// SetPod takes a pod as the API has it now. A pod on the host's network
// has the node's address, which names the node and not the pod; a pod
// that finished (Succeeded, Failed) has given its address back.
func (d *Directory) SetPod(p *corev1.Pod) {
	if p == nil || p.Spec.HostNetwork {
		return
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		d.DeletePod(p)
		return
	}
	var addrs []netip.Addr
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			addrs = append(addrs, a)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pods[p.UID] = pod{name: p.Namespace + "/" + p.Name, addrs: addrs}
	d.dirty = true
}

// DeletePod takes a pod gone: its addresses keep its name for Keep,
// with when it went.
func (d *Directory) DeletePod(p *corev1.Pod) {
	if p == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old, ok := d.pods[p.UID]
	if !ok {
		return
	}
	delete(d.pods, p.UID)
	for _, a := range old.addrs {
		d.gone[a] = gonePod{name: old.name, at: d.now()}
	}
	d.dirty = true
}

// SetNode takes a node's addresses (internal and external) as the API has
// them now.
func (d *Directory) SetNode(n *corev1.Node) {
	if n == nil {
		return
	}
	var addrs []netip.Addr
	for _, na := range n.Status.Addresses {
		if na.Type != corev1.NodeInternalIP && na.Type != corev1.NodeExternalIP {
			continue
		}
		if a, err := netip.ParseAddr(na.Address); err == nil {
			addrs = append(addrs, a)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nodes[n.Name] = addrs
	d.dirty = true
}

// DeleteNode forgets a node.
func (d *Directory) DeleteNode(n *corev1.Node) {
	if n == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.nodes, n.Name)
	d.dirty = true
}

// PodAddresses are the pods' addresses (namespace/name), a deleted pod's
// as "namespace/name, deleted at 15:04:05 UTC" for Keep unless a live pod
// has the address now, with a generation that changes when they do. The
// map is never changed.
func (d *Directory) PodAddresses() (uint64, map[netip.Addr]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rebuild()
	return d.gen, d.podNames
}

// NodeAddresses are the nodes' addresses (node name), with the same
// generation as PodAddresses. The map is never changed.
func (d *Directory) NodeAddresses() (uint64, map[netip.Addr]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rebuild()
	return d.gen, d.byNode
}

// rebuild makes new tables after a change, and forgets the pods gone for
// longer than Keep.
func (d *Directory) rebuild() {
	now := d.now()
	for a, g := range d.gone {
		if now.Sub(g.at) > Keep {
			delete(d.gone, a)
			d.dirty = true
		}
	}
	if !d.dirty {
		return
	}
	pods := make(map[netip.Addr]string, len(d.pods)+len(d.gone))
	for a, g := range d.gone {
		pods[a] = g.name + ", deleted at " + g.at.UTC().Format("15:04:05") + " UTC"
	}
	for _, p := range d.pods {
		for _, a := range p.addrs {
			pods[a] = p.name
		}
	}
	nodes := map[netip.Addr]string{}
	for name, addrs := range d.nodes {
		for _, a := range addrs {
			nodes[a] = name
		}
	}
	d.podNames, d.byNode, d.dirty = pods, nodes, false
	d.gen++
}

// Addresses gives names of addresses (PodAddresses, NodeAddresses, or
// another source's) with a generation that changes when they do.
type Addresses func() (uint64, map[netip.Addr]string)

// Over names addresses as top does, and those top does not have as base
// does: the API's pods over the ones the node's own files name, which
// stay for pods the API has not listed (yet, or at all).
func Over(top, base Addresses) Addresses {
	var (
		mu              sync.Mutex
		topGen, baseGen uint64
		gen             uint64
		merged          map[netip.Addr]string
	)
	return func() (uint64, map[netip.Addr]string) {
		tg, t := top()
		bg, b := base()
		mu.Lock()
		defer mu.Unlock()
		if merged == nil || tg != topGen || bg != baseGen {
			next := make(map[netip.Addr]string, len(t)+len(b))
			maps.Copy(next, b)
			maps.Copy(next, t)
			merged, topGen, baseGen = next, tg, bg
			gen++
		}
		return gen, merged
	}
}
