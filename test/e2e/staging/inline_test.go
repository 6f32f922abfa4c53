//go:build e2e

package staging

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// inlineProvisioner serves CSI inline ephemeral volumes: its creation pod
// refuses the greeting "bad" and returns an attribute, each pod leaves a
// marker named after the volume's handle.
const inlineProvisioner = `provisioningModes: [Dynamic]
inlineVolumes: true
inlineVolumePolicy:
  attributes:
    - {name: greeting, pattern: "[a-z]+", maxLength: 16}
    - {name: punctuation, enum: ["!", "?"], default: "!"}
volumeCreation:
  capacity: 1Mi
` + `  podTemplate:
    metadata: {namespace: NS}
    spec:
      volumes: [{name: marker, hostPath: {path: MARKER, type: Directory}}]
      containers:
        - name: create
          image: pav-test:latest
          imagePullPolicy: IfNotPresent
          volumeMounts: [{name: marker, mountPath: /marker}]
          command:
            - /bin/sh
            - -c
            - |
              if [ {{ params.greeting | tobash }} = bad ]; then echo "the greeting 'bad' is not allowed" > /pav/error; exit 1; fi
              echo '{"made": "by-creation"}' > /pav/volume-attributes
              echo {{ inlinePod.name | tobash }} > /marker/created-{{ defaultHandle }}
`

func inlineSpec() string {
	return inlineProvisioner +
		section("volumeDeletion", podTemplate("delete", "touch /marker/deleted-{{ handle }}", false)) +
		section("volumeStaging", podTemplate("stage", `mkdir /pav/volume
echo {{ params.greeting | tobash }}{{ params.punctuation | tobash }} {{ params.made | tobash }} {{ handle | tobash }} {{ inlinePod.namespace | tobash }} {{ capacity }} > /pav/volume/hello`, false)) +
		section("volumeUnstaging", podTemplate("unstage", "touch /marker/unstaged-{{ handle }}", false))
}

// inlinePod is a client pod with an inline volume of the provisioner.
func (e *env) inlinePod(name, greeting string) *corev1.Pod {
	return e.inlinePodWith(name, map[string]string{"greeting": greeting})
}

// inlinePodWith is a client pod whose inline volume has attrs.
func (e *env) inlinePodWith(name string, attrs map[string]string) *corev1.Pod {
	pod := clientPodObject(name, "cat /scratch/hello", nil, false, false)
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
		Driver: e.prov, VolumeAttributes: attrs,
	}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	return e.CreatePod(framework.PinToNode(pod, e.nodeName()))
}

// A pod's inline volume: created on its node with the pod's attributes as
// params, staged with those and the creation's, unstaged and deleted once
// the pod is gone, leaving no PaV pod behind. Attributes the creation pod
// refuses fail the mount with its message on the pod, and nothing stays.
func TestInlineEphemeralVolume(t *testing.T) {
	e := newEnv(t, inlineSpec())
	e.inlinePod("client", "hi")
	out := strings.TrimSpace(e.succeeded("client"))
	f := strings.Fields(out)
	if len(f) != 5 || f[0] != "hi!" || f[1] != "by-creation" || !strings.HasPrefix(f[2], "csi-") || f[3] != e.Namespace || f[4] != "1048576" {
		t.Fatalf("client read %q, want the pod's and the creation's attributes, the volume ID, the namespace and the capacity", out)
	}
	handle := f[2]
	if !e.marked("created-" + handle) {
		t.Error("no creation pod ran")
	}
	e.DeletePod("client", timeout)
	if !e.marked("unstaged-"+handle) || !e.marked("deleted-"+handle) {
		t.Error("the volume was not unstaged and deleted after its pod went")
	}
	e.noInlinePods()

	e.inlinePod("refused", "bad")
	msg := e.waitForEvent("refused", regexp.MustCompile(`the greeting 'bad' is not allowed`), timeout)
	t.Logf("event: %s", msg)
	if p, err := e.Client.CoreV1().Pods(e.Namespace).Get(e.Ctx, "refused", metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodPending {
		t.Fatalf("pod refused: %v %v", p.Status.Phase, err)
	}
	e.DeletePod("refused", timeout)
	e.noInlinePods()
}

// A pod's inline volume attributes are a tenant's: one the provisioner
// does not declare, or a value outside its declaration, fails the mount
// with PaV's message in kubelet's FailedMount Event on the pod, and no
// pod of PaV's runs for it.
func TestInlineAttributesRefusedOnThePod(t *testing.T) {
	e := newEnv(t, inlineSpec())
	for _, tc := range []struct {
		pod   string
		attrs map[string]string
		want  *regexp.Regexp
	}{
		{"undeclared", map[string]string{"greeting": "hi", "namespace": "kube-system"},
			regexp.MustCompile(`MountVolume.SetUp failed .*attribute "namespace" is not one the provisioner accepts \(declared: "greeting", "punctuation"\)`)},
		{"pattern", map[string]string{"greeting": `x$(id)`},
			regexp.MustCompile(`MountVolume.SetUp failed .*attribute "greeting": it must match the pattern "\[a-z\]\+"`)},
	} {
		e.inlinePodWith(tc.pod, tc.attrs)
		msg := e.waitForEvent(tc.pod, tc.want, timeout)
		t.Logf("event: %s", msg)
		e.noInlinePods()
		e.DeletePod(tc.pod, timeout)
	}
	e.inlinePodWith("declared", map[string]string{"greeting": "ok", "punctuation": "?"})
	if out := strings.Fields(e.succeeded("declared")); len(out) == 0 || out[0] != "ok?" {
		t.Fatalf("client read %q, want the declared attributes", out)
	}
	e.DeletePod("declared", timeout)
	e.noInlinePods()
}

// noInlinePods waits until no inline creation or deletion pod of the
// provisioner is left: a failed creation is reverted at once, one that an
// attempt left when its pod went is the node plugin's sweep's (about a
// minute).
func (e *env) noInlinePods() {
	e.t.Helper()
	sel := protocol.LabelProvisioner + "=" + e.prov + "," + protocol.LabelPhase + " in (" +
		string(protocol.PhaseInlineCreation) + "," + string(protocol.PhaseInlineDeletion) + ")"
	var left []string
	err := wait.PollUntilContextTimeout(e.Ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := e.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err
		}
		left = left[:0]
		for _, p := range list.Items {
			left = append(left, p.Namespace+"/"+p.Name)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		e.t.Fatalf("inline volume pods left: %v (%v)", left, err)
	}
}
