package protocol

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestPodName(t *testing.T) {
	long := strings.Repeat("a", 60)
	tests := []struct {
		phase  Phase
		key    string
		want   string
		hashed bool
	}{
		{PhaseValidation, "3f1c2a9e-0b1d-4d6e-9f00-0123456789ab", "pav-validation-3f1c2a9e-0b1d-4d6e-9f00-0123456789ab", false},
		{PhaseCreation, "abc", "pav-creation-abc", false},
		{PhaseStaging, "0123456789abcdef", "pav-staging-0123456789abcdef", false},
		{PhaseUnstaging, long, "", true},                                                               // too long
		{PhaseStaging, "Upper", "", true},                                                              // not lowercase
		{PhaseDeletion, "a/b", "", true},                                                               // bad character
		{PhaseDeletion, "ends-", "", true},                                                             // must end alphanumeric
		{PhaseDeletion, "", "", true},                                                                  // empty key
		{PhaseDeletion, "a.b", "", true},                                                               // dots are not allowed in DNS labels
		{PhaseValidation, strings.Repeat("x", 48), "pav-validation-" + strings.Repeat("x", 48), false}, // exactly 63
		{PhaseValidation, strings.Repeat("x", 49), "", true},                                           // 64
	}
	for _, tt := range tests {
		got := PodName(tt.phase, tt.key)
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("PodName(%s, %q) = %q: not a DNS label: %v", tt.phase, tt.key, got, errs)
		}
		if got != PodName(tt.phase, tt.key) {
			t.Errorf("PodName(%s, %q) is not deterministic", tt.phase, tt.key)
		}
		if !strings.HasPrefix(got, "pav-"+string(tt.phase)+"-") {
			t.Errorf("PodName(%s, %q) = %q: wrong prefix", tt.phase, tt.key, got)
		}
		if tt.hashed {
			if len(got) != len("pav-"+string(tt.phase)+"-")+32 || got == "pav-"+string(tt.phase)+"-"+tt.key {
				t.Errorf("PodName(%s, %q) = %q: want a hashed name", tt.phase, tt.key, got)
			}
		} else if got != tt.want {
			t.Errorf("PodName(%s, %q) = %q, want %q", tt.phase, tt.key, got, tt.want)
		}
	}
	if PodName(PhaseStaging, "A") == PodName(PhaseStaging, "B") {
		t.Error("different keys hash to the same name")
	}
	if PodName(PhaseStaging, "A") == PodName(PhaseUnstaging, "A") {
		t.Error("different phases give the same name")
	}
}

func TestLabelValue(t *testing.T) {
	for _, s := range []string{"pvc-1234", "a.b_c", strings.Repeat("a", 63)} {
		if got := LabelValue(s); got != s {
			t.Errorf("LabelValue(%q) = %q, want unchanged", s, got)
		}
	}
	for _, s := range []string{strings.Repeat("a", 64), "a/b", "-a", "ü"} {
		got := LabelValue(s)
		if got == s || len(validation.IsValidLabelValue(got)) > 0 || got != LabelValue(s) {
			t.Errorf("LabelValue(%q) = %q, want a deterministic valid hash", s, got)
		}
	}
}

func TestPodDirRoot(t *testing.T) {
	for dir, want := range map[string]string{
		DefaultKubeletDir:      "/var/lib/kubelet/plugins/pav.albertofaria.github.io/pods",
		"/var/lib/k0s/kubelet": "/var/lib/k0s/kubelet/plugins/pav.albertofaria.github.io/pods",
	} {
		if err := CheckKubeletDir(dir); err != nil {
			t.Errorf("CheckKubeletDir(%q) = %v", dir, err)
		}
		if got := PodDirRoot(dir); got != want {
			t.Errorf("PodDirRoot(%q) = %q, want %q", dir, got, want)
		}
	}
	for _, dir := range []string{"", "/", "var/lib/kubelet", "/var/lib/kubelet/", "/var/lib/../kubelet", "/var//lib"} {
		if err := CheckKubeletDir(dir); err == nil {
			t.Errorf("CheckKubeletDir(%q) accepted it", dir)
		}
	}
}

func TestNewHostDir(t *testing.T) {
	PodDirRoot := PodDirRoot(DefaultKubeletDir)
	a, b := NewHostDir(PodDirRoot, "pav-staging-x"), NewHostDir(PodDirRoot, "pav-staging-x")
	if a == b {
		t.Errorf("two host dirs are equal: %s", a)
	}
	if !strings.HasPrefix(a, PodDirRoot+"/pav-staging-x.") || len(a) <= len(PodDirRoot+"/pav-staging-x.") {
		t.Errorf("NewHostDir = %q", a)
	}
	if strings.Contains(strings.TrimPrefix(a, PodDirRoot+"/"), "/") {
		t.Errorf("NewHostDir = %q: not directly under the root", a)
	}
}

func boolPtr(b bool) *bool { return &b }

var (
	hostPathType = corev1.HostPathDirectoryOrCreate
	bidi, h2c    = corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer
	pavVolume    = corev1.Volume{Name: "pav", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/host/dir", Type: &hostPathType}}}
)

func pavMount(p corev1.MountPropagationMode) corev1.VolumeMount {
	return corev1.VolumeMount{Name: "pav", MountPath: "/pav", MountPropagation: &p}
}

func baseTemplate() *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
}

// buildPodCase is a template and options for BuildPod, and a check of the pod.
type buildPodCase struct {
	name  string
	tmpl  func() *corev1.PodTemplateSpec
	opts  func(o PodOptions) PodOptions
	check func(t *testing.T, p *corev1.Pod)
}

// testBuildPod runs the cases from a creation pod's options; BuildPod must
// leave the template as it was.
func testBuildPod(t *testing.T, tests []buildPodCase) {
	opts := PodOptions{Provisioner: "prov", Phase: PhaseCreation, Name: "pav-creation-uid", Volume: "pvc-uid", ClaimUID: "uid", HostDir: "/host/dir"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := tt.tmpl()
			before := tmpl.DeepCopy()
			o := opts
			if tt.opts != nil {
				o = tt.opts(o)
			}
			p := BuildPod(tmpl, o)
			if !reflect.DeepEqual(tmpl, before) {
				t.Error("BuildPod modified its template")
			}
			tt.check(t, p)
		})
	}
}

func TestBuildPod(t *testing.T) {
	base := baseTemplate
	testBuildPod(t, []buildPodCase{
		{
			name: "defaults",
			tmpl: base,
			check: func(t *testing.T, p *corev1.Pod) {
				if p.Name != "pav-creation-uid" || p.Namespace != "default" {
					t.Errorf("name/namespace %s/%s", p.Namespace, p.Name)
				}
				if p.APIVersion != "v1" || p.Kind != "Pod" {
					t.Errorf("type %s %s", p.APIVersion, p.Kind)
				}
				want := map[string]string{LabelProvisioner: "prov", LabelPhase: "creation", LabelVolume: "pvc-uid", LabelClaimUID: "uid"}
				if !reflect.DeepEqual(p.Labels, want) {
					t.Errorf("labels %v", p.Labels)
				}
				if p.Spec.RestartPolicy != corev1.RestartPolicyNever {
					t.Errorf("restartPolicy %q", p.Spec.RestartPolicy)
				}
				if !reflect.DeepEqual(p.Spec.Volumes, []corev1.Volume{pavVolume}) {
					t.Errorf("volumes %+v", p.Spec.Volumes)
				}
				c := p.Spec.Containers[0]
				if !reflect.DeepEqual(c.VolumeMounts, []corev1.VolumeMount{pavMount(h2c)}) {
					t.Errorf("mounts %+v", c.VolumeMounts)
				}
				if c.TerminationMessagePolicy != "" {
					t.Errorf("terminationMessagePolicy %q: a log tail would reach the pod's status", c.TerminationMessagePolicy)
				}
				if p.Spec.NodeName != "" {
					t.Errorf("nodeName %q", p.Spec.NodeName)
				}
				if p.Annotations != nil {
					t.Errorf("annotations %v", p.Annotations)
				}
			},
		},
		{
			name: "template metadata, PaV labels and annotations win",
			tmpl: func() *corev1.PodTemplateSpec {
				t := base()
				t.ObjectMeta = metav1.ObjectMeta{Name: "ignored", Namespace: "storage",
					Labels:      map[string]string{"app": "x", LabelPhase: "fake"},
					Annotations: map[string]string{"a": "1", AnnotationReadOnly: "maybe"}}
				return t
			},
			opts: func(o PodOptions) PodOptions {
				o.Annotations = map[string]string{AnnotationReadOnly: "true"}
				return o
			},
			check: func(t *testing.T, p *corev1.Pod) {
				if p.Name != "pav-creation-uid" || p.Namespace != "storage" {
					t.Errorf("name/namespace %s/%s", p.Namespace, p.Name)
				}
				if p.Labels["app"] != "x" || p.Labels[LabelPhase] != "creation" {
					t.Errorf("labels %v", p.Labels)
				}
				if !reflect.DeepEqual(p.Annotations, map[string]string{"a": "1", AnnotationReadOnly: "true"}) {
					t.Errorf("annotations %v", p.Annotations)
				}
			},
		},
		{
			name: "template's reserved metadata dropped",
			tmpl: func() *corev1.PodTemplateSpec {
				t := base()
				t.ObjectMeta = metav1.ObjectMeta{
					Labels:      map[string]string{"app": "x", LabelStagingID: "forged"},
					Annotations: map[string]string{"a": "1", AnnotationSucceeded: "true", AnnotationResultHandle: "..", AnnotationResultsCollected: "true"},
					Finalizers:  []string{"example.com/keep", FinalizerStaging},
				}
				return t
			},
			check: func(t *testing.T, p *corev1.Pod) {
				if _, ok := p.Labels[LabelStagingID]; ok || p.Labels["app"] != "x" {
					t.Errorf("labels %v", p.Labels)
				}
				if !reflect.DeepEqual(p.Annotations, map[string]string{"a": "1"}) {
					t.Errorf("annotations %v", p.Annotations)
				}
				if !reflect.DeepEqual(p.Finalizers, []string{"example.com/keep"}) {
					t.Errorf("finalizers %v", p.Finalizers)
				}
			},
		},
		{
			name: "staging: node, staging ID, long volume name hashed in label",
			tmpl: base,
			opts: func(o PodOptions) PodOptions {
				o.Phase, o.ClaimUID, o.StagingID, o.NodeName = PhaseStaging, "", "sid", "node-1"
				o.Volume = strings.Repeat("v", 100)
				return o
			},
			check: func(t *testing.T, p *corev1.Pod) {
				if p.Spec.NodeName != "node-1" {
					t.Errorf("nodeName %q", p.Spec.NodeName)
				}
				if p.Labels[LabelStagingID] != "sid" || p.Labels[LabelPhase] != "staging" {
					t.Errorf("labels %v", p.Labels)
				}
				if _, ok := p.Labels[LabelClaimUID]; ok {
					t.Errorf("claim UID label set though empty: %v", p.Labels)
				}
				if v := p.Labels[LabelVolume]; v != LabelValue(strings.Repeat("v", 100)) || len(validation.IsValidLabelValue(v)) > 0 {
					t.Errorf("volume label %q", v)
				}
			},
		},
	})
}

// Mounts of /pav, restart policy and volumes of BuildPod's pods.
func TestBuildPodMounts(t *testing.T) {
	base := baseTemplate
	testBuildPod(t, []buildPodCase{
		{
			name: "OnFailure kept, Always replaced",
			tmpl: func() *corev1.PodTemplateSpec {
				t := base()
				t.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				return t
			},
			check: func(t *testing.T, p *corev1.Pod) {
				if p.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
					t.Errorf("restartPolicy %q", p.Spec.RestartPolicy)
				}
			},
		},
		{
			name: "every container and init container, privileged get Bidirectional",
			tmpl: func() *corev1.PodTemplateSpec {
				t := base()
				t.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "img", SecurityContext: &corev1.SecurityContext{Privileged: boolPtr(true)}}}
				t.Spec.Containers = append(t.Spec.Containers,
					corev1.Container{Name: "p", Image: "img", SecurityContext: &corev1.SecurityContext{Privileged: boolPtr(true)},
						VolumeMounts:             []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "x", MountPath: "/pav/"}},
						TerminationMessagePolicy: corev1.TerminationMessageReadFile},
					corev1.Container{Name: "u", Image: "img", SecurityContext: &corev1.SecurityContext{Privileged: boolPtr(false)}})
				t.Spec.Volumes = []corev1.Volume{{Name: "data"}, {Name: "pav"}}
				return t
			},
			check: func(t *testing.T, p *corev1.Pod) {
				if got := p.Spec.InitContainers[0].VolumeMounts; !reflect.DeepEqual(got, []corev1.VolumeMount{pavMount(bidi)}) {
					t.Errorf("init mounts %+v", got)
				}
				if got := p.Spec.Containers[0].VolumeMounts; !reflect.DeepEqual(got, []corev1.VolumeMount{pavMount(h2c)}) {
					t.Errorf("c mounts %+v", got)
				}
				if got := p.Spec.Containers[1].VolumeMounts; !reflect.DeepEqual(got, []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, pavMount(bidi)}) {
					t.Errorf("p mounts %+v", got)
				}
				if got := p.Spec.Containers[1].TerminationMessagePolicy; got != corev1.TerminationMessageReadFile {
					t.Errorf("explicit terminationMessagePolicy replaced: %q", got)
				}
				if got := p.Spec.Containers[2].VolumeMounts; !reflect.DeepEqual(got, []corev1.VolumeMount{pavMount(h2c)}) {
					t.Errorf("u mounts %+v", got)
				}
				if !reflect.DeepEqual(p.Spec.Volumes, []corev1.Volume{{Name: "data"}, pavVolume}) {
					t.Errorf("volumes %+v", p.Spec.Volumes)
				}
			},
		},
	})
}

// The staging pod records what kubelet asked (target, read-only, mount
// flags with commas inside one flag, fsType) and PublicationOf reads it
// back; a mount-options annotation PaV did not write counts as none.
func TestPublicationRoundTrip(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"}}
	for _, pub := range []Publication{
		{TargetPath: "/t", ReadOnly: true, MountOptions: []string{"noatime", `context="a,b"`}, FSType: "ext4"},
		{TargetPath: "/t"},
	} {
		pod, err := StagingPod(PodBase{Template: &corev1.PodTemplateSpec{}, Provisioner: "prov", Root: "/root"},
			StagingPodSpec{Node: "node", StagingID: "id", PV: pv, PVC: pvc, Publication: pub})
		if err != nil {
			t.Fatal(err)
		}
		if got := PublicationOf(pod); !reflect.DeepEqual(got, pub) {
			t.Errorf("read back %+v, want %+v", got, pub)
		}
		pod.Annotations[AnnotationMountOptions] = "noatime"
		if got := PublicationOf(pod); got.MountOptions != nil {
			t.Errorf("undecodable mount options read as %q", got.MountOptions)
		}
	}
}
