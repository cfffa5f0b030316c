// Package kube names addresses from the Kubernetes API: the pod that has
// an address, or had it in the last minutes (so that a DNAT to a dead
// endpoint names the pod it was for, and when it went away), and the node
// that has it, and the Service that a cluster IP, external IP,
// load-balancer IP or node port is. It only lists and watches pods, nodes
// and Services, and keeps of each object the few fields a name needs: on
// a large cluster the full objects would cost nettrace more memory than
// its flows.
package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nettrace-dev/nettrace/pkg/service"
)

// Keep is how long a deleted pod's name stays with its address: long
// enough for rules that still send to the pod (a stale DNAT, a conntrack
// entry) to be named after it while an incident is looked at.
const Keep = 10 * time.Minute

// ErrNoAPI says nettrace has no Kubernetes API to ask: no kubeconfig was
// given and it does not run in a pod.
var ErrNoAPI = errors.New("no Kubernetes API: no --kubeconfig, and not in a pod")

// Config is the API's client configuration: from kubeconfig when given,
// else the pod's ServiceAccount when nettrace runs in one (ErrNoAPI when
// it does not).
func Config(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, ErrNoAPI
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster configuration: %w", err)
	}
	return cfg, nil
}

// Directory is what the API says of addresses, kept current by watches.
type Directory struct {
	mu    sync.Mutex
	pods  map[types.UID]pod
	gone  map[netip.Addr]gonePod
	nodes map[string][]netip.Addr
	// services change far less often than pods, and their table is
	// larger: it has a generation of its own, so that a recording
	// carries it again only when a Service changed.
	services      map[types.UID][]service.Frontend
	servicesDirty bool
	servicesGen   uint64
	serviceTable  *service.Table
	now           func() time.Time
	// synced say whether the first lists are in.
	synced []cache.InformerSynced
	// The tables are rebuilt when asked for after a change (dirty): a
	// node sees pod churn far more often than findings.
	dirty            bool
	gen              uint64
	podNames, byNode map[netip.Addr]string
}

// pod is what a name needs of a pod.
type pod struct {
	name  string // namespace/name
	addrs []netip.Addr
}

// gonePod is a pod deleted (or finished) while its address was its own.
type gonePod struct {
	name string
	at   time.Time
}

// NewDirectory is an empty directory; Watch fills one from the API.
func NewDirectory() *Directory {
	return &Directory{pods: map[types.UID]pod{}, gone: map[netip.Addr]gonePod{}, nodes: map[string][]netip.Addr{},
		services: map[types.UID][]service.Frontend{}, now: time.Now, podNames: map[netip.Addr]string{}, byNode: map[netip.Addr]string{}}
}

// Watch starts listing and watching pods, nodes and Services with cfg until ctx
// ends, and returns at once: a slow API must not hold up tracing, which
// names what it can until the lists are in (Listed). The watches retry
// for the whole run, and tell their failures to failed rather than to
// client-go's log, which writes to stderr.
func Watch(ctx context.Context, cfg *rest.Config, failed func(error)) (*Directory, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	d := NewDirectory()
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(slim))
	pods, nodes, services := f.Core().V1().Pods().Informer(), f.Core().V1().Nodes().Informer(), f.Core().V1().Services().Informer()
	for _, i := range []cache.SharedIndexInformer{pods, nodes, services} {
		if err := i.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { failed(err) }); err != nil {
			return nil, fmt.Errorf("watch errors: %w", err)
		}
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { d.SetPod(o.(*corev1.Pod)) },
		UpdateFunc: func(_, o any) { d.SetPod(o.(*corev1.Pod)) },
		DeleteFunc: func(o any) { d.DeletePod(tombstone[*corev1.Pod](o)) },
	}); err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { d.SetNode(o.(*corev1.Node)) },
		UpdateFunc: func(_, o any) { d.SetNode(o.(*corev1.Node)) },
		DeleteFunc: func(o any) { d.DeleteNode(tombstone[*corev1.Node](o)) },
	}); err != nil {
		return nil, fmt.Errorf("watch nodes: %w", err)
	}
	if _, err := services.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { d.SetService(o.(*corev1.Service)) },
		UpdateFunc: func(_, o any) { d.SetService(o.(*corev1.Service)) },
		DeleteFunc: func(o any) { d.DeleteService(tombstone[*corev1.Service](o)) },
	}); err != nil {
		return nil, fmt.Errorf("watch services: %w", err)
	}
	d.synced = []cache.InformerSynced{pods.HasSynced, nodes.HasSynced, services.HasSynced}
	f.Start(ctx.Done())
	return d, nil
}

// Listed waits until the first lists of pods, nodes and Services are in, and says
// false when ctx ends first.
func (d *Directory) Listed(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), d.synced...)
}

// tombstone is the object a delete is about, also when the watch missed
// the delete and the informer learned of it from a later list.
func tombstone[T any](o any) T {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	v, _ := o.(T)
	return v
}

// slim keeps of a pod, node or Service what a name needs, before the
// informer stores it.
func slim(o any) (any, error) {
	switch v := o.(type) {
	case *corev1.Pod:
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: v.Namespace, UID: v.UID, ResourceVersion: v.ResourceVersion},
			Spec:       corev1.PodSpec{HostNetwork: v.Spec.HostNetwork},
			Status:     corev1.PodStatus{Phase: v.Status.Phase, PodIPs: v.Status.PodIPs},
		}, nil
	case *corev1.Node:
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: v.Name, UID: v.UID, ResourceVersion: v.ResourceVersion},
			Status:     corev1.NodeStatus{Addresses: v.Status.Addresses},
		}, nil
	case *corev1.Service:
		var ingress []corev1.LoadBalancerIngress
		for _, in := range v.Status.LoadBalancer.Ingress {
			ingress = append(ingress, corev1.LoadBalancerIngress{IP: in.IP})
		}
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: v.Namespace, UID: v.UID, ResourceVersion: v.ResourceVersion},
			Spec:       corev1.ServiceSpec{ClusterIPs: v.Spec.ClusterIPs, ExternalIPs: v.Spec.ExternalIPs, Ports: v.Spec.Ports},
			Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ingress}},
		}, nil
	}
	return o, nil
}
