//go:build integration

package integration

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/integration/framework"
)

// accessKinds are the objects of deployment.yaml that decide who may do
// what; the workloads are left out (nothing runs PaV here).
var accessKinds = map[string]bool{
	"Namespace": true, "ServiceAccount": true, "CustomResourceDefinition": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"ConfigMap": true, // the parameter of pav-pod-confinement
}

// applyAccessObjects creates deployment.yaml's RBAC and admission policies.
func applyAccessObjects(t *testing.T, cfg *rest.Config) {
	t.Helper()
	applyManifestObjects(t, cfg, accessKinds)
}

// applyManifestObjects creates the objects of deployment.yaml of the given kinds.
func applyManifestObjects(t *testing.T, cfg *rest.Config, kinds map[string]bool) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	dyn := dynamic.NewForConfigOrDie(cfg)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if !kinds[obj.GetKind()] {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if ns := obj.GetNamespace(); ns != "" {
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := ri.Create(context.Background(), &obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// as is a client acting as user (the admin impersonates it).
func as(t *testing.T, cfg *rest.Config, user string, groups []string, extra map[string][]string) kubernetes.Interface {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated"), Extra: extra}
	return kubernetes.NewForConfigOrDie(c)
}

func serviceAccount(name string) (string, []string) {
	return "system:serviceaccount:pav:" + name, []string{"system:serviceaccounts", "system:serviceaccounts:pav"}
}

// What each of PaV's service accounts, and a tenant, can and cannot do once
// deployment.yaml's RBAC and admission policies are in place, asked of a real
// API server (SelfSubjectAccessReview for RBAC, real requests for the
// policies, which RBAC cannot express). Issue 9: a tenant can neither forge
// nor tamper with PaV's pods; each service account is held to its job.
func TestAccess(t *testing.T) {
	env := framework.New(t) // its own API server: the policies would bind the other tests' controller
	cfg := env.Config
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cfg)
	applyAccessObjects(t, cfg)

	createTenant(t, admin)
	tenant := as(t, cfg, "alice", nil, nil)
	kubelet := as(t, cfg, "system:node:node-a", []string{"system:nodes"}, nil)
	waitForRole(t, tenant, "create", "pods", "", tenantNS)
	waitForRole(t, kubelet, "patch", "pods", "status", tenantNS)
	ctrlUser, ctrlGroups := serviceAccount("controller")
	ctrl := as(t, cfg, ctrlUser, ctrlGroups, nil)
	nodeUser, nodeGroups := serviceAccount("node")
	node := as(t, cfg, nodeUser, nodeGroups, map[string][]string{"authentication.kubernetes.io/node-name": {"node-a"}})

	// PaV's creation pod for a claim, in the tenant's namespace.
	creation := protocol.BuildPod(&corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, protocol.PodOptions{Provisioner: "host-directory", Phase: protocol.PhaseCreation,
		Name: protocol.PodName(protocol.PhaseCreation, "uid-1"), ClaimUID: "uid-1", HostDir: protocol.PodDirRoot(protocol.DefaultKubeletDir) + "/x"})

	stagingOnNodeA := protocol.BuildPod(&corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS},
		Spec:       creation.Spec,
	}, protocol.PodOptions{Provisioner: "host-directory", Phase: protocol.PhaseStaging, Name: "staging-a",
		StagingID: "id-a", NodeName: "node-a", HostDir: protocol.PodDirRoot(protocol.DefaultKubeletDir) + "/y"})
	stagingOnNodeA.Finalizers = []string{protocol.FinalizerStaging}
	stagingOnNodeB := stagingOnNodeA.DeepCopy()
	stagingOnNodeB.Name, stagingOnNodeB.Spec.NodeName = "staging-b", "node-b"
	waitForPolicies(t, tenant, ctrl, node, creation, stagingOnNodeB)

	patch := func(c kubernetes.Interface, ns, name, body string, subresource ...string) error {
		_, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, subresource...)
		return err
	}
	forgedSuccess := `{"metadata":{"annotations":{"` + protocol.AnnotationResultsCollected + `":"true","` +
		protocol.AnnotationSucceeded + `":"true","` + protocol.AnnotationResultHandle + `":".."}}}`

	// Tenants: no forged results, no tampering with PaV's real pods.
	resultOnly := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "results", Namespace: tenantNS,
		Annotations: map[string]string{protocol.AnnotationResultHandle: "."}},
		Spec: creation.Spec}
	_, err := tenant.CoreV1().Pods(tenantNS).Create(ctx, resultOnly, metav1.CreateOptions{})
	denied(t, "tenant creates a pod with PaV's result annotation", err, "reserved to PaV")
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: creation.Name, Namespace: tenantNS}, Spec: creation.Spec}
	_, err = tenant.CoreV1().Pods(tenantNS).Create(ctx, plain, metav1.CreateOptions{})
	allowed(t, "tenant creates an ordinary pod (even under PaV's pod name)", err)
	_ = admin.CoreV1().Pods(tenantNS).Delete(ctx, plain.Name, metav1.DeleteOptions{})
	waitGone(t, admin, tenantNS, plain.Name)

	_, err = ctrl.CoreV1().Pods(tenantNS).Create(ctx, creation, metav1.CreateOptions{})
	allowed(t, "controller creates its creation pod in the tenant's namespace", err)
	denied(t, "tenant writes a result on PaV's pod",
		patch(tenant, tenantNS, creation.Name, `{"metadata":{"annotations":{"`+protocol.AnnotationResultHandle+`":"."}}}`), "reserved to PaV")
	denied(t, "tenant relabels PaV's pod",
		patch(tenant, tenantNS, creation.Name, `{"metadata":{"labels":{"`+protocol.LabelClaimUID+`":"other"}}}`), "reserved to PaV")
	denied(t, "tenant swaps the image of PaV's pod",
		patch(tenant, tenantNS, creation.Name, `{"spec":{"containers":[{"name":"c","image":"evil"}]}}`), "only PaV may change")
	ephemeral := `{"spec":{"ephemeralContainers":[{"name":"debug","image":"evil","targetContainerName":"c"}]}}`
	_, err = tenant.CoreV1().Pods(tenantNS).Patch(ctx, creation.Name, types.StrategicMergePatchType, []byte(ephemeral), metav1.PatchOptions{}, "ephemeralcontainers")
	// Refused by pav-pod-exec (and pav-reserved-pods): whichever answers first.
	denied(t, "tenant adds an ephemeral container to PaV's pod", err, "forbidden: ValidatingAdmissionPolicy 'pav-")
	allowed(t, "tenant adds its own label to PaV's pod",
		patch(tenant, tenantNS, creation.Name, `{"metadata":{"labels":{"team":"a"}}}`))

	// Every subresource that writes a pod's metadata or spec. pods/status keeps
	// the labels and annotations of the update; a Binding's are copied onto
	// the pod it binds; pods/resize changes the spec.
	denied(t, "tenant marks PaV's pod succeeded through pods/status",
		patch(tenant, tenantNS, creation.Name, forgedSuccess, "status"), "reserved to PaV")
	denied(t, "a kubelet marks PaV's pod succeeded through pods/status",
		patch(kubelet, tenantNS, creation.Name, forgedSuccess, "status"), "reserved to PaV")
	denied(t, "a kubelet removes PaV's label through pods/status",
		patch(kubelet, tenantNS, creation.Name, `{"metadata":{"labels":{"`+protocol.LabelPhase+`":null}}}`, "status"), "reserved to PaV")
	allowed(t, "a kubelet reports the status of PaV's pod",
		patch(kubelet, tenantNS, creation.Name, `{"status":{"conditions":[{"type":"PodScheduled","status":"True"}]}}`, "status"))
	bind := func(c kubernetes.Interface, pod string, labels, annotations map[string]string) error {
		return c.CoreV1().Pods(tenantNS).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Labels: labels, Annotations: annotations},
			Target:     corev1.ObjectReference{Kind: "Node", Name: "node-a"},
		}, metav1.CreateOptions{})
	}
	denied(t, "a scheduler binds PaV's pod with a result annotation",
		bind(tenant, creation.Name, nil, map[string]string{protocol.AnnotationSucceeded: "true"}), "reserved to PaV")
	unscheduled := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unscheduled", Namespace: tenantNS}, Spec: creation.Spec}
	if _, err := tenant.CoreV1().Pods(tenantNS).Create(ctx, unscheduled, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	denied(t, "a scheduler binds an ordinary pod with PaV's labels",
		bind(tenant, unscheduled.Name, creation.Labels, nil), "reserved to PaV")
	allowed(t, "a scheduler binds an ordinary pod", bind(tenant, unscheduled.Name, map[string]string{"zone": "a"}, nil))
	sized := creation.DeepCopy()
	sized.Name = "sized"
	sized.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}
	if _, err := ctrl.CoreV1().Pods(tenantNS).Create(ctx, sized, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	denied(t, "tenant resizes PaV's pod",
		patch(tenant, tenantNS, sized.Name, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"150m"}}}]}}`, "resize"), "only PaV may change")
	// A tenant may delete PaV's pod, but not take PaV's result finalizer off
	// it: the pod stays, marked deleted, until the controller has acted on
	// its outcome and lets it go.
	held := creation.DeepCopy()
	held.Name, held.Finalizers = "held", []string{protocol.FinalizerResult}
	_, err = ctrl.CoreV1().Pods(tenantNS).Create(ctx, held, metav1.CreateOptions{})
	allowed(t, "controller creates its creation pod with the result finalizer", err)
	allowed(t, "tenant deletes PaV's pod", tenant.CoreV1().Pods(tenantNS).Delete(ctx, held.Name, metav1.DeleteOptions{}))
	if got, err := admin.CoreV1().Pods(tenantNS).Get(ctx, held.Name, metav1.GetOptions{}); err != nil || got.DeletionTimestamp == nil {
		t.Errorf("PaV's pod deleted by a tenant: %v, %+v; want it kept, marked deleted", err, got)
	}
	_, err = tenant.CoreV1().Pods(tenantNS).Patch(ctx, held.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	denied(t, "tenant removes PaV's finalizer", err, "reserved to PaV")
	_, err = ctrl.CoreV1().Pods(tenantNS).Patch(ctx, held.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	allowed(t, "controller lets its pod go", err)
	waitGone(t, admin, tenantNS, held.Name)
	modification := creation.DeepCopy()
	modification.Name, modification.Labels[protocol.LabelPhase] = "modification", string(protocol.PhaseModification)
	_, err = ctrl.CoreV1().Pods(tenantNS).Create(ctx, modification, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	allowed(t, "controller creates a modification pod", err)

	// The controller: only its own kinds of pods, only its PVs, only claims' metadata.
	_, err = ctrl.CoreV1().Pods(tenantNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: creation.Spec}, metav1.CreateOptions{})
	denied(t, "controller creates an ordinary pod", err, "only validation, creation, deletion, expansion, modification, capacity and (group) snapshot creation and deletion pods")
	_, err = ctrl.CoreV1().Pods(tenantNS).Create(ctx, stagingOnNodeA, metav1.CreateOptions{})
	denied(t, "controller creates a staging pod", err, "only validation, creation, deletion, expansion, modification, capacity and (group) snapshot creation and deletion pods")
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: tenantNS}, Spec: creation.Spec}
	if _, err := admin.CoreV1().Pods(tenantNS).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	denied(t, "controller deletes a pod that is not PaV's", ctrl.CoreV1().Pods(tenantNS).Delete(ctx, other.Name, metav1.DeleteOptions{}), "only PaV's pods")

	fs := corev1.PersistentVolumeFilesystem
	pv := func(name string, ann map[string]string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}, Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:             &fs,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}},
		}}
	}
	if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, pv("someone-elses", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	denied(t, "controller deletes a PV it did not provision",
		ctrl.CoreV1().PersistentVolumes().Delete(ctx, "someone-elses", metav1.DeleteOptions{}), "only the PersistentVolumes it provisioned")
	_, err = ctrl.CoreV1().PersistentVolumes().Create(ctx, pv("unrecorded", nil), metav1.CreateOptions{})
	denied(t, "controller creates a PV that records no claim", err, "record their claim")
	_, err = ctrl.CoreV1().PersistentVolumes().Create(ctx, pv("pvc-1", map[string]string{protocol.AnnotationClaimSnapshot: "{}"}), metav1.CreateOptions{})
	allowed(t, "controller creates a PV it provisions", err)
	allowed(t, "controller deletes a PV it provisioned", ctrl.CoreV1().PersistentVolumes().Delete(ctx, "pvc-1", metav1.DeleteOptions{}))

	expandable := true
	if _, err := admin.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "expandable"}, Provisioner: "host-directory", AllowVolumeExpansion: &expandable,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim, err := admin.CoreV1().PersistentVolumeClaims(tenantNS).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &[]string{"expandable"}[0],
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A bound claim's requests are the one thing of its spec the API lets change.
	claim.Status.Phase = corev1.ClaimBound
	if claim, err = admin.CoreV1().PersistentVolumeClaims(tenantNS).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimPatch := func(body string) error {
		_, err := ctrl.CoreV1().PersistentVolumeClaims(tenantNS).Patch(ctx, claim.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	allowed(t, "controller adds its finalizer to a claim", claimPatch(`{"metadata":{"finalizers":["`+protocol.FinalizerClaim+`"]}}`))
	denied(t, "controller changes a claim's spec", claimPatch(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`), "only the metadata of claims")

	provisioners := schema.GroupVersionResource{Group: "pav.albertofaria.github.io", Version: "v1alpha1", Resource: "pavprovisioners"}
	if _, err := dynamic.NewForConfigOrDie(cfg).Resource(provisioners).Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "pav.albertofaria.github.io/v1alpha1", "kind": "PavProvisioner",
		"metadata": map[string]interface{}{"name": "p"},
		"spec": map[string]interface{}{"provisioningModes": []interface{}{"Static"},
			"volumeStaging": map[string]interface{}{"podTemplate": map[string]interface{}{"spec": map[string]interface{}{
				"containers": []interface{}{map[string]interface{}{"name": "c", "image": "busybox"}}}}}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctrlCfg := rest.CopyConfig(cfg)
	ctrlCfg.Impersonate = rest.ImpersonationConfig{UserName: ctrlUser, Groups: append(ctrlGroups, "system:authenticated")}
	provPatch := func(patch string) error {
		_, err := dynamic.NewForConfigOrDie(ctrlCfg).Resource(provisioners).Patch(ctx, "p", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	allowed(t, "controller adds its finalizer to a PavProvisioner",
		provPatch(`{"metadata":{"finalizers":["`+protocol.FinalizerProvisioner+`"]}}`))
	denied(t, "controller changes a PavProvisioner's spec",
		provPatch(`{"spec":{"provisioningModes":["Dynamic","Static"]}}`), "never changes what a PavProvisioner says")

	// CSIDrivers: only those of PavProvisioners.
	driver := func(name string, owned bool) *storagev1.CSIDriver {
		d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if owned {
			d.OwnerReferences = []metav1.OwnerReference{{APIVersion: "pav.albertofaria.github.io/v1alpha1", Kind: "PavProvisioner", Name: name, UID: "uid-p"}}
		}
		return d
	}
	if _, err := admin.StorageV1().CSIDrivers().Create(ctx, driver("ebs.csi.example.com", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	denied(t, "controller deletes another CSI driver's CSIDriver",
		ctrl.StorageV1().CSIDrivers().Delete(ctx, "ebs.csi.example.com", metav1.DeleteOptions{}), "only CSIDrivers that a PavProvisioner owns")
	_, err = ctrl.StorageV1().CSIDrivers().Create(ctx, driver("unowned", false), metav1.CreateOptions{})
	denied(t, "controller creates a CSIDriver no PavProvisioner owns", err, "only CSIDrivers that a PavProvisioner owns")
	_, err = ctrl.StorageV1().CSIDrivers().Create(ctx, driver("p", true), metav1.CreateOptions{})
	allowed(t, "controller creates a PavProvisioner's CSIDriver", err)
	setPolicy := func(name string) error {
		d, err := admin.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		file := storagev1.FileFSGroupPolicy
		d.Spec.FSGroupPolicy = &file
		_, err = ctrl.StorageV1().CSIDrivers().Update(ctx, d, metav1.UpdateOptions{})
		return err
	}
	allowed(t, "controller changes the fsGroupPolicy of a PavProvisioner's CSIDriver", setPolicy("p"))
	denied(t, "controller changes another CSI driver's CSIDriver", setPolicy("ebs.csi.example.com"), "only CSIDrivers that a PavProvisioner owns")
	allowed(t, "controller deletes a PavProvisioner's CSIDriver", ctrl.StorageV1().CSIDrivers().Delete(ctx, "p", metav1.DeleteOptions{}))

	// Its webhook configuration: the CA bundle, not what the API server sends.
	none, ignore := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Ignore
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "pav.albertofaria.github.io"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "pavprovisioners.pav.albertofaria.github.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &[]string{"https://127.0.0.1:1/validate"}[0]},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"things"}}}},
			SideEffects:             &none,
			FailurePolicy:           &ignore,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	webhookUpdate := func(change func(w *admissionregistrationv1.ValidatingWebhook)) error {
		cfg, err := ctrl.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "pav.albertofaria.github.io", metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&cfg.Webhooks[0])
		_, err = ctrl.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
		return err
	}
	allowed(t, "controller sets its webhook's CA bundle",
		webhookUpdate(func(w *admissionregistrationv1.ValidatingWebhook) { w.ClientConfig.CABundle = []byte("ca") }))
	denied(t, "controller sends itself every Secret", webhookUpdate(func(w *admissionregistrationv1.ValidatingWebhook) {
		w.Rules[0].APIGroups, w.Rules[0].Resources = []string{""}, []string{"secrets"}
	}), "only the CA bundle")
	denied(t, "controller points its webhook elsewhere", webhookUpdate(func(w *admissionregistrationv1.ValidatingWebhook) {
		w.ClientConfig.URL = &[]string{"https://evil.example.com/"}[0]
	}), "only the CA bundle")

	// The node plugin: only staging/unstaging pods on its own node; only pods there.
	_, err = node.CoreV1().Pods(tenantNS).Create(ctx, stagingOnNodeA, metav1.CreateOptions{})
	allowed(t, "node plugin of node-a creates a staging pod on node-a", err)
	_, err = node.CoreV1().Pods(tenantNS).Create(ctx, stagingOnNodeB, metav1.CreateOptions{})
	denied(t, "node plugin of node-a creates a staging pod on node-b", err, "only pods on its own node")
	creationOnA := creation.DeepCopy()
	creationOnA.Name, creationOnA.Spec.NodeName = "creation-a", "node-a"
	_, err = node.CoreV1().Pods(tenantNS).Create(ctx, creationOnA, metav1.CreateOptions{})
	denied(t, "node plugin creates a creation pod", err, "only staging and unstaging pods and inline volumes' creation and deletion pods")
	inlineOnA, err := protocol.InlinePod(&corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS}, Spec: creation.Spec},
		"host-directory", protocol.PodDirRoot(protocol.DefaultKubeletDir), "node-a", protocol.PhaseInlineCreation, protocol.InlineVolume{VolumeID: "csi-1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = node.CoreV1().Pods(tenantNS).Create(ctx, inlineOnA, metav1.CreateOptions{})
	allowed(t, "node plugin of node-a creates an inline volume's creation pod on node-a", err)
	inlineOnB := inlineOnA.DeepCopy()
	inlineOnB.Name, inlineOnB.Spec.NodeName = "inline-b", "node-b"
	_, err = node.CoreV1().Pods(tenantNS).Create(ctx, inlineOnB, metav1.CreateOptions{})
	denied(t, "node plugin of node-a creates an inline volume's creation pod on node-b", err, "only pods on its own node")
	_, err = ctrl.CoreV1().Pods(tenantNS).Create(ctx, inlineOnB, metav1.CreateOptions{})
	denied(t, "controller creates an inline volume's creation pod", err, "only validation, creation, deletion, expansion, modification, capacity and (group) snapshot creation and deletion pods")
	allowed(t, "node plugin releases an inline volume's creation pod", patch(node, tenantNS, inlineOnA.Name, `{"metadata":{"finalizers":null}}`))
	denied(t, "node plugin writes on a pod of another node",
		patch(node, tenantNS, creation.Name, `{"metadata":{"annotations":{"`+protocol.AnnotationResultsCollected+`":"true"}}}`), "only pods on its own node")
	denied(t, "node plugin deletes a pod that is not PaV's", node.CoreV1().Pods(tenantNS).Delete(ctx, other.Name, metav1.DeleteOptions{}), "only pods on its own node")
	allowed(t, "node plugin releases its staging pod",
		patch(node, tenantNS, stagingOnNodeA.Name, `{"metadata":{"annotations":{"`+protocol.AnnotationUnstaged+`":"true"}}}`))

	// Who writes which of PaV's annotations: the node plugin of the pod's node
	// its results, succeeded and unstaged; nobody else changes what a pod was
	// created with.
	_, err = ctrl.CoreV1().Pods(tenantNS).Create(ctx, creationOnA, metav1.CreateOptions{})
	allowed(t, "controller creates a creation pod that runs on node-a", err)
	denied(t, "controller marks its pod succeeded",
		patch(ctrl, tenantNS, creationOnA.Name, forgedSuccess), "never writes the node plugin's annotations")
	born := creation.DeepCopy()
	born.Name = "born-succeeded"
	metav1.SetMetaDataAnnotation(&born.ObjectMeta, protocol.AnnotationSucceeded, "true")
	_, err = ctrl.CoreV1().Pods(tenantNS).Create(ctx, born, metav1.CreateOptions{})
	denied(t, "controller creates a pod that says it succeeded", err, "never writes the node plugin's annotations")
	denied(t, "node plugin changes what the controller recorded on a pod of its node",
		patch(node, tenantNS, creationOnA.Name, `{"metadata":{"annotations":{"`+protocol.AnnotationCreationConfig+`":"{}"}}}`), "only its own annotations")
	denied(t, "node plugin relabels a pod of its node",
		patch(node, tenantNS, creationOnA.Name, `{"metadata":{"labels":{"`+protocol.LabelClaimUID+`":"other"}}}`), "only its own annotations")
	allowed(t, "node plugin collects the results of a pod that ran on its node",
		patch(node, tenantNS, creationOnA.Name, forgedSuccess))
	// Each of the node plugin's annotations, one by one (on a pod the
	// tenant's RBAC lets it patch, so that only the policies decide).
	for _, a := range protocol.NodePluginAnnotations {
		one := func(by string) string { return `{"metadata":{"annotations":{"` + a + `":"written by ` + by + `"}}}` }
		denied(t, "tenant writes "+a+" on PaV's pod", patch(tenant, tenantNS, creationOnA.Name, one("tenant")), "reserved to PaV")
		denied(t, "controller writes "+a+" on its pod", patch(ctrl, tenantNS, creationOnA.Name, one("controller")), "never writes the node plugin's annotations")
		allowed(t, "node plugin writes "+a+" on a pod of its node", patch(node, tenantNS, creationOnA.Name, one("node plugin")))
	}
	allowed(t, "node plugin removes its staging pod's finalizer",
		patch(node, tenantNS, stagingOnNodeA.Name, `{"metadata":{"finalizers":null}}`))
	stagingOnGoneNode := stagingOnNodeA.DeepCopy()
	stagingOnGoneNode.Name = "staging-gone"
	if _, err := node.CoreV1().Pods(tenantNS).Create(ctx, stagingOnGoneNode, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allowed(t, "controller releases a staging pod of a node that is gone",
		patch(ctrl, tenantNS, stagingOnGoneNode.Name, `{"metadata":{"finalizers":null}}`))

	checkPodConfinement(t, admin, ctrl, node, creation, stagingOnNodeA)

	checkExec(t, cfg, admin, tenant, creation)

	checkRBAC(t, tenant, ctrl, node)
}

// checkExec: nobody but PaV's service accounts and cluster admins may exec,
// attach, port-forward or add ephemeral containers into PaV's pods (policy
// pav-pod-exec), though the tenant's "edit" role grants it all.
func checkExec(t *testing.T, cfg *rest.Config, admin, tenant kubernetes.Interface, creation *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	// PaV's controller may exec nowhere by RBAC; grant it here, in the
	// tenant's namespace, so that the policy alone decides. And a cluster
	// admin who is not in system:masters: bound to ClusterRole cluster-admin.
	if _, err := admin.RbacV1().Roles(tenantNS).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "exec"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/exec", "pods/attach", "pods/portforward"},
			Verbs: []string{"get", "create"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctrlUser, ctrlGroups := serviceAccount("controller")
	if _, err := admin.RbacV1().RoleBindings(tenantNS).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "controller-exec"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "exec"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "controller", Namespace: "pav"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "carol-cluster-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "carol"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctrl := as(t, cfg, ctrlUser, ctrlGroups, nil)
	carol := as(t, cfg, "carol", nil, nil)
	waitForRole(t, ctrl, "create", "pods", "exec", tenantNS)
	waitForRole(t, carol, "delete", "pods", "", tenantNS)

	// connect makes the request of kubectl exec, attach or port-forward.
	// Admission comes before the API server looks for the pod and its
	// kubelet, so whatever the policy lets through fails later (here the
	// pods are not even scheduled), with another error.
	connect := func(c kubernetes.Interface, sub, pod string) error {
		req := c.CoreV1().RESTClient().Post().Namespace(tenantNS).Resource("pods").Name(pod).SubResource(sub)
		switch sub {
		case "exec":
			req = req.Param("command", "true").Param("stdout", "true")
		case "attach":
			req = req.Param("stdout", "true")
		case "portforward":
			req = req.Param("ports", "80")
		}
		return req.Do(ctx).Error()
	}
	const refused = "only cluster admins may"
	// past the policy: any error but its refusal.
	passed := func(what string, err error) {
		t.Helper()
		if err == nil || strings.Contains(err.Error(), refused) || strings.Contains(err.Error(), "pav-pod-exec") {
			t.Errorf("%s: %v, want past admission (an error from the pod's lookup or its kubelet)", what, err)
		}
	}
	// The API server loads a new policy a moment after it is created.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := connect(tenant, "exec", creation.Name)
		if err != nil && strings.Contains(err.Error(), refused) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("policy pav-pod-exec does not apply after 30 s: a tenant's exec into %s got %v", creation.Name, err)
		}
	}

	for _, phase := range protocol.Phases {
		name := protocol.PodName(phase, "k")
		for _, sub := range []string{"exec", "attach", "portforward"} {
			denied(t, fmt.Sprintf("tenant %s into PaV's %s pod", sub, phase), connect(tenant, sub, name), refused)
		}
		denied(t, fmt.Sprintf("tenant exec into PaV's %s pod under another name", phase),
			connect(tenant, "exec", protocol.AlternatePodName(name)), refused)
		passed(fmt.Sprintf("PaV's controller execs into a %s pod", phase), connect(ctrl, "exec", name))
	}
	err := connect(tenant, "exec", creation.Name)
	denied(t, "tenant exec into PaV's creation pod", err, "is PaV's")
	if !apierrors.IsForbidden(err) {
		t.Errorf("tenant exec into PaV's creation pod: %v, want Forbidden", err)
	}
	for _, sub := range []string{"exec", "attach", "portforward"} {
		passed("system:masters "+sub+" into PaV's creation pod", connect(admin, sub, creation.Name))
		passed("a cluster-admin "+sub+" into PaV's creation pod", connect(carol, sub, creation.Name))
	}
	passed("tenant exec into its own pod", connect(tenant, "exec", "web"))
	passed("tenant exec into its own pod named pav-something", connect(tenant, "exec", "pav-web"))

	// Ephemeral containers: the policy sees the pod, so only PaV's pods.
	addDebug := func(c kubernetes.Interface, pod string) error {
		_, err := c.CoreV1().Pods(tenantNS).Patch(ctx, pod, types.StrategicMergePatchType,
			[]byte(`{"spec":{"ephemeralContainers":[{"name":"debug","image":"busybox","targetContainerName":"c"}]}}`),
			metav1.PatchOptions{}, "ephemeralcontainers")
		return err
	}
	// pav-pod-exec or pav-reserved-pods, whichever answers first.
	denied(t, "tenant adds an ephemeral container to PaV's pod", addDebug(tenant, creation.Name), "forbidden: ValidatingAdmissionPolicy 'pav-")
	lookalike := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: protocol.PodName(protocol.PhaseStaging, "mine"), Namespace: tenantNS}, Spec: creation.Spec}
	if _, err := tenant.CoreV1().Pods(tenantNS).Create(ctx, lookalike, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allowed(t, "tenant adds an ephemeral container to its own pod named like PaV's", addDebug(tenant, lookalike.Name))
	denied(t, "tenant exec into its own pod named like PaV's (the policy's collateral)", connect(tenant, "exec", lookalike.Name), refused)
	allowed(t, "a cluster-admin adds an ephemeral container to PaV's pod", addDebug(carol, creation.Name))
}

// tenantNS is the tenant's namespace, where PaV's pods may run (the admin
// labelled it); elsewhereNS one where they may not.
const tenantNS, elsewhereNS = "tenant", "elsewhere"

// createTenant makes the namespaces, and the roles of tenant "alice" (what
// "edit" grants on pods and claims) and of the kubelets.
func createTenant(t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	// PaV's pods may run in the tenant's namespace, which the admin labelled,
	// and in "default", which ConfigMap pav/pav-pod-confinement lists; not in
	// "elsewhere".
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: tenantNS, Labels: map[string]string{protocol.LabelAllowPods: "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: elsewhereNS}},
	} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What the "edit" role grants on pods and claims (aggregated roles stay
	// empty without kube-controller-manager), and the pod subresources that
	// write metadata, which schedulers and operators have.
	if _, err := admin.RbacV1().Roles(tenantNS).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "edit"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""},
			Resources: []string{"pods", "pods/ephemeralcontainers", "pods/exec", "pods/attach", "pods/portforward", "persistentvolumeclaims",
				"pods/status", "pods/resize", "pods/binding"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(tenantNS).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A kubelet writes the status of the pods on its node (here RBAC alone
	// stands for the Node authorizer).
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "kubelet-pod-status"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"get", "update", "patch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubelet-pod-status"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubelet-pod-status"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", Name: "system:nodes"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkPodConfinement: PaV's pods run only in the namespaces, and as the
// service accounts, that ConfigMap pav/pav-pod-confinement and the namespace
// label allow.
func checkPodConfinement(t *testing.T, admin, ctrl, node kubernetes.Interface, creation, stagingOnNodeA *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	podIn := func(p *corev1.Pod, ns, serviceAccount string) *corev1.Pod {
		q := p.DeepCopy()
		q.Name, q.Namespace, q.Spec.ServiceAccountName = q.Name+"-as-"+cmp.Or(serviceAccount, "unset"), ns, serviceAccount
		return q
	}
	for _, c := range []struct {
		who  string
		as   kubernetes.Interface
		pod  *corev1.Pod
		want string // "" allowed
	}{
		{"controller", ctrl, podIn(creation, "kube-system", ""), "may not run pods in namespace kube-system"},
		{"node plugin", node, podIn(stagingOnNodeA, "kube-system", ""), "may not run pods in namespace kube-system"},
		{"controller", ctrl, podIn(creation, elsewhereNS, ""), "may not run pods in namespace elsewhere"},
		{"node plugin", node, podIn(stagingOnNodeA, elsewhereNS, ""), "may not run pods in namespace elsewhere"},
		{"controller", ctrl, podIn(creation, tenantNS, "builder"), "may not run pods as service account tenant/builder"},
		{"node plugin", node, podIn(stagingOnNodeA, tenantNS, "builder"), "may not run pods as service account tenant/builder"},
		{"controller", ctrl, podIn(creation, "default", ""), ""},
		{"node plugin", node, podIn(stagingOnNodeA, "default", "default"), ""},
	} {
		_, err := c.as.CoreV1().Pods(c.pod.Namespace).Create(ctx, c.pod, metav1.CreateOptions{})
		what := fmt.Sprintf("%s creates pod %s/%s running as %q", c.who, c.pod.Namespace, c.pod.Name, c.pod.Spec.ServiceAccountName)
		if c.want == "" {
			allowed(t, what, err)
		} else {
			denied(t, what, err, c.want)
		}
	}
	// Whatever the admin lists, never the system namespaces nor PaV's own
	// service accounts.
	confinement, err := admin.CoreV1().ConfigMaps("pav").Get(ctx, "pav-pod-confinement", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	confinement.Data = map[string]string{"namespaces": "default, pav\nkube-system", "serviceAccounts": "default pav/controller,node"}
	if _, err := admin.CoreV1().ConfigMaps("pav").Update(ctx, confinement, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForDryRun(t, ctrl, podIn(creation, "pav", "default"))
	for _, c := range []struct {
		as   kubernetes.Interface
		pod  *corev1.Pod
		want string
	}{
		{ctrl, podIn(creation, "kube-system", "default"), "may not run pods in namespace kube-system"},
		{ctrl, podIn(creation, "pav", "controller"), "may not run pods as service account pav/controller"},
		{node, podIn(stagingOnNodeA, "pav", "node"), "may not run pods as service account pav/node"},
		{node, podIn(stagingOnNodeA, tenantNS, "node"), ""}, // a tenant's service account of that name
	} {
		_, err := c.as.CoreV1().Pods(c.pod.Namespace).Create(ctx, c.pod, metav1.CreateOptions{})
		what := fmt.Sprintf("pod %s/%s running as %q, the ConfigMap listing both", c.pod.Namespace, c.pod.Name, c.pod.Spec.ServiceAccountName)
		if c.want == "" {
			allowed(t, what, err)
		} else {
			denied(t, what, err, c.want)
		}
	}

}

// checkRBAC asks the API server's authorizer what each may do.
func checkRBAC(t *testing.T, tenant, ctrl, node kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	// RBAC, as the API server's authorizer answers it.
	type access struct {
		who                            kubernetes.Interface
		whoName                        string
		verb, group, resource, ns, sub string
		want                           bool
	}
	for _, a := range []access{
		{tenant, "tenant", "create", "pav.albertofaria.github.io", "pavprovisioners", "", "", false},
		{tenant, "tenant", "create", "", "pods", tenantNS, "", true},
		{ctrl, "controller", "create", "pav.albertofaria.github.io", "pavprovisioners", "", "", false},
		{ctrl, "controller", "get", "", "secrets", "kube-system", "", false},
		{ctrl, "controller", "create", "", "secrets", "default", "", false},
		{ctrl, "controller", "get", "", "secrets", "pav", "", false}, // only its certificate Secret, by name
		{ctrl, "controller", "create", "", "pods", "", "exec", false},
		{ctrl, "controller", "update", "", "nodes", "", "", false},
		{ctrl, "controller", "patch", "", "persistentvolumeclaims", tenantNS, "", true},
		{ctrl, "controller", "delete", "", "persistentvolumeclaims", tenantNS, "", false},
		// the parameters of PaV's policies are the admin's alone
		{ctrl, "controller", "update", "", "configmaps", "pav", "", false},
		{node, "node", "update", "", "configmaps", "pav", "", false},
		{node, "node", "create", "pav.albertofaria.github.io", "pavprovisioners", "", "", false},
		{node, "node", "update", "", "pods", tenantNS, "", false},
		{node, "node", "patch", "", "pods", tenantNS, "", true},
		{node, "node", "create", "", "persistentvolumes", "", "", false},
		{node, "node", "delete", "", "persistentvolumes", "", "", false},
		{node, "node", "update", "", "persistentvolumeclaims", tenantNS, "", false},
		{node, "node", "list", "", "secrets", "", "", false},
		{node, "node", "create", "", "pods", "", "exec", false},
		// Pods' logs only where PaV's pods run by default.
		{ctrl, "controller", "get", "", "pods", "default", "log", true},
		{ctrl, "controller", "get", "", "pods", "kube-system", "log", false},
		{ctrl, "controller", "get", "", "pods", tenantNS, "log", false},
		{node, "node", "get", "", "pods", "default", "log", true},
		{node, "node", "get", "", "pods", "kube-system", "log", false},
	} {
		review, err := a.who.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.ns, Subresource: a.sub}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != a.want {
			t.Errorf("%s may %s %s/%s in %q: %v, want %v", a.whoName, a.verb, a.resource, a.sub, a.ns, review.Status.Allowed, a.want)
		}
	}
}

// waitForDryRun returns once c may create pod (a dry run): the API server
// reads a policy's parameters a moment after they change.
func waitForDryRun(t *testing.T, c kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := c.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a dry-run create of pod %s/%s is still refused after 30 s: %v", pod.Namespace, pod.Name, err)
		}
	}
}

// waitForRole returns once c may verb resource/sub in ns: the API server's
// RBAC authorizer learns of a binding a moment later, and until then a
// refusal would be RBAC's, not a policy's.
func waitForRole(t *testing.T, c kubernetes.Interface, verb, resource, sub, ns string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		review, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Resource: resource, Subresource: sub, Namespace: ns}}}, metav1.CreateOptions{})
		if err == nil && review.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never allowed to %s %s/%s in %s: %v", verb, resource, sub, ns, err)
		}
	}
}

// waitForPolicies returns once each of deployment.yaml's pod policies denies
// what it exists to deny. The API server loads admission policies a moment
// after they are created, and not all in one refresh: a first denial says
// nothing of the other policies. The probes are dry runs, so they leave
// nothing behind whichever way they are answered.
func waitForPolicies(t *testing.T, tenant, ctrl, node kubernetes.Interface, creation, stagingOnOtherNode *corev1.Pod) {
	t.Helper()
	forged := creation.DeepCopy()
	forged.Name = "forged"
	ordinary := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: creation.Namespace}, Spec: creation.Spec}
	inKubeSystem := creation.DeepCopy()
	inKubeSystem.Namespace = "kube-system"
	probes := []struct {
		policy string
		client kubernetes.Interface
		pod    *corev1.Pod
		want   string
	}{
		{"pav-reserved-pods", tenant, forged, "reserved to PaV"},
		{"pav-controller-scope", ctrl, ordinary, "only validation, creation, deletion, expansion, modification, capacity and (group) snapshot creation and deletion pods"},
		{"pav-node-scope", node, stagingOnOtherNode, "only pods on its own node"},
		{"pav-pod-confinement", ctrl, inKubeSystem, "may not run pods in namespace kube-system"},
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, p := range probes {
		waitUntilRefused(t, fmt.Sprintf("policy %s (a dry-run create of pod %s/%s)", p.policy, p.pod.Namespace, p.pod.Name), func() error {
			_, err := p.client.CoreV1().Pods(p.pod.Namespace).Create(context.Background(), p.pod, dryRun)
			return err
		}, p.want)
	}
}

// waitUntilRefused retries try until it is refused with want: the API server
// loads admission policies, and their parameters, a moment after they change.
func waitUntilRefused(t *testing.T, what string, try func() error, want string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = try(); err != nil && strings.Contains(err.Error(), want) {
			return
		}
	}
	t.Fatalf("%s: not refused after 30 s (last: %v), want an error saying %q", what, err, want)
}

// denied checks that the request err answered was refused with want.
func denied(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed, want denied", what)
	} else if !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want an error saying %q", what, err, want)
	}
}

// allowed checks that the request err answered was allowed.
func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want allowed", what, err)
	}
}

func waitGone(t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
	}
	t.Fatalf("pod %s/%s still exists", ns, name)
}
