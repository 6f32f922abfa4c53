package kubeclient

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Resource is what an informer needs of a typed client of one resource
// (Pods(namespace), PersistentVolumes(), ...): its list and its watch.
type Resource[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Selector narrows an informer to the objects whose labels and fields
// match; "" matches every object.
type Selector struct{ Label, Field string }

// NewInformer returns an informer on the objects (of obj's type) of
// resource that sel selects, built as client-go's informer factory builds
// one: indexed by namespace, and using watch-list requests unless client (the
// clientset resource belongs to) says it cannot serve them, as fake
// clientsets do.
func NewInformer[L runtime.Object](client any, resource Resource[L], obj runtime.Object, resync time.Duration, sel Selector) cache.SharedIndexInformer {
	narrow := func(o *metav1.ListOptions) {
		if sel.Label != "" {
			o.LabelSelector = sel.Label
		}
		if sel.Field != "" {
			o.FieldSelector = sel.Field
		}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			narrow(&o)
			return resource.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			narrow(&o)
			return resource.Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), obj, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// Run runs informers until ctx ends, as an informer factory's Start does;
// the function it returns waits until they have stopped (its Shutdown).
func Run(ctx context.Context, informers ...cache.SharedIndexInformer) (waitStopped func()) {
	var g wait.Group
	for _, inf := range informers {
		g.StartWithContext(ctx, inf.RunWithContext)
	}
	return g.Wait
}
