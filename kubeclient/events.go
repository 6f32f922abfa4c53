package kubeclient

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/scheme"
	corev1client "github.com/albertofaria/pav/kubeclient/generated/clientset/typed/core/v1"
)

// Scheme holds the types of the API groups PaV uses, PavProvisioner's
// included: an Event refers to its object by the object's kind, from here.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(scheme.AddToScheme(Scheme))
	utilruntime.Must(v1alpha1.AddToScheme(Scheme))
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
