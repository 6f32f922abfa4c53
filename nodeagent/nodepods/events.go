package nodepods

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// podEvents wakes up goroutines waiting for a particular pod to change:
// staging waits on the informer's events instead of polling the API.
type podEvents struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func newPodEvents() *podEvents {
	return &podEvents{subs: map[string]map[chan struct{}]struct{}{}}
}

// handler is registered on the pod informer.
func (e *podEvents) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    e.notify,
		UpdateFunc: func(_, obj interface{}) { e.notify(obj) },
		DeleteFunc: e.notify,
	}
}

func (e *podEvents) notify(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	e.mu.Lock()
	defer e.mu.Unlock()
	for ch := range e.subs[key] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// subscribe returns a channel that receives a value after each change of
// the pod namespace/name, and a function to unsubscribe.
func (e *podEvents) subscribe(namespace, name string) (<-chan struct{}, func()) {
	key := namespace + "/" + name
	ch := make(chan struct{}, 1)
	e.mu.Lock()
	if e.subs[key] == nil {
		e.subs[key] = map[chan struct{}]struct{}{}
	}
	e.subs[key][ch] = struct{}{}
	e.mu.Unlock()
	return ch, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.subs[key], ch)
		if len(e.subs[key]) == 0 {
			delete(e.subs, key)
		}
	}
}
