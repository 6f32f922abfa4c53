package main

import (
	"strings"
	"testing"

	"github.com/albertofaria/pav/internal/deptest"
)

// The binary links only the Kubernetes API groups PaV calls (package
// kubeclient says why): not client-go's all-groups clientset, informer
// factory or scheme, nor anything else that registers every group; and of
// containerd only the API services the node plugin calls.
func TestBinaryLinksOnlyPavsAPIGroups(t *testing.T) {
	forbidden := map[string]string{
		"k8s.io/client-go/kubernetes":        "the all-groups clientset",
		"k8s.io/client-go/informers":         "the all-groups informer factory",
		"k8s.io/client-go/kubernetes/scheme": "the all-groups scheme (every client-go typed client registers into it)",
		"k8s.io/client-go/discovery":         "the discovery client (registers into the all-groups scheme)",
	}
	// The API groups PaV calls (kubeclient/generated), what the webhook
	// decodes (AdmissionReview, which names an authentication/v1 UserInfo),
	// and the TokenReviews and SubjectAccessReviews of /metrics
	// (kubeclient.Reviews: authentication/v1, authorization/v1).
	groups := map[string]bool{
		"k8s.io/api/core/v1": true, "k8s.io/api/storage/v1": true, "k8s.io/api/coordination/v1": true,
		"k8s.io/api/admissionregistration/v1": true, "k8s.io/api/admission/v1": true, "k8s.io/api/authentication/v1": true,
		"k8s.io/api/authorization/v1": true,
	}

	// Of containerd, only the API's generated types and clients the node
	// plugin calls (task exit events, containers' labels: nodeagent/containerd's
	// Watch) and what they import, not its client library, which
	// brings most of containerd.
	containerd := map[string]bool{
		"github.com/containerd/containerd/api/services/events/v1":     true,
		"github.com/containerd/containerd/api/services/containers/v1": true,
		"github.com/containerd/containerd/api/services/tasks/v1":      true, // client containers' processes (recovery)
		"github.com/containerd/containerd/api/types/task":             true,
		"github.com/containerd/containerd/api/events":                 true,
		"github.com/containerd/containerd/api/types":                  true,
		"github.com/containerd/ttrpc":                                 true,
		"github.com/containerd/typeurl/v2":                            true,
		"github.com/containerd/log":                                   true,
	}

	// Of external-snapshotter's client, the VolumeSnapshot and
	// VolumeGroupSnapshot APIs' types, typed clients and listers (PaV plays
	// csi-snapshotter); the typed clients' scheme also registers the
	// VolumeGroupSnapshot API's older versions.
	snapshotClient := map[string]bool{
		"github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1":                           true,
		"github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/typed/volumesnapshot/v1":      true,
		"github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1":                        true,
		"github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/scheme":                       true,
		"github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1":                      true,
		"github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1beta1":                 true,
		"github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1beta2":                 true,
		"github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/typed/volumegroupsnapshot/v1": true,
		"github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1":                   true,
	}

	for _, pkg := range deptest.Deps(t, false) {
		if why, ok := forbidden[pkg]; ok {
			t.Errorf("pav links %s, %s: use package kubeclient", pkg, why)
		}
		if strings.HasPrefix(pkg, "github.com/containerd/") && !containerd[pkg] {
			t.Errorf("pav links %s: of containerd, it calls the API's events, containers and tasks services only (add it here if that changed on purpose)", pkg)
		}
		if strings.HasPrefix(pkg, "github.com/kubernetes-csi/") && !snapshotClient[pkg] {
			t.Errorf("pav links %s: of external-snapshotter's client, it calls the VolumeSnapshot API only (add it here if that changed on purpose)", pkg)
		}
		if strings.HasPrefix(pkg, "k8s.io/api/") && !groups[pkg] {
			t.Errorf("pav links the API group %s: if PaV now calls it, add it here and to kubeclient/generated (hack/generate.sh)", pkg)
		}
	}
}
