package authoring

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/controller"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

type renderOptions struct {
	file, phase, pvc, sc, pv, node, selectedNode, targetPath, kubeletDir, output string
	objects                                                                      []string
	readOnly, pods                                                               bool
}

func newRenderCmd() *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render -f FILE --phase PHASE [--pvc FILE] [--sc FILE] [--pv FILE] [--node FILE] [flags]",
		Short: "Evaluate a phase of a PavProvisioner offline and print the result",
		Long: `Evaluate one phase section of a PavProvisioner with the context PaV would
give it, and print the evaluated section as YAML (the same fields as in the
PavProvisioner, values evaluated), or with --pods the complete pods PaV would
create.

Phases: validation (dynamic with --pvc, static with only --pv), creation,
deletion, expansion, modification (need --pvc; expansion's new size is the
claim's request, its current size the PV's capacity, from --pv;
modification's new class is the claim's spec.volumeAttributesClassName, its
current one the claim's status.currentVolumeAttributesClassName or the PV's
spec.volumeAttributesClassName, both VolumeAttributesClasses from --objects,
which creation gets too), staging, unstaging (need
--pvc or --pv), snapshot-creation (needs --pvc or --pv, or a
VolumeSnapshotContent in --objects), snapshot-deletion (needs a
VolumeSnapshotContent with a snapshot handle in --objects),
group-snapshot-creation (needs a VolumeGroupSnapshotContent in --objects, or
the group's PersistentVolumes: those of the provisioner in --pv and
--objects), group-snapshot-deletion (needs a VolumeGroupSnapshotContent with
a group snapshot handle in --objects), capacity
(spec.storageCapacity, for the StorageClass of --sc, of --pvc or the one
in --objects, measured on the node of --node: its topology segment is its
values of spec.topologyKeys, and it is the segment's nodeName).
VolumeSnapshots and VolumeSnapshotClasses in --objects are used for the
content they belong to, and so are VolumeGroupSnapshots and
VolumeGroupSnapshotClasses. A claim whose dataSource is a VolumeSnapshot is
restored from it: validation and creation get it and its bound
VolumeSnapshotContent from --objects (snapshot, snapshotContent,
snapshotHandle), with the controller's checks (ready, bound, of this
provisioner, restore size, volume mode).

Missing objects get defaults: a UID and the namespace "default" for the PVC;
a StorageClass named after pvc.spec.storageClassName whose provisioner is the
PavProvisioner; a PersistentVolume built from the PVC (handle pvc-<uid>,
attributes = the class parameters: what a creation pod returns in
/pav/volume-attributes is not known offline, so give --pv to see it in
params); a PVC built from the PV's claimRef; a
Node named "node". Without --selected-node, validation, creation and
deletion of a provisioner with spec.topologyKeys and a class that is not
WaitForFirstConsumer get as selectedNodeName the node the controller would
choose (said on stderr), among the Nodes of --objects (a Node without a
Ready condition counts as Ready). Staging and unstaging get the PV's mountOptions and
spec.csi.fsType as mountOptions and fsType, as kubelet passes them for
Filesystem volumes. get_pvc(name, namespace) finds the --pvc object and the
PVCs of --objects; StorageClasses, PVs and Nodes in --objects are used when
the matching flag is absent.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRender(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "filename", "f", "", "file holding the PavProvisioner")
	f.StringVar(&o.phase, "phase", "", phaseList)
	f.StringVarP(&o.output, "output", "o", "yaml", "output format: yaml or json")
	f.StringVar(&o.pvc, "pvc", "", "file holding the PersistentVolumeClaim")
	f.StringVar(&o.sc, "sc", "", "file holding the StorageClass")
	f.StringVar(&o.pv, "pv", "", "file holding the PersistentVolume")
	f.StringVar(&o.node, "node", "", "file holding the Node (staging, unstaging, capacity)")
	f.StringArrayVar(&o.objects, "objects", nil, "file holding more objects (PVCs for get_pvc, StorageClasses, PVs, Nodes, VolumeSnapshots and their contents and classes, VolumeAttributesClasses); repeatable")
	f.StringVar(&o.selectedNode, "selected-node", "", "node picked by the scheduler (selectedNodeName; validation, creation, deletion); without it, for an Immediate class and a provisioner with topology keys, the node PaV would choose among the Nodes of --objects")
	f.BoolVar(&o.readOnly, "read-only", false, "stage read-only (readOnly; staging, unstaging)")
	f.BoolVar(&o.pods, "pods", false, "print the pods PaV would create instead of the evaluated section")
	f.StringVar(&o.kubeletDir, "kubelet-dir", protocol.DefaultKubeletDir, "with --pods: "+protocol.KubeletDirHelp)
	f.StringVar(&o.targetPath, "target-path", "", "where kubelet publishes the volume (staging, unstaging; names the pods); default: kubelet's path for a client pod")
	return cmd
}

// renderWorld is the set of objects a render sees.
type renderWorld struct {
	pvcs    []*corev1.PersistentVolumeClaim
	classes []*storagev1.StorageClass
	pvs     []*corev1.PersistentVolume
	nodes   []*corev1.Node

	snapshots       []*snapshotv1.VolumeSnapshot
	contents        []*snapshotv1.VolumeSnapshotContent
	snapshotClasses []*snapshotv1.VolumeSnapshotClass
	vacs            []*storagev1.VolumeAttributesClass

	groupSnapshots []*groupsnapshotv1.VolumeGroupSnapshot
	groupContents  []*groupsnapshotv1.VolumeGroupSnapshotContent
	groupClasses   []*groupsnapshotv1.VolumeGroupSnapshotClass
}

func (w *renderWorld) load(path string) error {
	docs, err := readDocuments(path)
	if err != nil {
		return err
	}
	for _, d := range docs {
		var target interface{}
		switch d.kind() {
		case "PersistentVolumeClaim":
			o := &corev1.PersistentVolumeClaim{}
			w.pvcs, target = append(w.pvcs, o), o
		case "StorageClass":
			o := &storagev1.StorageClass{}
			w.classes, target = append(w.classes, o), o
		case "PersistentVolume":
			o := &corev1.PersistentVolume{}
			w.pvs, target = append(w.pvs, o), o
		case "Node":
			o := &corev1.Node{}
			w.nodes, target = append(w.nodes, o), o
		case "VolumeSnapshot":
			o := &snapshotv1.VolumeSnapshot{}
			w.snapshots, target = append(w.snapshots, o), o
		case "VolumeSnapshotContent":
			o := &snapshotv1.VolumeSnapshotContent{}
			w.contents, target = append(w.contents, o), o
		case "VolumeSnapshotClass":
			o := &snapshotv1.VolumeSnapshotClass{}
			w.snapshotClasses, target = append(w.snapshotClasses, o), o
		case "VolumeAttributesClass":
			o := &storagev1.VolumeAttributesClass{}
			w.vacs, target = append(w.vacs, o), o
		case "VolumeGroupSnapshot":
			o := &groupsnapshotv1.VolumeGroupSnapshot{}
			w.groupSnapshots, target = append(w.groupSnapshots, o), o
		case "VolumeGroupSnapshotContent":
			o := &groupsnapshotv1.VolumeGroupSnapshotContent{}
			w.groupContents, target = append(w.groupContents, o), o
		case "VolumeGroupSnapshotClass":
			o := &groupsnapshotv1.VolumeGroupSnapshotClass{}
			w.groupClasses, target = append(w.groupClasses, o), o
		default:
			continue // e.g. the client pods of a usage example
		}
		strict, err := sigsjson.UnmarshalStrict(d.json, target)
		if err == nil && len(strict) > 0 {
			err = strict[0]
		}
		if err != nil {
			return fmt.Errorf("%s: %s: %s", path, d.where(), cleanDecodeError(err))
		}
	}
	return nil
}

// one loads a file that must hold exactly one object of a kind.
func one[T any](path, kind string, pick func(*renderWorld) []T) (T, error) {
	var zero T
	w := &renderWorld{}
	if err := w.load(path); err != nil {
		return zero, err
	}
	l := pick(w)
	if len(l) != 1 {
		return zero, fmt.Errorf("%s: want exactly one %s, found %d", path, kind, len(l))
	}
	return l[0], nil
}

func runRender(ctx context.Context, stdout, stderr io.Writer, o *renderOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	phase, marshal, err := checkRenderOptions(o)
	if err != nil {
		return err
	}
	r, err := newRenderer(ctx, stderr, o)
	if err != nil {
		return err
	}
	out, err := r.render(phase)
	if err != nil {
		return err
	}
	return r.print(stdout, marshal, phase, out)
}

// checkRenderOptions checks the flags that need no file, and returns the
// phase and the printer of -o.
func checkRenderOptions(o *renderOptions) (protocol.Phase, func(interface{}) ([]byte, error), error) {
	phase := protocol.Phase(o.phase)
	switch {
	case phase == "":
		return "", nil, errors.New("--phase is required (" + phaseList + ")")
	case !slices.Contains(renderPhases, phase):
		return "", nil, fmt.Errorf("unknown phase %q: use %s", o.phase, phaseList)
	}
	marshal, err := marshaller(o.output)
	if err != nil {
		return "", nil, err
	}
	if o.kubeletDir == "" {
		o.kubeletDir = protocol.DefaultKubeletDir
	}
	if err := protocol.CheckKubeletDir(o.kubeletDir); err != nil {
		return "", nil, fmt.Errorf("--kubelet-dir: %w", err)
	}
	if o.file == "" {
		return "", nil, errors.New("-f FILE (the PavProvisioner) is required")
	}
	return phase, marshal, nil
}

// renderer is one render: the provisioner and the objects it sees.
type renderer struct {
	ctx      context.Context
	stderr   io.Writer
	o        *renderOptions
	prov     *v1alpha1.PavProvisioner
	compiled *templating.Compiled
	w        *renderWorld
	pvc      *corev1.PersistentVolumeClaim // --pvc, defaulted
	pv       *corev1.PersistentVolume      // --pv
	claims   []*corev1.PersistentVolumeClaim
	// problems renders an evaluation's errors at their places in the file.
	problems func(error) string
	// chosenNode: the node the controller would choose for the claim
	// (controller.ImmediateNode), "" for none.
	chosenNode string
}

// rendered is a phase's evaluated section, and the pod PaV would create for it.
type rendered struct {
	section     interface{}
	podTemplate *corev1.PodTemplateSpec
	pod         func(protocol.PodBase) (*corev1.Pod, error)
	noPod       string // why there is no pod despite a template
}

func newRenderer(ctx context.Context, stderr io.Writer, o *renderOptions) (*renderer, error) {
	prov, doc, err := loadProvisioner(o.file)
	if err != nil {
		return nil, err
	}
	// Each problem at its place in the file, as pav validate reports it.
	problems := func(err error) string { return doc.problemLines(o.file, err) }
	compiled, err := templating.Compile(prov)
	if err != nil {
		return nil, fmt.Errorf("invalid PavProvisioner %s:\n%s", prov.Name, problems(err))
	}
	r := &renderer{ctx: ctx, stderr: stderr, o: o, prov: prov, compiled: compiled, w: &renderWorld{}, problems: problems}
	// Objects of the files given for --pvc, --sc, --pv and --node count too
	// (e.g. a usage example holding a StorageClass, a PVC and a pod).
	for _, f := range append(append([]string{}, o.objects...), nonEmpty(o.pvc, o.sc, o.pv, o.node)...) {
		if err := r.w.load(f); err != nil {
			return nil, err
		}
	}
	if o.pvc != "" {
		if r.pvc, err = one(o.pvc, "PersistentVolumeClaim", func(w *renderWorld) []*corev1.PersistentVolumeClaim { return w.pvcs }); err != nil {
			return nil, err
		}
		defaultClaim(r.pvc)
	}
	if o.pv != "" {
		if r.pv, err = one(o.pv, "PersistentVolume", func(w *renderWorld) []*corev1.PersistentVolume { return w.pvs }); err != nil {
			return nil, err
		}
	}
	// get_pvc sees the claim and the PVCs of --objects.
	r.claims = append([]*corev1.PersistentVolumeClaim{}, r.w.pvcs...)
	if r.pvc != nil {
		r.claims = append([]*corev1.PersistentVolumeClaim{r.pvc}, r.claims...)
	}
	return r, nil
}

// render evaluates the phase.
func (r *renderer) render(phase protocol.Phase) (*rendered, error) {
	switch phase {
	case protocol.PhaseValidation:
		return r.validation()
	case protocol.PhaseCreation:
		return r.creation()
	case protocol.PhaseDeletion:
		return r.deletion()
	case protocol.PhaseExpansion:
		return r.expansion()
	case protocol.PhaseModification:
		return r.modification()
	case protocol.PhaseSnapshotCreation, protocol.PhaseSnapshotDeletion:
		return r.snapshot(phase)
	case protocol.PhaseGroupSnapshotCreation, protocol.PhaseGroupSnapshotDeletion:
		return r.groupSnapshot(phase)
	case protocol.PhaseCapacity:
		return r.capacity()
	}
	return r.staging(phase)
}

// print writes the evaluated section, or with --pods the pod PaV creates.
func (r *renderer) print(stdout io.Writer, marshal func(interface{}) ([]byte, error), phase protocol.Phase, out *rendered) error {
	v := out.section
	if r.o.pods {
		switch {
		case out.noPod != "":
			fmt.Fprintf(r.stderr, "no pod: %s\n", out.noPod)
			return nil
		case out.podTemplate == nil:
			fmt.Fprintf(r.stderr, "no pod: the %s phase of PavProvisioner %s has no pod template\n", phase, r.prov.Name)
			return nil
		}
		pod, err := out.pod(protocol.PodBase{Template: out.podTemplate, Provisioner: r.prov.Name, Root: protocol.PodDirRoot(r.o.kubeletDir)})
		if err != nil {
			return err
		}
		v = pod
	}
	b, err := marshal(v)
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

// getPVC is get_pvc over the claim and the PVCs of --objects.
func (r *renderer) getPVC(_ context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	for _, c := range r.claims {
		ns := c.Namespace
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		if c.Name == name && ns == namespace {
			return c, nil
		}
	}
	return nil, fmt.Errorf("persistentvolumeclaims %q not found in namespace %q", name, namespace)
}

// class is the StorageClass of --sc, or of --objects named by the claim, or
// a default one of the provisioner.
func (r *renderer) class() (*storagev1.StorageClass, error) {
	if r.o.sc != "" {
		return one(r.o.sc, "StorageClass", func(w *renderWorld) []*storagev1.StorageClass { return w.classes })
	}
	name := ""
	switch {
	case r.pvc == nil && len(r.w.classes) == 1: // capacity: the class of --objects
		return r.w.classes[0], nil
	case r.pvc != nil && r.pvc.Spec.StorageClassName != nil:
		name = *r.pvc.Spec.StorageClassName
	}
	for _, c := range r.w.classes {
		if c.Name == name {
			return c, nil
		}
	}
	if name == "" {
		name = "default"
	}
	bind := storagev1.VolumeBindingImmediate
	if r.o.selectedNode != "" {
		bind = storagev1.VolumeBindingWaitForFirstConsumer
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	return &storagev1.StorageClass{
		TypeMeta:          metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta:        metav1.ObjectMeta{Name: name, UID: fakeUID("StorageClass/" + name)},
		Provisioner:       r.prov.Name,
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &bind,
	}, nil
}

// dynamic is the request of a dynamic phase: the claim and its class.
func (r *renderer) dynamic(phase protocol.Phase) (templating.DynamicRequest, error) {
	if r.pvc == nil {
		return templating.DynamicRequest{}, fmt.Errorf("phase %s needs --pvc (dynamic provisioning)", phase)
	}
	sc, err := r.class()
	if err != nil {
		return templating.DynamicRequest{}, err
	}
	vac, err := r.w.attributesClass(r.pvc.Spec.VolumeAttributesClassName)
	if err != nil {
		return templating.DynamicRequest{}, err
	}
	if p := protocol.ClaimProvisioner(r.pvc, sc); p != r.prov.Name {
		fmt.Fprintf(r.stderr, "warning: the claim is for provisioner %q (its StorageClass %s), not PavProvisioner %s: PaV would not provision it\n", p, sc.Name, r.prov.Name)
	}
	req := templating.DynamicRequest{PVC: r.pvc, Class: sc, SelectedNodeName: r.o.selectedNode, VolumeAttributesClass: vac}
	switch phase {
	case protocol.PhaseValidation, protocol.PhaseCreation, protocol.PhaseDeletion:
		if req.SelectedNodeName != "" {
			break
		}
		// The node the controller chooses for Immediate binding.
		r.chosenNode, err = controller.ImmediateNode(r.prov, sc, r.pvc, assumeReady(r.topologyNodes()))
		if err != nil {
			return templating.DynamicRequest{}, fmt.Errorf("%w (give --objects the cluster's Nodes with their labels, or --selected-node)", err)
		}
		if r.chosenNode != "" {
			fmt.Fprintf(r.stderr, "selectedNodeName: %s, the node PaV chooses for a claim of the Immediate StorageClass %s (a Ready, schedulable node of the requisite topology: the first preferred segment with one, by a hash of the claim's name, then by its UID among the segment's nodes); --selected-node NODE renders another\n",
				r.chosenNode, sc.Name)
			req.SelectedNodeName = r.chosenNode
		}
	}
	if phase == protocol.PhaseValidation || phase == protocol.PhaseCreation {
		// What the controller gives a claim it has yet to provision.
		if err := r.restore(&req); err != nil {
			return templating.DynamicRequest{}, err
		}
		if req.Topology, err = controller.Topology(r.prov, sc, r.pvc, req.SelectedNodeName, r.topologyNodes()); err != nil {
			return templating.DynamicRequest{}, fmt.Errorf("%w (give --objects the cluster's Nodes with their labels)", err)
		}
	}
	return req, nil
}

// assumeReady: the nodes, those without a Ready condition (written by
// hand, not read from a cluster) taken as Ready, for ImmediateNode.
func assumeReady(nodes []*corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i, n := range nodes {
		out[i] = n
		if !slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady }) {
			out[i] = n.DeepCopy()
			out[i].Status.Conditions = append(out[i].Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue})
		}
	}
	return out
}

// topologyNodes are the cluster's nodes for the creation's topology: the
// Nodes of --objects, or else the one of --node (or a made-up one) named
// as --selected-node.
func (r *renderer) topologyNodes() []*corev1.Node {
	if len(r.w.nodes) > 0 {
		return r.w.nodes
	}
	n, err := r.node()
	if err != nil {
		return nil
	}
	if sel := r.o.selectedNode; sel != "" && n.Name != sel {
		n = n.DeepCopy()
		n.Name = sel
		n.Labels = maps.Clone(n.Labels)
		n.Labels[corev1.LabelHostname] = sel
	}
	return []*corev1.Node{n}
}

// restore gives a claim restored from a VolumeSnapshot the snapshot and its
// content of --objects (in place of the API server's), by the controller's
// own rule; what the controller would wait for or refuse is an error.
func (r *renderer) restore(req *templating.DynamicRequest) error {
	p := controller.Restore(r.ctx, r.prov, r.w, req)
	switch {
	case p == nil:
		return nil
	case p.Retry:
		return fmt.Errorf("PaV would not provision this claim yet: %s", p.Message)
	}
	return fmt.Errorf("PaV would refuse this claim: %s", p.Message)
}

// VolumeSnapshot is the VolumeSnapshot of --objects (without a namespace:
// in "default"), for controller.Restore.
func (w *renderWorld) VolumeSnapshot(_ context.Context, namespace, name string) (*snapshotv1.VolumeSnapshot, error) {
	for _, s := range w.snapshots {
		if s.Name == name && (s.Namespace == namespace || s.Namespace == "" && namespace == metav1.NamespaceDefault) {
			s = s.DeepCopy()
			s.Namespace = namespace
			return s, nil
		}
	}
	return nil, fmt.Errorf("no VolumeSnapshot %s/%s in --objects", namespace, name)
}

// VolumeSnapshotContent is the VolumeSnapshotContent of --objects, for
// controller.Restore.
func (w *renderWorld) VolumeSnapshotContent(_ context.Context, name string) (*snapshotv1.VolumeSnapshotContent, error) {
	for _, c := range w.contents {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no VolumeSnapshotContent %s in --objects", name)
}

// evalError places a dynamic phase's evaluation problems in the file and,
// when something evaluated to none without --selected-node, hints at it:
// selectedNodeName is none until the scheduler picks a node for a
// WaitForFirstConsumer class.
func (r *renderer) evalError(err error, req templating.DynamicRequest) error {
	msg := r.problems(err)
	if req.SelectedNodeName == "" && strings.Contains(msg, "evaluated to none") {
		hint := "selectedNodeName is none without --selected-node (the node the scheduler picks for a WaitForFirstConsumer class): give --selected-node NODE if the claim's class is one"
		if m := req.Class.VolumeBindingMode; m != nil && *m == storagev1.VolumeBindingWaitForFirstConsumer {
			hint = fmt.Sprintf("StorageClass %s is WaitForFirstConsumer: selectedNodeName is the node the scheduler picks, none until then: give --selected-node NODE", req.Class.Name)
		}
		msg += "\nhint: " + hint
	}
	return errors.New(msg)
}

// claimPod builds the phase's pod for the claim of req, as the controller does.
func (r *renderer) claimPod(phase protocol.Phase, req templating.DynamicRequest, extra map[string]string) func(protocol.PodBase) (*corev1.Pod, error) {
	return func(b protocol.PodBase) (*corev1.Pod, error) {
		return protocol.ClaimPod(b, protocol.ClaimPodSpec{Phase: phase, PVC: req.PVC, Class: req.Class, Extra: extra, ChosenNode: r.chosenNode})
	}
}

// warnRejected warns when PaV would reject the volume request vr.
func (r *renderer) warnRejected(what string, cfg *templating.ValidationConfig, vr templating.VolumeRequest, err error) {
	if err == nil {
		err = cfg.Check(vr)
	}
	if err != nil {
		fmt.Fprintf(r.stderr, "warning: PaV would reject this %s: %v\n", what, err)
	}
}

func (r *renderer) validation() (*rendered, error) {
	if r.pvc == nil && r.pv != nil {
		return r.staticValidation()
	}
	if r.pvc == nil {
		return nil, fmt.Errorf("phase %s needs --pvc (dynamic provisioning) or --pv (static provisioning)", protocol.PhaseValidation)
	}
	req, err := r.dynamic(protocol.PhaseValidation)
	if err != nil {
		return nil, err
	}
	cfg, err := r.compiled.DynamicValidation(r.ctx, req, r.getPVC)
	if err != nil {
		return nil, r.evalError(err, req)
	}
	vr, err := templating.DynamicVolumeRequest(r.pvc)
	r.warnRejected("claim", cfg, vr, err)
	return &rendered{section: cfg.Evaluated, podTemplate: cfg.PodTemplate, pod: r.claimPod(protocol.PhaseValidation, req, nil)}, nil
}

func (r *renderer) staticValidation() (*rendered, error) {
	cfg, err := r.compiled.StaticValidation(r.ctx, templating.StaticRequest{PV: r.pv}, r.getPVC)
	if err != nil {
		return nil, errors.New(r.problems(err))
	}
	vr, err := templating.StaticVolumeRequest(r.pv)
	r.warnRejected("PersistentVolume", cfg, vr, err)
	// PaV checks a static volume's modes and capacities when staging it
	// but runs no validation pod for it (the spec leaves that
	// unimplemented), so there is no pod to show.
	return &rendered{section: cfg.Evaluated, noPod: "PaV runs no validation pod for a statically provisioned volume"}, nil
}

func (r *renderer) creation() (*rendered, error) {
	req, err := r.dynamic(protocol.PhaseCreation)
	if err != nil {
		return nil, err
	}
	cfg, err := r.compiled.Creation(r.ctx, req, r.getPVC)
	if err != nil {
		return nil, r.evalError(err, req)
	}
	if cfg.PodTemplate == nil || cfg.Capacity != nil {
		// Decided before any pod runs: what the controller would make of it.
		if _, _, err := protocol.ClaimVolume(cfg.Handle, cfg.Capacity, nil, nil, cfg.PodTemplate != nil, req.PVC); err != nil {
			fmt.Fprintf(r.stderr, "warning: PaV would refuse the volume this creation makes: %v\n", err)
		}
	}
	// The controller records the evaluation on the creation pod.
	controller.CompleteCreation(cfg, req)
	extra, err := cfg.Record()
	if err != nil {
		return nil, err
	}
	return &rendered{section: cfg.Evaluated, podTemplate: cfg.PodTemplate, pod: r.claimPod(protocol.PhaseCreation, req, extra)}, nil
}

func (r *renderer) deletion() (*rendered, error) {
	req, err := r.dynamic(protocol.PhaseDeletion)
	if err != nil {
		return nil, err
	}
	cfg, err := r.compiled.Deletion(r.ctx, req, r.getPVC)
	if err != nil {
		return nil, r.evalError(err, req)
	}
	return &rendered{section: cfg.Evaluated, podTemplate: cfg.PodTemplate, pod: r.claimPod(protocol.PhaseDeletion, req, nil)}, nil
}

// expansion's new size is the claim's request, its current size the PV's
// capacity.
func (r *renderer) expansion() (*rendered, error) {
	req, err := r.dynamic(protocol.PhaseExpansion)
	if err != nil {
		return nil, err
	}
	if req.PV, err = r.volume(req.Class); err != nil {
		return nil, err
	}
	cfg, ok, err := r.compiled.Expansion(r.ctx, req, r.getPVC)
	if !ok {
		return nil, fmt.Errorf("PavProvisioner %s has no spec.volumeExpansion: it cannot expand volumes", r.prov.Name)
	}
	if err != nil {
		return nil, errors.New(r.problems(err))
	}
	want := r.pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	claim := &corev1.ObjectReference{Namespace: r.pvc.Namespace, Name: r.pvc.Name, UID: r.pvc.UID}
	pod := func(b protocol.PodBase) (*corev1.Pod, error) {
		return protocol.VolumePod(b, protocol.VolumePodSpec{Phase: protocol.PhaseExpansion, PVName: req.PV.Name, Claim: claim,
			Extra: map[string]string{protocol.AnnotationExpansionTarget: want.String()}}), nil
	}
	return &rendered{section: cfg.Evaluated, podTemplate: cfg.PodTemplate, pod: pod}, nil
}

// volume is the PV of --pv, or the claim's in --objects, or the one PaV
// would create for the claim in class sc (nil: the claim's class), which
// records --selected-node as PaV records the selected node.
func (r *renderer) volume(sc *storagev1.StorageClass) (*corev1.PersistentVolume, error) {
	if r.pv != nil {
		return r.pv, nil
	}
	if pv := r.w.volumeOf(r.pvc); pv != nil {
		return pv, nil
	}
	if sc == nil {
		var err error
		if sc, err = r.class(); err != nil {
			return nil, err
		}
	}
	pv, err := defaultVolume(r.pvc, sc, r.prov.Name)
	if err == nil && r.o.selectedNode != "" {
		metav1.SetMetaDataAnnotation(&pv.ObjectMeta, protocol.AnnotationSelectedNode, r.o.selectedNode)
	}
	return pv, err
}

func (r *renderer) snapshot(phase protocol.Phase) (*rendered, error) {
	req, err := r.snapshotRequest(phase)
	if err != nil {
		return nil, err
	}
	var cfg *templating.PodConfig
	if phase == protocol.PhaseSnapshotCreation {
		var ok bool
		if cfg, ok, err = r.compiled.SnapshotCreation(r.ctx, req, r.getPVC); err == nil && !ok {
			return nil, fmt.Errorf("PavProvisioner %s has no spec.snapshotCreation", r.prov.Name)
		}
	} else {
		cfg, err = r.compiled.SnapshotDeletion(r.ctx, req, r.getPVC)
	}
	if err != nil {
		return nil, errors.New(r.problems(err))
	}
	pod := func(b protocol.PodBase) (*corev1.Pod, error) {
		return protocol.SnapshotPod(b.Template, b.Provisioner, b.Root, phase, req.Content.Name, string(req.Content.UID)), nil
	}
	return &rendered{section: cfg.Evaluated, podTemplate: cfg.PodTemplate, pod: pod}, nil
}

// staging renders the staging or unstaging phase.
func (r *renderer) staging(phase protocol.Phase) (*rendered, error) {
	req, err := r.stagingRequest(phase)
	if err != nil {
		return nil, err
	}
	if csi := req.PV.Spec.CSI; csi != nil && phase == protocol.PhaseStaging {
		// As the node plugin refuses it (a static PV's handle is checked nowhere before).
		if err := protocol.CheckHandle(csi.VolumeHandle); err != nil {
			return nil, fmt.Errorf("PersistentVolume %s: spec.csi.volumeHandle: %w; the node plugin refuses to stage it", req.PV.Name, err)
		}
	}
	var cfg *templating.PodConfig
	if phase == protocol.PhaseStaging {
		cfg, err = r.compiled.Staging(r.ctx, req, r.getPVC)
	} else {
		cfg, err = r.compiled.Unstaging(r.ctx, req, r.getPVC)
	}
	if err != nil {
		return nil, errors.New(r.problems(err))
	}
	targetPath := r.o.targetPath
	if targetPath == "" {
		targetPath = kubelet.Dir(r.o.kubeletDir).PublishPath(fakeUID("Pod/client"), req.PV.Name)
	}
	handle := ""
	if req.PV.Spec.CSI != nil {
		handle = req.PV.Spec.CSI.VolumeHandle
	}
	id := protocol.StagingID(handle, targetPath)
	pod := func(b protocol.PodBase) (*corev1.Pod, error) {
		if phase == protocol.PhaseStaging {
			return protocol.StagingPod(b, protocol.StagingPodSpec{Revision: templating.StagingRevision(r.prov), Node: req.Node.Name,
				StagingID: id, PV: req.PV, PVC: req.PVC, Publication: protocol.Publication{
					TargetPath: targetPath, ReadOnly: req.ReadOnly, MountOptions: req.MountOptions, FSType: req.FSType}})
		}
		return protocol.UnstagingPod(b, protocol.UnstagingPodSpec{Node: req.Node.Name, StagingID: id, PV: req.PV, PVC: req.PVC,
			TargetPath: targetPath, ReadOnly: req.ReadOnly}), nil
	}
	return &rendered{section: cfg.Evaluated, podTemplate: cfg.PodTemplate, pod: pod}, nil
}

// stagingRequest gathers a staging's volume, claim and node; with kubelet's
// mount options and fsType for a Filesystem volume.
func (r *renderer) stagingRequest(phase protocol.Phase) (templating.StagingRequest, error) {
	if r.pvc == nil && r.pv == nil {
		return templating.StagingRequest{}, fmt.Errorf("phase %s needs --pvc or --pv", phase)
	}
	pv := r.pv
	if pv == nil {
		var err error
		if pv, err = r.volume(nil); err != nil {
			return templating.StagingRequest{}, err
		}
	}
	pvc := r.pvc
	if pvc == nil {
		pvc = defaultClaimOf(pv)
		r.claims = append(r.claims, pvc)
	}
	node, err := r.node()
	if err != nil {
		return templating.StagingRequest{}, err
	}
	req := templating.StagingRequest{PVC: pvc, PV: pv, Node: node, ReadOnly: r.o.readOnly}
	if pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode == corev1.PersistentVolumeFilesystem {
		// What kubelet passes when it mounts the volume.
		req.MountOptions = pv.Spec.MountOptions
		if pv.Spec.CSI != nil {
			req.FSType = pv.Spec.CSI.FSType
		}
	}
	return req, nil
}

// node is the Node of --node, or the one of --objects, or a default one.
func (r *renderer) node() (*corev1.Node, error) {
	if r.o.node != "" {
		return one(r.o.node, "Node", func(w *renderWorld) []*corev1.Node { return w.nodes })
	}
	if len(r.w.nodes) == 1 {
		return r.w.nodes[0], nil
	}
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "node", UID: fakeUID("Node/node"), Labels: map[string]string{corev1.LabelHostname: "node"}},
	}, nil
}

// capacity evaluates storageCapacity for the class of --sc (or the one of
// --objects) in the segment of the node of --node.
func (r *renderer) capacity() (*rendered, error) {
	if r.prov.Spec.StorageCapacity == nil {
		return nil, fmt.Errorf("PavProvisioner %s has no spec.storageCapacity", r.prov.Name)
	}
	sc, err := r.class()
	if err != nil {
		return nil, err
	}
	node, err := r.node()
	if err != nil {
		return nil, err
	}
	seg, missing := protocol.NodeSegment(r.prov.Spec.TopologyKeys, node.Labels)
	if missing != "" {
		return nil, fmt.Errorf("%s (give --node a Node with the label)", protocol.MissingTopologyLabel(node.Name, r.prov.Name, missing))
	}
	cfg, err := r.compiled.StorageCapacity(r.ctx, templating.CapacityRequest{Class: sc, Segment: seg, NodeName: node.Name})
	if err != nil {
		return nil, errors.New(r.problems(err))
	}
	pod := func(b protocol.PodBase) (*corev1.Pod, error) {
		return protocol.CapacityPod(b.Template, b.Provisioner, b.Root, protocol.CapacityKey(sc.Name, seg), node.Name), nil
	}
	return &rendered{section: cfg.Evaluated, podTemplate: cfg.PodTemplate, pod: pod}, nil
}

// renderPhases are the phases render evaluates: every section of a PavProvisioner.
var renderPhases = []protocol.Phase{protocol.PhaseValidation, protocol.PhaseCreation, protocol.PhaseDeletion,
	protocol.PhaseExpansion, protocol.PhaseModification, protocol.PhaseStaging, protocol.PhaseUnstaging, protocol.PhaseSnapshotCreation, protocol.PhaseSnapshotDeletion,
	protocol.PhaseGroupSnapshotCreation, protocol.PhaseGroupSnapshotDeletion, protocol.PhaseCapacity}

var phaseList = func() string {
	s := make([]string, len(renderPhases))
	for i, p := range renderPhases {
		s[i] = string(p)
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}()

// marshaller prints objects as -o asks.
func marshaller(format string) (func(interface{}) ([]byte, error), error) {
	switch format {
	case "yaml", "":
		return yaml.Marshal, nil
	case "json":
		return func(v interface{}) ([]byte, error) {
			out, err := json.MarshalIndent(v, "", "  ")
			return append(out, '\n'), err
		}, nil
	}
	return nil, fmt.Errorf("unknown output format %q: use yaml or json", format)
}

// attributesClass is the VolumeAttributesClass of --objects named *name;
// nil for none, an error if --objects lacks it.
func (w *renderWorld) attributesClass(name *string) (*storagev1.VolumeAttributesClass, error) {
	if name == nil || *name == "" {
		return nil, nil
	}
	for _, v := range w.vacs {
		if v.Name == *name {
			return v, nil
		}
	}
	return nil, fmt.Errorf("the claim names VolumeAttributesClass %q: give it in --objects", *name)
}

// modification evaluates volumeModification for giving the claim's volume
// the class the claim names, from the class it has now: the claim's
// status.currentVolumeAttributesClassName, else the PV's.
func (r *renderer) modification() (*rendered, error) {
	req, err := r.dynamic(protocol.PhaseModification)
	if err != nil {
		return nil, err
	}
	if req.VolumeAttributesClass == nil {
		return nil, fmt.Errorf("phase %s needs a claim with spec.volumeAttributesClassName (the class to modify the volume to)", protocol.PhaseModification)
	}
	if req.PV, err = r.volume(req.Class); err != nil {
		return nil, err
	}
	current := req.PVC.Status.CurrentVolumeAttributesClassName
	if current == nil {
		current = req.PV.Spec.VolumeAttributesClassName
	}
	if req.CurrentVolumeAttributesClass, err = r.w.attributesClass(current); err != nil {
		return nil, err
	}
	cfg, ok, err := r.compiled.Modification(r.ctx, req, r.getPVC)
	if !ok {
		return nil, fmt.Errorf("PavProvisioner %s has no spec.volumeModification: it cannot modify volumes", r.prov.Name)
	}
	if err != nil {
		return nil, errors.New(r.problems(err))
	}
	claim := &corev1.ObjectReference{Namespace: req.PVC.Namespace, Name: req.PVC.Name, UID: req.PVC.UID}
	target := req.VolumeAttributesClass.Name
	pod := func(b protocol.PodBase) (*corev1.Pod, error) {
		return protocol.VolumePod(b, protocol.VolumePodSpec{Phase: protocol.PhaseModification, PVName: req.PV.Name, Claim: claim,
			Extra: map[string]string{protocol.AnnotationModificationTarget: target}}), nil
	}
	return &rendered{section: cfg.Evaluated, podTemplate: cfg.PodTemplate, pod: pod}, nil
}

// volumeOf is the PV of --objects (or the --pv file) the claim is bound to.
func (w *renderWorld) volumeOf(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	for _, v := range w.pvs {
		if pvc.Spec.VolumeName != "" && v.Name == pvc.Spec.VolumeName {
			return v
		}
	}
	return nil
}

// loadProvisioner reads the one PavProvisioner of a file, and its document.
func loadProvisioner(path string) (*v1alpha1.PavProvisioner, *document, error) {
	docs, err := readDocuments(path)
	if err != nil {
		return nil, nil, err
	}
	var found []*document
	for _, d := range docs {
		if d.kind() == v1alpha1.Kind {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return nil, nil, fmt.Errorf("%s: want exactly one PavProvisioner, found %d", path, len(found))
	}
	p, errs := decodeProvisioner(found[0])
	if len(errs) > 0 {
		return nil, nil, errors.New(found[0].problemLines(path, errs.ToAggregate()))
	}
	return p, found[0], nil
}

// fakeUID makes a stable UUID-shaped UID from a name, so that renders are
// reproducible.
func fakeUID(seed string) types.UID {
	h := sha256.Sum256([]byte(seed))
	x := fmt.Sprintf("%x", h[:16])
	return types.UID(x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32])
}

func defaultClaim(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Namespace == "" {
		pvc.Namespace = metav1.NamespaceDefault
	}
	if pvc.UID == "" {
		pvc.UID = fakeUID("PersistentVolumeClaim/" + pvc.Namespace + "/" + pvc.Name)
	}
	if pvc.Spec.VolumeMode == nil {
		fs := corev1.PersistentVolumeFilesystem
		pvc.Spec.VolumeMode = &fs // as the API server defaults it
	}
}

// defaultVolume is the PV PaV would have created for the claim (with the
// default handle and the requested capacity), as the API server returns it.
func defaultVolume(pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, driver string) (*corev1.PersistentVolume, error) {
	pv, err := protocol.BuildVolume(protocol.VolumeSpec{
		Provisioner: driver,
		PVC:         pvc,
		Class:       sc,
		Handle:      protocol.VolumeName(pvc),
		Capacity:    pvc.Spec.Resources.Requests[corev1.ResourceStorage],
	})
	if err != nil {
		return nil, err
	}
	if pvc.Spec.VolumeName != "" {
		pv.Name = pvc.Spec.VolumeName
	}
	pv.APIVersion, pv.Kind = "v1", "PersistentVolume"
	pv.UID = fakeUID("PersistentVolume/" + pv.Name)
	pv.Status.Phase = corev1.VolumeBound
	return pv, nil
}

// defaultClaimOf is a claim bound to a statically provisioned PV.
func defaultClaimOf(pv *corev1.PersistentVolume) *corev1.PersistentVolumeClaim {
	ns, name := metav1.NamespaceDefault, "claim"
	if r := pv.Spec.ClaimRef; r != nil {
		if r.Namespace != "" {
			ns = r.Namespace
		}
		if r.Name != "" {
			name = r.Name
		}
	}
	sc := pv.Spec.StorageClassName
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      pv.Spec.AccessModes,
			VolumeMode:       pv.Spec.VolumeMode,
			VolumeName:       pv.Name,
			StorageClassName: &sc,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: pv.Spec.Capacity[corev1.ResourceStorage]},
			},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	defaultClaim(pvc)
	return pvc
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, x := range s {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// snapshotRequest gathers a snapshot phase's objects: the content of
// --objects (for creation, else one made for the volume of --pv or --pvc,
// as the snapshot-controller makes one for a VolumeSnapshot), its
// VolumeSnapshot and class from --objects, and the volume and claim (a
// default volume records selectedNode, --selected-node).
func (r *renderer) snapshotRequest(phase protocol.Phase) (templating.SnapshotRequest, error) {
	var req templating.SnapshotRequest
	switch n := len(r.w.contents); {
	case n == 1:
		req.Content = r.w.contents[0]
	case n > 1:
		return req, fmt.Errorf("phase %s: want at most one VolumeSnapshotContent in --objects, found %d", phase, n)
	case phase == protocol.PhaseSnapshotDeletion:
		return req, fmt.Errorf("phase %s needs a VolumeSnapshotContent (with its snapshot handle) in --objects", phase)
	case r.pv == nil && r.pvc == nil:
		return req, fmt.Errorf("phase %s needs --pvc or --pv (the volume), or a VolumeSnapshotContent in --objects", phase)
	}
	pv, err := r.snapshotVolume()
	if err != nil {
		return req, err
	}
	if req.Content == nil {
		req.Content = defaultContent(pv.Spec.CSI.VolumeHandle, r.prov.Name)
	}
	req.Snapshot, req.ClassParameters = r.w.snapshotOf(req.Content)
	if pv == nil && req.Content.Spec.Source.VolumeHandle != nil {
		pv = r.w.volumeWithHandle(*req.Content.Spec.Source.VolumeHandle)
	}
	if phase == protocol.PhaseSnapshotCreation {
		req.PV, req.PVC = pv, r.pvc
		if req.PVC == nil && pv != nil {
			req.PVC = defaultClaimOf(pv)
		}
	}
	return req, nil
}

// snapshotVolume is the volume of --pv, or the claim's (a default one
// records the selected node, as PaV does on the PVs it creates); nil
// without either.
func (r *renderer) snapshotVolume() (*corev1.PersistentVolume, error) {
	if r.pv != nil || r.pvc == nil {
		return r.pv, nil
	}
	if pv := r.w.volumeOf(r.pvc); pv != nil {
		return pv, nil
	}
	return r.volume(nil)
}

// defaultContent is the content the snapshot-controller makes for a
// VolumeSnapshot "snapshot" of the volume with handle.
func defaultContent(handle, driver string) *snapshotv1.VolumeSnapshotContent {
	return &snapshotv1.VolumeSnapshotContent{
		TypeMeta:   metav1.TypeMeta{APIVersion: snapshotv1.SchemeGroupVersion.String(), Kind: "VolumeSnapshotContent"},
		ObjectMeta: metav1.ObjectMeta{Name: "snapcontent-" + string(fakeUID("VolumeSnapshot/snapshot")), UID: fakeUID("VolumeSnapshotContent/snapshot")},
		Spec: snapshotv1.VolumeSnapshotContentSpec{
			Driver: driver, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
			Source:            snapshotv1.VolumeSnapshotContentSource{VolumeHandle: &handle},
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: metav1.NamespaceDefault, Name: "snapshot", UID: fakeUID("VolumeSnapshot/snapshot")},
		},
	}
}

// snapshotOf is the VolumeSnapshot and the class parameters of content,
// from --objects.
func (w *renderWorld) snapshotOf(content *snapshotv1.VolumeSnapshotContent) (*snapshotv1.VolumeSnapshot, map[string]string) {
	var snap *snapshotv1.VolumeSnapshot
	var params map[string]string
	ref := content.Spec.VolumeSnapshotRef
	for _, s := range w.snapshots {
		if s.Name == ref.Name && (s.Namespace == ref.Namespace || s.Namespace == "" && ref.Namespace == metav1.NamespaceDefault) {
			snap = s
		}
	}
	if n := content.Spec.VolumeSnapshotClassName; n != nil {
		for _, c := range w.snapshotClasses {
			if c.Name == *n {
				params = c.Parameters
			}
		}
	}
	return snap, params
}

// volumeWithHandle is the PV of --objects with the CSI volume handle.
func (w *renderWorld) volumeWithHandle(handle string) *corev1.PersistentVolume {
	var found *corev1.PersistentVolume
	for _, v := range w.pvs {
		if v.Spec.CSI != nil && v.Spec.CSI.VolumeHandle == handle {
			found = v
		}
	}
	return found
}
