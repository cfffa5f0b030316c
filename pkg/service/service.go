// Package service names Kubernetes Services by the addresses they are
// reached at: a cluster IP, external IP or load-balancer IP with a port,
// or a node port at a node's address. kube-proxy's rules name the Service
// they translate for (pkg/explain reads them), but not every packet meets
// such a rule: a proxy that writes no names, a ruleset nettrace could not
// read, an nftables chain that names the Service but not how it was
// addressed. The Kubernetes API knows every Service's frontends
// (internal/kube lists them); recordings keep them (pkg/trace), so that a
// replay names what the live run named.
package service

import (
	"net/netip"
	"slices"
)

// Service is a port of a Kubernetes Service, as a packet reached it.
type Service struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Port is the name of the Service's port; "" for an unnamed one.
	Port string `json:"port,omitempty"`
	// Address says how the packet addressed the Service: one of the
	// Address kinds below; "" when not known.
	Address string `json:"address,omitempty"`
}

// The kinds of address a Service is reached at, as findings say them.
const (
	ClusterIP      = "cluster IP"
	ExternalIP     = "external IP"
	LoadBalancerIP = "load balancer IP"
	NodePort       = "node port"
)

// String names the Service as kubectl does, with the port's name and the
// kind of address: "Service shop/checkout:https, cluster IP".
func (s Service) String() string {
	out := "Service " + s.Namespace + "/" + s.Name
	if s.Port != "" {
		out += ":" + s.Port
	}
	if s.Address != "" {
		out += ", " + s.Address
	}
	return out
}

// Frontend is one address and port a Service's port is reached at.
type Frontend struct {
	Protocol uint8 `json:"protocol"` // IPPROTO_TCP, IPPROTO_UDP or IPPROTO_SCTP
	// Addr is the zero Addr for a node port, which every node's address
	// has.
	Addr    netip.Addr `json:"addr,omitzero"`
	Port    uint16     `json:"port"`
	Service Service    `json:"service"`
}

// Table finds Services by the address a packet was sent to. It is never
// changed once made, so that readers share it without locks.
type Table struct {
	frontends []Frontend
	at        map[frontendKey]Service
}

type frontendKey struct {
	protocol uint8
	addr     netip.Addr
	port     uint16
}

// NewTable indexes frontends. Of two frontends at one address, the later
// one's Service is kept: the API allows no such pair, so one is stale.
func NewTable(frontends []Frontend) *Table {
	t := &Table{frontends: slices.Clone(frontends), at: make(map[frontendKey]Service, len(frontends))}
	for _, f := range frontends {
		t.at[frontendKey{f.Protocol, f.Addr.Unmap(), f.Port}] = f.Service
	}
	return t
}

// Frontends are the frontends the table was made of.
func (t *Table) Frontends() []Frontend {
	if t == nil {
		return nil
	}
	return t.frontends
}

// Len is how many frontends the table has.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.frontends)
}

// At is the Service a packet of protocol sent to dst reached. A node port
// counts only when toNode says dst's address is a node's: elsewhere the
// same port is some other server's.
func (t *Table) At(protocol uint8, dst netip.AddrPort, toNode bool) (Service, bool) {
	if t == nil {
		return Service{}, false
	}
	if s, ok := t.at[frontendKey{protocol, dst.Addr().Unmap(), dst.Port()}]; ok {
		return s, true
	}
	if !toNode {
		return Service{}, false
	}
	s, ok := t.at[frontendKey{protocol, netip.Addr{}, dst.Port()}]
	return s, ok
}
