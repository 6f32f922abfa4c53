package templating

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"regexp"
	"slices"
	"strings"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

// Trial evaluates every phase section c has (validation, creation,
// deletion, expansion, modification, snapshot creation and deletion,
// staging, unstaging, storage capacity) once, with a synthetic context: a
// claim "trial-claim" in namespace "default" asking for 1Gi (or what
// validation's minCapacity and maxCapacity allow) in the first volume and
// access mode validation accepts, of a WaitForFirstConsumer class
// "trial-class" whose scheduler picked node "trial-node" (topology: that
// node's segment, every topology key's value its name), the PV PaV would
// make from the evaluated creation (the handle and capacity it chose, or
// defaultHandle and the request), a VolumeAttributesClass "trial-vac",
// and a snapshot whose handle is "trial-node/<content uid>" (so templates
// that split a handle work). Class, snapshot class and attributes class
// parameters are unknown offline: they start empty, and each parameter a
// template fails to find ("has no attribute 'x'") gets the value
// "trial-x" (lowercase), after which the phase is evaluated again; get_pvc finds any
// claim, a copy of the trial claim. Objects carry a label and an annotation
// (so a lookup by key finds the maps). With spec.inlineVolumes, an inline
// volume's validation, creation and deletion are evaluated too (their
// errors say so). So errs are what the templates get
// wrong whatever the class says: output that is not YAML, a pod that is
// not one, a value of the wrong type, an error from an expression.
// warnings: a staging pod that can never create /pav/volume
// (stagingCannotCreateVolume).
func (c *Compiled) Trial(ctx context.Context) (errs, warnings field.ErrorList) {
	t := &trial{c: c, ctx: ctx, params: map[string]string{}}
	t.run()
	return t.errs, t.warnings
}

// trialNode is the trial's node, the scheduler's pick.
const trialNode = "trial-node"

type trial struct {
	c              *Compiled
	ctx            context.Context
	params         map[string]string
	errs, warnings field.ErrorList
	// context, when set, is added to each error: what the context was.
	context string

	mode   corev1.PersistentVolumeMode
	access corev1.PersistentVolumeAccessMode
	size   resource.Quantity
	// creation is the evaluated volumeCreation (nil until then).
	creation *CreationConfig
}

// missingAttribute finds the attribute an undefined error names.
var missingAttribute = regexp.MustCompile(`has no attribute '([^']{1,253})'`)

// try evaluates one phase, giving the parameters it misses values until it
// succeeds or misses nothing new; a failure is an error at path.
func (t *trial) try(path *field.Path, eval func() error) bool {
	for range 64 {
		err := eval()
		if err == nil {
			return true
		}
		added := false
		for _, m := range missingAttribute.FindAllStringSubmatch(err.Error(), -1) {
			if _, ok := t.params[m[1]]; !ok {
				t.params[m[1]] = "trial-" + strings.ToLower(m[1])
				added = true
			}
		}
		if !added {
			for _, e := range fieldErrors(path, err) {
				if t.context != "" {
					e.Detail += " (" + t.context + ")"
				}
				// A template that fails alike in two contexts (static
				// and dynamic validation) is one problem.
				if !slices.ContainsFunc(t.errs, func(x *field.Error) bool { return x.Error() == e.Error() }) {
					t.errs = append(t.errs, e)
				}
			}
			return false
		}
	}
	t.errs = append(t.errs, field.Invalid(path, field.OmitValueType{}, "the trial render kept missing class parameters"))
	return false
}

// fieldErrors are an evaluation's problems; one that names no field is
// the section's.
func fieldErrors(path *field.Path, err error) field.ErrorList {
	list := []error{err}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		list = agg.Errors()
	}
	var out field.ErrorList
	for _, e := range list {
		var fe *field.Error
		if errors.As(e, &fe) {
			out = append(out, fe)
			continue
		}
		out = append(out, field.Invalid(path, field.OmitValueType{}, e.Error()))
	}
	return out
}

func (t *trial) run() {
	p := t.c.Provisioner
	t.mode, t.access, t.size = corev1.PersistentVolumeFilesystem, corev1.ReadWriteOnce, resource.MustParse("1Gi")
	var pv func() *corev1.PersistentVolume // the volume staged
	if p.HasMode(v1alpha1.Dynamic) && t.dynamic() {
		pv = t.volume
	}
	if p.HasMode(v1alpha1.Static) {
		t.try(specPath.Child("volumeValidation"), func() error {
			_, err := t.c.StaticValidation(t.ctx, StaticRequest{PV: t.staticVolume()}, t.getPVC)
			return err
		})
		if !p.HasMode(v1alpha1.Dynamic) {
			pv = t.staticVolume
		}
	}
	if pv != nil {
		t.staging(pv)
	}
	t.capacity()
	if p.Spec.InlineVolumes {
		t.inline()
	}
}

// inline runs the phases of a CSI inline ephemeral volume (validation, and
// with Dynamic creation and deletion): a context without claim or class,
// the pod's attributes as params. Its errors say so.
func (t *trial) inline() {
	t.context = "for an inline volume"
	defer func() { t.context = "" }()
	req := func() DynamicRequest {
		attrs := map[string]string{}
		if pol := t.c.Provisioner.Spec.InlineVolumePolicy; pol != nil {
			for _, a := range pol.Attributes {
				if a.Default != nil {
					attrs[a.Name] = *a.Default
				}
			}
		}
		for k, v := range t.params {
			attrs[k] = v
		}
		return DynamicRequest{SelectedNodeName: trialNode, Inline: &protocol.InlineVolume{VolumeID: "csi-trial", Attributes: attrs,
			PodNamespace: metav1.NamespaceDefault, PodName: "trial-pod", PodUID: string(trialUID("Pod/default/trial-pod")), ServiceAccount: "default"}}
	}
	t.try(specPath.Child("volumeValidation"), func() error {
		_, err := t.c.InlineValidation(t.ctx, req(), t.getPVC)
		return err
	})
	if !t.c.Provisioner.HasMode(v1alpha1.Dynamic) {
		return
	}
	t.try(specPath.Child("volumeCreation"), func() error {
		_, err := t.c.Creation(t.ctx, req(), t.getPVC)
		return err
	})
	t.try(specPath.Child("volumeDeletion"), func() error {
		r := req()
		r.Handle = r.Inline.VolumeID
		_, err := t.c.Deletion(t.ctx, r, t.getPVC)
		return err
	})
}

// dynamic runs the phases of a claim; false if no volume was made.
func (t *trial) dynamic() bool {
	var cfg *ValidationConfig
	if !t.try(specPath.Child("volumeValidation"), func() (err error) {
		cfg, err = t.c.DynamicValidation(t.ctx, t.request(), t.getPVC)
		return err
	}) {
		return false
	}
	// What validation accepts, so that later phases see a plausible claim.
	if len(cfg.VolumeModes) > 0 {
		t.mode = cfg.VolumeModes[0]
	}
	if len(cfg.AccessModes) > 0 {
		t.access = cfg.AccessModes[0]
	}
	if cfg.MinCapacity != nil && cfg.MinCapacity.Cmp(t.size) > 0 {
		t.size = cfg.MinCapacity.DeepCopy()
	}
	if cfg.MaxCapacity != nil && cfg.MaxCapacity.Cmp(t.size) < 0 {
		t.size = cfg.MaxCapacity.DeepCopy()
	}
	if !t.try(specPath.Child("volumeCreation"), func() (err error) {
		t.creation, err = t.c.Creation(t.ctx, t.request(), t.getPVC)
		return err
	}) {
		return false
	}
	pv := t.volume
	if h := t.creation.Handle; h != nil {
		if err := protocol.CheckHandle(*h); err != nil {
			t.errs = append(t.errs, field.Invalid(specPath.Child("volumeCreation", "handle"), *h, err.Error()))
		}
	}
	t.try(specPath.Child("volumeDeletion"), func() error {
		r := t.request()
		r.PV = pv()
		r.Handle = r.PV.Spec.CSI.VolumeHandle
		_, err := t.c.Deletion(t.ctx, r, t.getPVC)
		return err
	})
	if t.c.expansion != nil {
		t.try(specPath.Child("volumeExpansion"), func() error {
			r := t.request()
			r.PV = pv()
			q := t.size.DeepCopy()
			q.Add(t.size)
			r.PVC.Spec.Resources.Requests[corev1.ResourceStorage] = q
			_, _, err := t.c.Expansion(t.ctx, r, t.getPVC)
			return err
		})
	}
	if t.c.modification != nil {
		t.try(specPath.Child("volumeModification"), func() error {
			r := t.request()
			r.PV = pv()
			r.VolumeAttributesClass = t.attributesClass()
			_, _, err := t.c.Modification(t.ctx, r, t.getPVC)
			return err
		})
	}
	if t.c.snapshotCreation != nil {
		t.try(specPath.Child("snapshotCreation"), func() error {
			v := pv()
			r := t.snapshot(v)
			r.Content.Status = nil
			r.PV, r.PVC = v, t.claim()
			_, _, err := t.c.SnapshotCreation(t.ctx, r, t.getPVC)
			return err
		})
	}
	if t.c.snapshotDeletion != nil {
		t.try(specPath.Child("snapshotDeletion"), func() error {
			_, err := t.c.SnapshotDeletion(t.ctx, t.snapshot(pv()), t.getPVC)
			return err
		})
	}
	if t.c.groupSnapshotCreation != nil {
		t.try(specPath.Child("groupSnapshotCreation"), func() error {
			r := t.groupSnapshot(pv())
			r.Content.Status = nil
			_, _, err := t.c.GroupSnapshotCreation(t.ctx, r, t.getPVC)
			return err
		})
	}
	if t.c.groupSnapshotDeletion != nil {
		t.try(specPath.Child("groupSnapshotDeletion"), func() error {
			_, err := t.c.GroupSnapshotDeletion(t.ctx, t.groupSnapshot(pv()), t.getPVC)
			return err
		})
	}
	return true
}

// staging runs staging and unstaging for pv, and warns of a staging pod
// that cannot create /pav/volume.
func (t *trial) staging(pv func() *corev1.PersistentVolume) {
	req := func() StagingRequest {
		v := pv()
		r := StagingRequest{PVC: t.claim(), PV: v, Node: t.node()}
		r.PVC.Spec.VolumeName = v.Name
		if t.mode == corev1.PersistentVolumeFilesystem {
			r.MountOptions = v.Spec.MountOptions
		}
		return r
	}
	path := specPath.Child("volumeStaging")
	var cfg *PodConfig
	if t.try(path, func() (err error) {
		cfg, err = t.c.Staging(t.ctx, req(), t.getPVC)
		return err
	}) {
		if w := stagingCannotCreateVolume(path.Child("podTemplate"), cfg.PodTemplate); w != nil {
			t.warnings = append(t.warnings, w)
		}
	}
	if t.c.unstaging != nil {
		t.try(specPath.Child("volumeUnstaging"), func() error {
			_, err := t.c.Unstaging(t.ctx, req(), t.getPVC)
			return err
		})
	}
}

func (t *trial) capacity() {
	if t.c.capacity == nil {
		return
	}
	t.try(specPath.Child("storageCapacity"), func() error {
		_, err := t.c.StorageCapacity(t.ctx, CapacityRequest{Class: t.class(), Segment: t.segment(), NodeName: trialNode})
		return err
	})
}

func (t *trial) getPVC(_ context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	c := t.claim()
	c.Namespace, c.Name, c.UID = namespace, name, trialUID("PersistentVolumeClaim/"+namespace+"/"+name)
	return c, nil
}

// trialMeta is a trial object's metadata, with a label and an annotation
// (what kubectl apply leaves) so that templates that look one up by key
// find the maps, as on most real objects.
func trialMeta(namespace, name, kind string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, UID: trialUID(kind + "/" + namespace + "/" + name),
		Labels:      map[string]string{"app.kubernetes.io/name": "trial"},
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}}
}

// trialUID is a stable UUID-shaped UID for a trial object.
func trialUID(seed string) types.UID {
	h := fnv.New64a()
	h.Write([]byte(seed))
	return types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012x", h.Sum64()&0xffffffffffff))
}

func (t *trial) claim() *corev1.PersistentVolumeClaim {
	class := "trial-class"
	meta := trialMeta(metav1.NamespaceDefault, "trial-claim", "PersistentVolumeClaim")
	meta.Annotations["volume.kubernetes.io/selected-node"] = trialNode
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: meta,
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{t.access},
			VolumeMode:       &t.mode,
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: t.size.DeepCopy()}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
}

func (t *trial) class() *storagev1.StorageClass {
	bind := storagev1.VolumeBindingWaitForFirstConsumer
	reclaim := corev1.PersistentVolumeReclaimDelete
	return &storagev1.StorageClass{
		TypeMeta:          metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta:        trialMeta("", "trial-class", "StorageClass"),
		Provisioner:       t.c.Provisioner.Name,
		Parameters:        t.params,
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &bind,
	}
}

func (t *trial) segment() map[string]string {
	seg := map[string]string{}
	for _, k := range t.c.Provisioner.Spec.TopologyKeys {
		seg[k] = trialNode
	}
	return seg
}

func (t *trial) node() *corev1.Node {
	labels := map[string]string{corev1.LabelHostname: trialNode}
	for k, v := range t.segment() {
		labels[k] = v
	}
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: trialNode, UID: trialUID("Node/" + trialNode), Labels: labels},
	}
}

// request is the claim's request as the controller makes it.
func (t *trial) request() DynamicRequest {
	r := DynamicRequest{PVC: t.claim(), Class: t.class(), SelectedNodeName: trialNode}
	if len(t.c.Provisioner.Spec.TopologyKeys) > 0 {
		seg := protocol.Segment(t.segment())
		r.Topology = &Topology{Requisite: []protocol.Segment{seg}, Preferred: []protocol.Segment{seg}}
	}
	return r
}

// volume is the PV PaV makes from the evaluated creation.
func (t *trial) volume() *corev1.PersistentVolume {
	cc := t.creation
	handle := protocol.VolumeName(t.claim())
	if cc.Handle != nil && protocol.CheckHandle(*cc.Handle) == nil {
		handle = *cc.Handle
	}
	capacity := t.size.DeepCopy()
	if cc.Capacity != nil && protocol.CheckCapacity(*cc.Capacity) == nil {
		capacity = cc.Capacity.DeepCopy()
	}
	pv, err := protocol.BuildVolume(protocol.VolumeSpec{Provisioner: t.c.Provisioner.Name, PVC: t.claim(), Class: t.class(),
		Handle: handle, Capacity: capacity, NodeAffinity: cc.NodeAffinity, SelectedNode: trialNode})
	if err != nil {
		panic(fmt.Sprintf("the trial's PV: %v", err)) // built from the trial's own objects
	}
	pv.APIVersion, pv.Kind = "v1", "PersistentVolume"
	pv.UID = trialUID("PersistentVolume/" + pv.Name)
	pv.Status.Phase = corev1.VolumeBound
	return pv
}

// staticVolume is a PV an admin wrote, its attributes the parameters.
func (t *trial) staticVolume() *corev1.PersistentVolume {
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: "trial-static-volume", UID: trialUID("PersistentVolume/trial-static-volume")},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: t.size.DeepCopy()},
			AccessModes: []corev1.PersistentVolumeAccessMode{t.access},
			VolumeMode:  &fs,
			ClaimRef:    &corev1.ObjectReference{Namespace: metav1.NamespaceDefault, Name: "trial-static-claim"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: t.c.Provisioner.Name, VolumeHandle: "trial-static-volume", VolumeAttributes: t.params}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
}

func (t *trial) attributesClass() *storagev1.VolumeAttributesClass {
	return &storagev1.VolumeAttributesClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "VolumeAttributesClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "trial-vac", UID: trialUID("VolumeAttributesClass/trial-vac")},
		DriverName: t.c.Provisioner.Name,
		Parameters: t.params,
	}
}

// snapshot is a taken snapshot of pv, of class "trial-snapshot-class".
func (t *trial) snapshot(pv *corev1.PersistentVolume) SnapshotRequest {
	ref := corev1.ObjectReference{Namespace: metav1.NamespaceDefault, Name: "trial-snapshot", UID: trialUID("VolumeSnapshot/default/trial-snapshot")}
	contentMeta := trialMeta("", "snapcontent-"+string(ref.UID), "VolumeSnapshotContent")
	handle := trialNode + "/" + string(contentMeta.UID)
	ready := true
	class := "trial-snapshot-class"
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	bytes := size.Value()
	content := &snapshotv1.VolumeSnapshotContent{
		TypeMeta:   metav1.TypeMeta{APIVersion: snapshotv1.SchemeGroupVersion.String(), Kind: "VolumeSnapshotContent"},
		ObjectMeta: contentMeta,
		Spec: snapshotv1.VolumeSnapshotContentSpec{
			Driver: t.c.Provisioner.Name, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete, VolumeSnapshotClassName: &class,
			Source:            snapshotv1.VolumeSnapshotContentSource{VolumeHandle: &pv.Spec.CSI.VolumeHandle},
			VolumeSnapshotRef: ref,
		},
		Status: &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: &ready, RestoreSize: &bytes},
	}
	claim := "trial-claim"
	snap := &snapshotv1.VolumeSnapshot{
		TypeMeta:   metav1.TypeMeta{APIVersion: snapshotv1.SchemeGroupVersion.String(), Kind: "VolumeSnapshot"},
		ObjectMeta: trialMeta(ref.Namespace, ref.Name, "VolumeSnapshot"),
		Spec: snapshotv1.VolumeSnapshotSpec{Source: snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim},
			VolumeSnapshotClassName: &class},
	}
	return SnapshotRequest{Content: content, Snapshot: snap, ClassParameters: t.params}
}

// groupSnapshot is a taken group snapshot of pv alone, of class
// "trial-group-snapshot-class".
func (t *trial) groupSnapshot(pv *corev1.PersistentVolume) GroupSnapshotRequest {
	ref := corev1.ObjectReference{Namespace: metav1.NamespaceDefault, Name: "trial-group-snapshot", UID: trialUID("VolumeGroupSnapshot/default/trial-group-snapshot")}
	meta := trialMeta("", "groupsnapcontent-"+string(ref.UID), "VolumeGroupSnapshotContent")
	group, member := trialNode+"/"+string(meta.UID), trialNode+"/"+string(meta.UID)+"-0"
	ready := true
	class := "trial-group-snapshot-class"
	content := &groupsnapshotv1.VolumeGroupSnapshotContent{
		TypeMeta:   metav1.TypeMeta{APIVersion: groupsnapshotv1.SchemeGroupVersion.String(), Kind: "VolumeGroupSnapshotContent"},
		ObjectMeta: meta,
		Spec: groupsnapshotv1.VolumeGroupSnapshotContentSpec{
			Driver: t.c.Provisioner.Name, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete, VolumeGroupSnapshotClassName: &class,
			Source:                 groupsnapshotv1.VolumeGroupSnapshotContentSource{VolumeHandles: []string{pv.Spec.CSI.VolumeHandle}},
			VolumeGroupSnapshotRef: ref,
		},
		Status: &groupsnapshotv1.VolumeGroupSnapshotContentStatus{VolumeGroupSnapshotHandle: &group, ReadyToUse: &ready,
			VolumeSnapshotInfoList: []groupsnapshotv1.VolumeSnapshotInfo{{VolumeHandle: pv.Spec.CSI.VolumeHandle, SnapshotHandle: member, ReadyToUse: &ready}}},
	}
	gs := &groupsnapshotv1.VolumeGroupSnapshot{
		TypeMeta:   metav1.TypeMeta{APIVersion: groupsnapshotv1.SchemeGroupVersion.String(), Kind: "VolumeGroupSnapshot"},
		ObjectMeta: trialMeta(ref.Namespace, ref.Name, "VolumeGroupSnapshot"),
		Spec: groupsnapshotv1.VolumeGroupSnapshotSpec{VolumeGroupSnapshotClassName: &class, Source: groupsnapshotv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"group": "trial"}}}},
	}
	return GroupSnapshotRequest{Content: content, GroupSnapshot: gs, ClassParameters: t.params, PVs: []*corev1.PersistentVolume{pv}}
}

// stagingCannotCreateVolume warns when no container of a staging pod can
// create /pav/volume. PaV mounts /pav in every container (protocol.BuildPod),
// so any container could; the rule only judges what it can read: a
// container runs an inline shell script when its command is a shell (sh,
// bash, ash, dash, ksh, zsh) given -c, and such a container can reach /pav
// only if its command, args, working directory, environment values or
// volume mount paths say "pav". A container that runs its image's
// entrypoint or another program may write /pav/volume unseen: no warning.
func stagingCannotCreateVolume(path *field.Path, pt *corev1.PodTemplateSpec) *field.Error {
	if pt == nil {
		return nil
	}
	for _, list := range [][]corev1.Container{pt.Spec.InitContainers, pt.Spec.Containers} {
		for _, c := range list {
			if !runsInlineScript(c) || mentionsPav(c) {
				return nil
			}
		}
	}
	return field.Invalid(path.Child("spec", "containers"), field.OmitValueType{},
		fmt.Sprintf("no container of the staging pod can create %s/%s: each runs a shell script that never names %s, so every staging would fail",
			protocol.PavMountPath, protocol.FileVolume, protocol.PavMountPath))
}

var shells = []string{"sh", "bash", "ash", "dash", "ksh", "zsh"}

func runsInlineScript(c corev1.Container) bool {
	return len(c.Command) > 0 && slices.Contains(shells, path.Base(c.Command[0])) &&
		slices.Contains(append(slices.Clone(c.Command[1:]), c.Args...), "-c")
}

func mentionsPav(c corev1.Container) bool {
	const word = "pav"
	texts := append(append([]string{c.WorkingDir}, c.Command...), c.Args...)
	for _, e := range c.Env {
		texts = append(texts, e.Value)
	}
	for _, m := range c.VolumeMounts {
		texts = append(texts, m.MountPath)
	}
	for _, s := range texts {
		if strings.Contains(s, word) {
			return true
		}
	}
	return false
}

// CheckWithTrial is Check and, for a valid p, Trial: errs are Validate's or
// the trial's errors, warnings Warnings' and the trial's.
func CheckWithTrial(ctx context.Context, p *v1alpha1.PavProvisioner) (errs, warnings field.ErrorList) {
	c, errs, _ := compile(p)
	if len(errs) > 0 {
		return errs, nil
	}
	warnings = c.warnings()
	trialErrs, trialWarnings := c.Trial(ctx)
	// A name the context lacks fails the trial too: its warning says why.
	for _, e := range trialErrs {
		if !slices.ContainsFunc(warnings, func(w *field.Error) bool { return w.Field == e.Field }) {
			errs = append(errs, e)
		}
	}
	return errs, append(warnings, trialWarnings...)
}
