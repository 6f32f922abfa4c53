// Package kubeclient is PaV's client of the Kubernetes API: the typed clients of
// the API groups its processes call (Interface, PavInterface, Clientset),
// informers on them (NewInformer), the scheme of those groups (Scheme), and
// the broadcaster and sink of Events (NewEventBroadcaster, EventSink).
//
// It exists to keep the pav binary small. client-go's all-groups clientset,
// informer factory and scheme (k8s.io/client-go/kubernetes, /informers,
// /kubernetes/scheme), and its typed clients, which register every group in
// that scheme, link the types of every API group and version. kubeclient/generated
// is client-gen's client of just the resources PaV uses (hack/generate.sh); a
// test in cmd/pav keeps client-go's out of the binary.
package kubeclient

import (
	"fmt"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/typed/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/typed/volumesnapshot/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	pavv1alpha1 "github.com/albertofaria/pav/crds/generated/clientset/versioned/typed/crds/v1alpha1"
	admissionregistrationv1 "github.com/albertofaria/pav/kubeclient/generated/clientset/typed/admissionregistration/v1"
	coordinationv1 "github.com/albertofaria/pav/kubeclient/generated/clientset/typed/coordination/v1"
	corev1 "github.com/albertofaria/pav/kubeclient/generated/clientset/typed/core/v1"
	storagev1 "github.com/albertofaria/pav/kubeclient/generated/clientset/typed/storage/v1"
)

// Interface is the built-in API as PaV's processes use it. Clientset
// implements it, and so does the fake Clientset of
// kubeclient/generated/clientset/fake for tests.
type Interface interface {
	CoreV1() corev1.CoreV1Interface
	StorageV1() storagev1.StorageV1Interface
	CoordinationV1() coordinationv1.CoordinationV1Interface
	AdmissionregistrationV1() admissionregistrationv1.AdmissionregistrationV1Interface
}

// PavInterface is the API group of PavProvisioners. Clientset implements it,
// and so does the fake Clientset of crds/generated/clientset/versioned/fake.
type PavInterface interface {
	PavV1alpha1() pavv1alpha1.PavV1alpha1Interface
}

// SnapshotInterface is the API groups of VolumeSnapshots and
// VolumeGroupSnapshots (external-snapshotter's CRDs). Clientset implements
// it, and so does the fake Clientset of external-snapshotter's
// client/v8/clientset/versioned/fake.
type SnapshotInterface interface {
	SnapshotV1() snapshotv1.SnapshotV1Interface
	GroupsnapshotV1() groupsnapshotv1.GroupsnapshotV1Interface
}

// Clientset is the client of every API group PaV uses, over one HTTP client.
// Unlike client-gen's clientsets it has no discovery client, whose package
// registers every built-in group.
type Clientset struct {
	core                  *corev1.CoreV1Client
	storage               *storagev1.StorageV1Client
	coordination          *coordinationv1.CoordinationV1Client
	admissionregistration *admissionregistrationv1.AdmissionregistrationV1Client
	pav                   *pavv1alpha1.PavV1alpha1Client
	snapshot              *snapshotv1.SnapshotV1Client
	groupSnapshot         *groupsnapshotv1.GroupsnapshotV1Client
}

var (
	_ Interface         = (*Clientset)(nil)
	_ PavInterface      = (*Clientset)(nil)
	_ SnapshotInterface = (*Clientset)(nil)
)

func (c *Clientset) CoreV1() corev1.CoreV1Interface          { return c.core }
func (c *Clientset) StorageV1() storagev1.StorageV1Interface { return c.storage }
func (c *Clientset) CoordinationV1() coordinationv1.CoordinationV1Interface {
	return c.coordination
}
func (c *Clientset) AdmissionregistrationV1() admissionregistrationv1.AdmissionregistrationV1Interface {
	return c.admissionregistration
}
func (c *Clientset) PavV1alpha1() pavv1alpha1.PavV1alpha1Interface { return c.pav }
func (c *Clientset) SnapshotV1() snapshotv1.SnapshotV1Interface    { return c.snapshot }
func (c *Clientset) GroupsnapshotV1() groupsnapshotv1.GroupsnapshotV1Interface {
	return c.groupSnapshot
}

// NewForConfig builds a Clientset. The built-in groups share one rate limiter
// (cfg's QPS and Burst), as in client-go's clientset; PavProvisioners have a
// limiter of their own, as they had with their own clientset.
func NewForConfig(cfg *rest.Config) (*Clientset, error) {
	config := *cfg
	if config.UserAgent == "" {
		config.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(&config)
	if err != nil {
		return nil, fmt.Errorf("kubernetes HTTP client: %w", err)
	}
	var c Clientset
	if c.pav, err = pavv1alpha1.NewForConfigAndClient(&config, httpClient); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	shared := config
	if shared.RateLimiter == nil && shared.QPS > 0 {
		if shared.Burst <= 0 {
			return nil, fmt.Errorf("kubernetes client: burst must be greater than 0 when QPS is")
		}
		shared.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(shared.QPS, shared.Burst)
	}
	if c.core, err = corev1.NewForConfigAndClient(&shared, httpClient); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.storage, err = storagev1.NewForConfigAndClient(&shared, httpClient); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.coordination, err = coordinationv1.NewForConfigAndClient(&shared, httpClient); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.admissionregistration, err = admissionregistrationv1.NewForConfigAndClient(&shared, httpClient); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.snapshot, err = snapshotv1.NewForConfigAndClient(&shared, httpClient); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.groupSnapshot, err = groupsnapshotv1.NewForConfigAndClient(&shared, httpClient); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &c, nil
}
