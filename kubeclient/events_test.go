package kubeclient

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// sinkCall is what the broadcaster asked of the sink for one Event.
type sinkCall struct {
	verb, object string
}

// recordingSink tells of every call a broadcaster makes.
type recordingSink struct{ calls chan sinkCall }

func (s recordingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.calls <- sinkCall{"create", e.InvolvedObject.Name}
	return e, nil
}

func (s recordingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.calls <- sinkCall{"update", e.InvolvedObject.Name}
	return e, nil
}

func (s recordingSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.calls <- sinkCall{"patch", e.InvolvedObject.Name}
	return e, nil
}

// The correlator's caches hold EventCacheSize objects: an Event repeated
// while its object is cached is counted on the first one (a patch), and
// created anew once as many other objects had Events since.
func TestEventBroadcasterCachesAreBounded(t *testing.T) {
	b := NewEventBroadcaster()
	defer b.Shutdown()
	sink := recordingSink{calls: make(chan sinkCall)}
	b.StartRecordingToSink(sink)
	rec := b.NewRecorder(Scheme, corev1.EventSource{Component: "test"})
	emit := func(i int) sinkCall {
		t.Helper()
		name := fmt.Sprintf("claim-%d", i)
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
		rec.Event(claim, corev1.EventTypeNormal, "Provisioning", "External provisioner is provisioning volume")
		select {
		case c := <-sink.calls:
			if c.object != name {
				t.Fatalf("sink called for %s, want %s", c.object, name)
			}
			return c
		case <-time.After(30 * time.Second):
			t.Fatalf("no sink call for the Event of %s", name)
		}
		return sinkCall{}
	}

	emit(0)
	if c := emit(0); c.verb != "patch" {
		t.Fatalf("a repeated Event of a cached object: %s, want patch", c.verb)
	}
	for i := 1; i <= EventCacheSize; i++ {
		emit(i)
	}
	if c := emit(0); c.verb != "create" {
		t.Errorf("a repeated Event after %d other objects: %s, want create (evicted)", EventCacheSize, c.verb)
	}
}
