package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates the CustomResourceDefinitions in manifests (YAML or JSON,
// several documents allowed; existing ones are left alone) and waits until each
// is Established and served.
func (e *Env) InstallCRDs(t testing.TB, manifests []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := InstallCRDs(ctx, e, manifests); err != nil {
		t.Fatal(err)
	}
}

// InstallCRDs is Env.InstallCRDs without a test.
func InstallCRDs(ctx context.Context, e *Env, manifests []byte) error {
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("decoding CRD manifest: %w", err)
		}
		if len(obj) == 0 {
			continue // empty document
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() != "CustomResourceDefinition" {
			return fmt.Errorf("InstallCRDs: %s %q is not a CustomResourceDefinition", u.GetKind(), u.GetName())
		}
		if _, err := dyn.Resource(crdResource).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", u.GetName(), err)
		}
		if err := waitEstablished(ctx, dyn, u.GetName()); err != nil {
			return err
		}
		if err := waitServed(ctx, dyn, u); err != nil {
			return err
		}
	}
}

func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	w, err := dyn.Resource(crdResource).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return fmt.Errorf("watching CRD %s: %w", name, err)
	}
	defer w.Stop()
	// the object may already be Established before the watch started
	if cur, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{}); err == nil && established(cur) {
		return nil
	}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch of CRD %s closed before it was Established", name)
			}
			if u, isU := ev.Object.(*unstructured.Unstructured); isU && established(u) {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not Established: %w", name, ctx.Err())
		}
	}
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// waitServed waits until listing each served version of the CRD's resource
// works: Established can precede the handler being installed by a moment.
func waitServed(ctx context.Context, dyn dynamic.Interface, crd *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); !served {
			continue
		}
		gvr := schema.GroupVersionResource{Group: group, Version: fmt.Sprint(m["name"]), Resource: plural}
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s: %s not served: %w", crd.GetName(), gvr, err)
		}
	}
	return nil
}
