//go:build integration

package integration

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/albertofaria/pav/controller/webhook"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
	"github.com/albertofaria/pav/test/integration/framework"
)

// The admission webhook as the API server uses it: certificate from a Secret
// the server creates, CA bundle patched into the configuration (and patched
// again when someone resets it), invalid PavProvisioners rejected with the
// field named, metadata-only updates of an invalid object allowed.
func TestWebhook(t *testing.T) {
	e := newEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	url := fmt.Sprintf("https://%s%s", addr, webhook.Path)
	cfgName := "pav-test-" + e.ns
	scope := admissionregistrationv1.ClusterScope
	_, err = e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(e.ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: cfgName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "pavprovisioners.pav.albertofaria.github.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{v1alpha1.GroupName}, APIVersions: []string{v1alpha1.Version}, Resources: []string{v1alpha1.Plural}, Scope: &scope}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), cfgName, metav1.DeleteOptions{})
	})

	// While the webhook is not serving, PavProvisioners cannot be created
	// (failurePolicy Fail), once the API server has loaded the configuration
	// (a moment after it is created): wait for the first refusal.
	e.waitFor("a PavProvisioner refused while the webhook is down", func() (bool, error) {
		_, err := e.pav.Create(e.ctx, testProvisioner("early", nil), metav1.CreateOptions{})
		switch {
		case err == nil:
			return false, e.pav.Delete(e.ctx, "early", metav1.DeleteOptions{})
		case apierrors.IsAlreadyExists(err): // the last one is still going
			return false, err
		}
		return true, nil
	})

	srv := &webhook.Server{
		Kube: e.client, Namespace: e.ns, SecretName: "cert", ServiceName: "pav-webhook",
		WebhookConfigName: cfgName, Addr: addr, ExtraNames: []string{"127.0.0.1"},
		Handler: &webhook.Handler{Check: templating.Check},
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go func() {
		if err := srv.Run(ctx); err != nil {
			t.Errorf("webhook server: %v", err)
		}
	}()

	valid := testProvisioner("wh-valid-"+e.ns[:2], nil)
	e.waitFor("the webhook to admit a valid PavProvisioner", func() (bool, error) {
		_, err := e.pav.Create(e.ctx, valid, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, err
	})
	secret, err := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, "cert", metav1.GetOptions{})
	if err != nil || secret.Type != corev1.SecretTypeTLS {
		t.Fatalf("certificate Secret: %v", err)
	}

	invalid := testProvisioner("wh-invalid", func(s *v1alpha1.PavProvisionerSpec) {
		s.VolumeValidation = &v1alpha1.VolumeValidation{MinCapacity: value("{{ 1 +")}
	})
	_, err = e.pav.Create(e.ctx, invalid, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.volumeValidation.minCapacity") {
		t.Fatalf("invalid PavProvisioner: error %v, want one naming spec.volumeValidation.minCapacity", err)
	}

	// A pod template may not give PaV's pods PaV's own metadata: the pod
	// would pass for one PaV decided about (a forged result).
	forging := testProvisioner("wh-forging", func(s *v1alpha1.PavProvisionerSpec) {
		tpl := podTemplate("")
		tpl["metadata"] = map[string]interface{}{"annotations": map[string]interface{}{protocol.AnnotationSucceeded: "true"}}
		s.VolumeStaging = &v1alpha1.VolumeStaging{PodTemplate: value(tpl)}
	})
	_, err = e.pav.Create(e.ctx, forging, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.volumeStaging.podTemplate.metadata.annotations["+protocol.AnnotationSucceeded+"]") {
		t.Fatalf("PavProvisioner whose pod template carries PaV's annotation: error %v, want one naming it", err)
	}

	// Someone re-applies the configuration without a CA bundle: it is patched again.
	cur, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(e.ctx, cfgName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(e.ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the CA bundle to be restored", func() (bool, error) {
		cur, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(e.ctx, cfgName, metav1.GetOptions{})
		return err == nil && len(cur.Webhooks[0].ClientConfig.CABundle) > 0, err
	})
}

func testProvisioner(name string, mutate func(*v1alpha1.PavProvisionerSpec)) *v1alpha1.PavProvisioner {
	p := &v1alpha1.PavProvisioner{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PavProvisionerSpec{
			ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic},
			VolumeStaging:     &v1alpha1.VolumeStaging{PodTemplate: value(podTemplate(""))},
			// A Dynamic provisioner needs a capacity or a creation pod.
			VolumeCreation: &v1alpha1.VolumeCreation{Capacity: value("1Gi")},
		},
	}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

// deployment.yaml's webhook configuration while no replica answers (its
// Service does not even exist here): the controller's own writes, which
// never touch a spec, still go through, and so does anyone's metadata-only
// change; a spec change is refused (failurePolicy Fail).
func TestWebhookDownSparesMetadata(t *testing.T) {
	env := framework.New(t) // its own API server: the configuration would refuse the other tests' provisioners
	ctx := context.Background()
	applyAccessObjects(t, env.Config)
	admin, err := kubeclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	pavs := admin.PavV1alpha1().PavProvisioners()
	p, err := pavs.Create(ctx, testProvisioner("down", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server loads the webhook configuration a moment after it is
	// created: the first refused spec change tells it has.
	applyManifestObjects(t, env.Config, map[string]bool{"ValidatingWebhookConfiguration": true})
	specChange := func(c kubeclient.PavInterface) error {
		_, err := c.PavV1alpha1().PavProvisioners().Patch(ctx, p.Name, types.MergePatchType,
			[]byte(`{"spec":{"provisioningModes":["Dynamic","Static"]}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	const refused = "failed calling webhook"
	waitUntilRefused(t, "the webhook configuration", func() error { return specChange(admin) }, refused)

	ctrlUser, ctrlGroups := serviceAccount("controller")
	ctrlCfg := rest.CopyConfig(env.Config)
	ctrlCfg.Impersonate = rest.ImpersonationConfig{UserName: ctrlUser, Groups: append(ctrlGroups, "system:authenticated")}
	ctrl, err := kubeclient.NewForConfig(ctrlCfg)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(c kubeclient.PavInterface, body string) error {
		_, err := c.PavV1alpha1().PavProvisioners().Patch(ctx, p.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	if err := patch(ctrl, `{"metadata":{"finalizers":["`+protocol.FinalizerProvisioner+`"]}}`); err != nil {
		t.Errorf("the controller adds its finalizer while the webhook is down: %v", err)
	}
	cur, err := pavs.Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.Conditions = []metav1.Condition{{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", LastTransitionTime: metav1.Now()}}
	if _, err := ctrl.PavV1alpha1().PavProvisioners().UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Errorf("the controller writes the status while the webhook is down: %v", err)
	}
	if err := patch(admin, `{"metadata":{"labels":{"team":"storage"}}}`); err != nil {
		t.Errorf("an admin's label change while the webhook is down: %v", err)
	}
	if err := patch(ctrl, `{"metadata":{"finalizers":null}}`); err != nil {
		t.Errorf("the controller removes its finalizer while the webhook is down: %v", err)
	}
	if err := specChange(admin); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("an admin's spec change while the webhook is down: %v, want refused (%q)", err, refused)
	}
	if _, err := pavs.Create(ctx, testProvisioner("new", nil), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("a new PavProvisioner while the webhook is down: %v, want refused (%q)", err, refused)
	}
}
