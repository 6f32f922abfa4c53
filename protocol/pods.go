package protocol

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	typedcorev1 "github.com/albertofaria/pav/kubeclient/generated/clientset/typed/core/v1"
)

// PodName is the deterministic name of the pod of a phase for a key (the
// claim UID for validation/creation/deletion, the staging ID for staging and
// unstaging): "pav-<phase>-<key>", or "pav-<phase>-<32 hex digits of
// sha256(key)>" when key has characters a pod name cannot hold or the name
// would be longer than 63 characters.
func PodName(phase Phase, key string) string {
	name := "pav-" + string(phase) + "-" + key
	if key != "" && len(name) <= validation.DNS1123LabelMaxLength && len(validation.IsDNS1123Label(name)) == 0 {
		return name
	}
	return "pav-" + string(phase) + "-" + hash(key, 32)
}

// LabelValue maps any string to a valid label value: itself when it already
// is one, else a 40-hex-digit hash of it. BuildPod applies it to the values
// of the labels it sets, so select pods with LabelValue(x), not x (PV names
// of static volumes may be up to 253 characters long).
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	return hash(s, 40)
}

func hash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// NewHostDir returns a fresh host directory for a new pod's /pav: under root
// (PodDirRoot on a node), the pod's name plus a random suffix, so that each
// incarnation of a pod (same name, recreated) starts with an empty /pav.
func NewHostDir(root, podName string) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return root + "/" + podName + "." + hex.EncodeToString(b[:])
}

// PodOptions say what a pod PaV creates is for.
type PodOptions struct {
	Provisioner string // PavProvisioner name
	Phase       Phase
	Name        string // pod name, usually PodName(Phase, key)
	Volume      string // PersistentVolume name, if known
	ClaimUID    string // PVC UID, if relevant
	StagingID   string // staging/unstaging pods
	// SnapshotContentUID: the VolumeSnapshotContent of snapshot creation and deletion pods
	SnapshotContentUID string
	NodeName           string // pins the pod to a node (staging/unstaging), "" leaves it to the template/scheduler
	HostDir            string // host directory mounted at /pav, usually NewHostDir(Name)
	Annotations        map[string]string
}

// BuildPod turns an evaluated pod template into the pod PaV creates:
//   - namespace from the template's metadata.namespace, else "default"; name o.Name;
//   - the template's labels plus PaV's (provisioner, phase, volume, claim UID,
//     staging ID, snapshot content; values passed through LabelValue), which win;
//   - the template's annotations plus o.Annotations, which win;
//   - the template's finalizers;
//   - but none of the template's labels, annotations or finalizers under
//     PaV's prefix (IsReserved): validation refuses them, and PaV's service
//     account creates the pod, so they would pass for PaV's own (a forged
//     result, say);
//   - spec.nodeName = o.NodeName when set;
//   - restartPolicy Never unless the template says OnFailure;
//   - a hostPath volume "pav" (DirectoryOrCreate at o.HostDir) mounted at
//     /pav in every container and init container, with Bidirectional
//     propagation for privileged containers (so mounts made under /pav reach
//     the host) and HostToContainer otherwise.
//
// Termination messages stay as the template says (File by default), not
// FallbackToLogsOnError: a log may hold secrets, and the message goes into
// the pod's status and PaV's Events (see TerminationMessage).
//
// The template is not modified.
func BuildPod(t *corev1.PodTemplateSpec, o PodOptions) *corev1.Pod {
	t = t.DeepCopy()
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        o.Name,
			Namespace:   t.Namespace,
			Labels:      unreservedKeys(t.Labels),
			Annotations: unreservedKeys(t.Annotations),
			Finalizers:  slices.DeleteFunc(t.Finalizers, IsReserved),
		},
		Spec: t.Spec,
	}
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	set := func(k, v string) {
		if v != "" {
			pod.Labels[k] = LabelValue(v)
		}
	}
	set(LabelProvisioner, o.Provisioner)
	set(LabelPhase, string(o.Phase))
	set(LabelVolume, o.Volume)
	set(LabelClaimUID, o.ClaimUID)
	set(LabelStagingID, o.StagingID)
	set(LabelSnapshotContentUID, o.SnapshotContentUID)
	if len(o.Annotations) > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		for k, v := range o.Annotations {
			pod.Annotations[k] = v
		}
	}

	s := &pod.Spec
	if o.NodeName != "" {
		s.NodeName = o.NodeName
	}
	if s.RestartPolicy != corev1.RestartPolicyOnFailure {
		s.RestartPolicy = corev1.RestartPolicyNever
	}
	// Validation rejects a volume "pav" or a mount at /pav; drop any anyway so
	// that the pod is always valid.
	vols := s.Volumes[:0]
	for _, v := range s.Volumes {
		if v.Name != PavVolumeName {
			vols = append(vols, v)
		}
	}
	dirType := corev1.HostPathDirectoryOrCreate
	s.Volumes = append(vols, corev1.Volume{
		Name: PavVolumeName,
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: o.HostDir,
			Type: &dirType,
		}},
	})
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range list {
			prepareContainer(&list[i])
		}
	}
	return pod
}

// unreservedKeys is m without the keys under PaV's prefix (nil stays nil).
func unreservedKeys(m map[string]string) map[string]string {
	maps.DeleteFunc(m, func(k, _ string) bool { return IsReserved(k) })
	return m
}

func prepareContainer(c *corev1.Container) {
	mounts := c.VolumeMounts[:0]
	for _, m := range c.VolumeMounts {
		if path.Clean("/"+m.MountPath) != PavMountPath {
			mounts = append(mounts, m)
		}
	}
	prop := corev1.MountPropagationHostToContainer
	if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
		prop = corev1.MountPropagationBidirectional
	}
	c.VolumeMounts = append(mounts, corev1.VolumeMount{
		Name:             PavVolumeName,
		MountPath:        PavMountPath,
		MountPropagation: &prop,
	})
}

// PavLabels are the labels under PaV's prefix that pod carries. PaV alone may
// set them (ValidatingAdmissionPolicy pav-reserved-pods in deployment.yaml
// refuses them from anyone but PaV's service accounts), so a pod carrying the
// labels BuildPod sets is a pod PaV created.
func PavLabels(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for k, v := range pod.Labels {
		if IsReserved(k) {
			out[k] = v
		}
	}
	return out
}

// SamePavPod reports whether existing is the pod PaV built as want: it
// carries exactly want's PaV labels.
func SamePavPod(existing, want *corev1.Pod) bool {
	return existing.Namespace == want.Namespace && maps.Equal(PavLabels(existing), PavLabels(want))
}

// AlternatePodName is name with a random suffix: the name of a PaV pod whose
// deterministic name is taken by a pod PaV did not create.
func AlternatePodName(name string) string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	suffix := "-" + hex.EncodeToString(b[:])
	if max := validation.DNS1123LabelMaxLength - len(suffix); len(name) > max {
		name = name[:max]
	}
	return name + suffix
}

// CreatePod creates pod (built by BuildPod) and returns the pod that now does
// its job. Pod names are deterministic so that a restarted PaV finds its
// earlier attempt; but a tenant who may create pods in the pod's namespace
// can take that name first. So a pod that holds the name is used only if it
// is PaV's (SamePavPod); otherwise it is ignored and returned as squatter
// (for the caller to report), and the job goes to the PaV pod with those
// labels that already exists (a previous call got this far), or to a new pod
// under an AlternatePodName.
func CreatePod(ctx context.Context, pods typedcorev1.PodInterface, pod *corev1.Pod) (got, squatter *corev1.Pod, err error) {
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err == nil {
		return created, nil, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	existing, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("reading existing pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if SamePavPod(existing, pod) {
		return existing, nil, nil
	}
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(PavLabels(pod)).String()})
	if err != nil {
		return nil, existing, fmt.Errorf("listing PaV's pods in namespace %s: %w", pod.Namespace, err)
	}
	for i := range list.Items {
		if p := &list.Items[i]; SamePavPod(p, pod) && p.DeletionTimestamp == nil {
			return p, existing, nil
		}
	}
	alt := pod.DeepCopy()
	alt.Name = AlternatePodName(pod.Name)
	created, err = pods.Create(ctx, alt, metav1.CreateOptions{})
	if err != nil {
		return nil, existing, fmt.Errorf("creating pod %s/%s: %w", alt.Namespace, alt.Name, err)
	}
	return created, existing, nil
}

// PodHostDir returns the host directory backing a PaV pod's /pav: the
// hostPath of its "pav" volume. Pods are written by anyone with pod-create
// rights, so a path outside root is refused rather than read or removed.
func PodHostDir(pod *corev1.Pod, root string) (string, error) {
	for _, v := range pod.Spec.Volumes {
		if v.Name != PavVolumeName {
			continue
		}
		if v.HostPath == nil {
			return "", fmt.Errorf("pod %s/%s: volume %q is not a hostPath", pod.Namespace, pod.Name, v.Name)
		}
		return checkUnder(v.HostPath.Path, root)
	}
	return "", fmt.Errorf("pod %s/%s has no %q volume", pod.Namespace, pod.Name, PavVolumeName)
}

// checkUnder returns the cleaned path if it is a direct child of root.
func checkUnder(path, root string) (string, error) {
	p := filepath.Clean(path)
	if !filepath.IsAbs(p) || filepath.Dir(p) != filepath.Clean(root) {
		return "", fmt.Errorf("host directory %q is not a child of %s", path, root)
	}
	return p, nil
}
