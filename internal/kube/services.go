package kube

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/nettrace-dev/nettrace/pkg/service"
)

// SetService takes a Service as the API has it now: each of its ports at
// each cluster IP, external IP and load-balancer IP, and at its node
// port. A headless or ExternalName Service has no address of its own.
func (d *Directory) SetService(s *corev1.Service) {
	if s == nil {
		return
	}
	var addrs []addressOf
	for _, ip := range s.Spec.ClusterIPs {
		addrs = append(addrs, addressOf{ip, service.ClusterIP})
	}
	for _, ip := range s.Spec.ExternalIPs {
		addrs = append(addrs, addressOf{ip, service.ExternalIP})
	}
	for _, in := range s.Status.LoadBalancer.Ingress {
		addrs = append(addrs, addressOf{in.IP, service.LoadBalancerIP})
	}
	var frontends []service.Frontend
	for _, p := range s.Spec.Ports {
		protocol, ok := protocols[p.Protocol]
		if !ok {
			continue
		}
		named := service.Service{Namespace: s.Namespace, Name: s.Name, Port: p.Name}
		for _, a := range addrs {
			if ip, err := netip.ParseAddr(a.ip); err == nil {
				named.Address = a.kind
				frontends = append(frontends, service.Frontend{Protocol: protocol, Addr: ip, Port: uint16(p.Port), Service: named})
			}
		}
		if p.NodePort != 0 {
			named.Address = service.NodePort
			frontends = append(frontends, service.Frontend{Protocol: protocol, Port: uint16(p.NodePort), Service: named})
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.services[s.UID] = frontends
	d.servicesDirty = true
}

// addressOf is an address a Service has, and what kind of address it is.
type addressOf struct{ ip, kind string }

// protocols are the IP protocol numbers of a Service port's protocols.
var protocols = map[corev1.Protocol]uint8{corev1.ProtocolTCP: 6, corev1.ProtocolUDP: 17, corev1.ProtocolSCTP: 132}

// DeleteService forgets a Service: its addresses are no longer its (a
// cluster IP is given to the next Service that asks).
func (d *Directory) DeleteService(s *corev1.Service) {
	if s == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.services, s.UID)
	d.servicesDirty = true
}

// ServiceFrontends are the Services' frontends, with a generation that
// changes when they do. The table is never changed.
func (d *Directory) ServiceFrontends() (uint64, *service.Table) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.servicesDirty {
		var all []service.Frontend
		for _, f := range d.services {
			all = append(all, f...)
		}
		d.serviceTable, d.servicesDirty = service.NewTable(all), false
		d.servicesGen++
	}
	return d.servicesGen, d.serviceTable
}
