package kubeclient

import (
	"context"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/scheme"
	corev1client "github.com/albertofaria/pav/kubeclient/generated/clientset/typed/core/v1"
)

// Scheme holds the types of the API groups PaV uses, PavProvisioner's and
// VolumeSnapshot's and VolumeGroupSnapshot's included: an Event refers to its object by the object's kind, from here.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(scheme.AddToScheme(Scheme))
	utilruntime.Must(v1alpha1.AddToScheme(Scheme))
	utilruntime.Must(snapshotv1.AddToScheme(Scheme))
	utilruntime.Must(groupsnapshotv1.AddToScheme(Scheme))
}

// EventCacheSize bounds each of the three caches with which client-go's
// event correlator deduplicates, aggregates and rate-limits Events (keyed by
// object, by object and reason, and by the whole Event). client-go's default
// of 4096 entries each makes a long-running process keep megabytes for
// Events long sent (docs/architecture.md). An object with Events is evicted only
// after EventCacheSize others had Events since, and then its next Event is
// created anew instead of counted on the last one.
const EventCacheSize = 1024

// NewEventBroadcaster is record.NewBroadcaster with the correlator's caches
// bounded by EventCacheSize.
func NewEventBroadcaster(opts ...record.BroadcasterOption) record.EventBroadcaster {
	opts = append(opts, record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: EventCacheSize}))
	return record.NewBroadcaster(opts...)
}

// EventSink writes the Events of a record.EventBroadcaster, each in its own
// namespace, as client-go's EventSinkImpl does on client-go's clients.
type EventSink struct{ Client corev1client.EventsGetter }

func (s EventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.Client.Events(e.Namespace).Create(context.Background(), e, metav1.CreateOptions{})
}

func (s EventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.Client.Events(e.Namespace).Update(context.Background(), e, metav1.UpdateOptions{})
}

func (s EventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.Client.Events(e.Namespace).Patch(context.Background(), e.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
