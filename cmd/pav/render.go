package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

func init() { rootCmd.AddCommand(newRenderCmd()) }

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
deletion, expansion (need --pvc; expansion's new size is the claim's request,
its current size the PV's capacity, from --pv), staging, unstaging (need
--pvc or --pv), snapshot-creation (needs --pvc or --pv, or a
VolumeSnapshotContent in --objects), snapshot-deletion (needs a
VolumeSnapshotContent with a snapshot handle in --objects).
VolumeSnapshots and VolumeSnapshotClasses in --objects are used for the
content they belong to.

Missing objects get defaults: a UID and the namespace "default" for the PVC;
a StorageClass named after pvc.spec.storageClassName whose provisioner is the
PavProvisioner; a PersistentVolume built from the PVC (handle pvc-<uid>,
attributes = the class parameters: what a creation pod returns in
/pav/volume-attributes is not known offline, so give --pv to see it in
params); a PVC built from the PV's claimRef; a
Node named "node". Staging and unstaging get the PV's mountOptions and
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
	f.StringVar(&o.node, "node", "", "file holding the Node (staging, unstaging)")
	f.StringArrayVar(&o.objects, "objects", nil, "file holding more objects (PVCs for get_pvc, StorageClasses, PVs, Nodes); repeatable")
	f.StringVar(&o.selectedNode, "selected-node", "", "node picked by the scheduler (selectedNodeName; validation, creation, deletion)")
	f.BoolVar(&o.readOnly, "read-only", false, "stage read-only (readOnly; staging, unstaging)")
	f.BoolVar(&o.pods, "pods", false, "print the pods PaV would create instead of the evaluated section")
	f.StringVar(&o.kubeletDir, "kubelet-dir", protocol.DefaultKubeletDir, "with --pods: "+kubeletDirFlagHelp)
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
	phase := protocol.Phase(o.phase)
	switch {
	case phase == "":
		return errors.New("--phase is required (" + phaseList + ")")
	case !slices.Contains(renderPhases, phase):
		return fmt.Errorf("unknown phase %q: use %s", o.phase, phaseList)
	}
	marshal, err := marshaller(o.output)
	if err != nil {
		return err
	}
	if o.kubeletDir == "" {
		o.kubeletDir = protocol.DefaultKubeletDir
	}
	if err := protocol.CheckKubeletDir(o.kubeletDir); err != nil {
		return fmt.Errorf("--kubelet-dir: %w", err)
	}
	if o.file == "" {
		return errors.New("-f FILE (the PavProvisioner) is required")
	}
	prov, doc, err := loadProvisioner(o.file)
	if err != nil {
		return err
	}
	// Each problem at its place in the file, as pav validate reports it.
	problems := func(err error) string { return doc.problemLines(o.file, err) }
	compiled, err := templating.Compile(prov)
	if err != nil {
		return fmt.Errorf("invalid PavProvisioner %s:\n%s", prov.Name, problems(err))
	}

	// Gather the objects.
	w := &renderWorld{}
	// Objects of the files given for --pvc, --sc, --pv and --node count too
	// (e.g. a usage example holding a StorageClass, a PVC and a pod).
	for _, f := range append(append([]string{}, o.objects...), nonEmpty(o.pvc, o.sc, o.pv, o.node)...) {
		if err := w.load(f); err != nil {
			return err
		}
	}
	var pvc *corev1.PersistentVolumeClaim
	var pv *corev1.PersistentVolume
	if o.pvc != "" {
		if pvc, err = one(o.pvc, "PersistentVolumeClaim", func(w *renderWorld) []*corev1.PersistentVolumeClaim { return w.pvcs }); err != nil {
			return err
		}
		defaultClaim(pvc)
	}
	if o.pv != "" {
		if pv, err = one(o.pv, "PersistentVolume", func(w *renderWorld) []*corev1.PersistentVolume { return w.pvs }); err != nil {
			return err
		}
	}
	class := func() (*storagev1.StorageClass, error) {
		if o.sc != "" {
			return one(o.sc, "StorageClass", func(w *renderWorld) []*storagev1.StorageClass { return w.classes })
		}
		name := ""
		if pvc.Spec.StorageClassName != nil {
			name = *pvc.Spec.StorageClassName
		}
		for _, c := range w.classes {
			if c.Name == name {
				return c, nil
			}
		}
		if name == "" {
			name = "default"
		}
		bind := storagev1.VolumeBindingImmediate
		if o.selectedNode != "" {
			bind = storagev1.VolumeBindingWaitForFirstConsumer
		}
		reclaim := corev1.PersistentVolumeReclaimDelete
		return &storagev1.StorageClass{
			TypeMeta:          metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
			ObjectMeta:        metav1.ObjectMeta{Name: name, UID: fakeUID("StorageClass/" + name)},
			Provisioner:       prov.Name,
			ReclaimPolicy:     &reclaim,
			VolumeBindingMode: &bind,
		}, nil
	}
	// get_pvc sees the claim and the PVCs of --objects.
	claims := append([]*corev1.PersistentVolumeClaim{}, w.pvcs...)
	if pvc != nil {
		claims = append([]*corev1.PersistentVolumeClaim{pvc}, claims...)
	}
	get := func(_ context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
		for _, c := range claims {
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

	var section interface{}
	// pod builds the pod PaV creates for the evaluated template.
	var pod func(tmpl *corev1.PodTemplateSpec) (*corev1.Pod, error)
	var podTemplate *corev1.PodTemplateSpec
	noPod := "" // why there is no pod despite a template
	switch phase {
	case protocol.PhaseValidation, protocol.PhaseCreation, protocol.PhaseDeletion, protocol.PhaseExpansion:
		if pvc == nil && !(phase == protocol.PhaseValidation && pv != nil) {
			return fmt.Errorf("phase %s needs --pvc (dynamic provisioning)%s", phase, map[bool]string{true: " or --pv (static provisioning)", false: ""}[phase == protocol.PhaseValidation])
		}
		if pvc == nil { // static validation
			cfg, err := compiled.StaticValidation(ctx, templating.StaticRequest{PV: pv}, get)
			if err != nil {
				return errors.New(problems(err))
			}
			if vr, err := templating.StaticVolumeRequest(pv); err != nil {
				fmt.Fprintf(stderr, "warning: PaV would reject this PersistentVolume: %v\n", err)
			} else if err := cfg.Check(vr); err != nil {
				fmt.Fprintf(stderr, "warning: PaV would reject this PersistentVolume: %v\n", err)
			}
			// PaV checks a static volume's modes and capacities when staging
			// it but runs no validation pod for it (the spec leaves that
			// unimplemented), so there is no pod to show.
			section, noPod = cfg.Evaluated, "PaV runs no validation pod for a statically provisioned volume"
			break
		}
		sc, err := class()
		if err != nil {
			return err
		}
		r := templating.DynamicRequest{PVC: pvc, Class: sc, SelectedNodeName: o.selectedNode}
		var extra map[string]string
		pod = func(tmpl *corev1.PodTemplateSpec) (*corev1.Pod, error) {
			return protocol.ClaimPod(tmpl, prov.Name, protocol.PodDirRoot(o.kubeletDir), phase, pvc, sc, extra)
		}
		switch phase {
		case protocol.PhaseValidation:
			cfg, err := compiled.DynamicValidation(ctx, r, get)
			if err != nil {
				return errors.New(problems(err))
			}
			if vr, err := templating.DynamicVolumeRequest(pvc); err != nil {
				fmt.Fprintf(stderr, "warning: PaV would reject this claim: %v\n", err)
			} else if err := cfg.Check(vr); err != nil {
				fmt.Fprintf(stderr, "warning: PaV would reject this claim: %v\n", err)
			}
			section, podTemplate = cfg.Evaluated, cfg.PodTemplate
		case protocol.PhaseCreation:
			cfg, err := compiled.Creation(ctx, r, get)
			if err != nil {
				return errors.New(problems(err))
			}
			section, podTemplate = cfg.Evaluated, cfg.PodTemplate
			// The controller records the evaluation on the creation pod.
			recorded, err := json.Marshal(cfg)
			if err != nil {
				return err
			}
			extra = map[string]string{protocol.AnnotationCreationConfig: string(recorded)}
		case protocol.PhaseDeletion:
			cfg, err := compiled.Deletion(ctx, r, get)
			if err != nil {
				return errors.New(problems(err))
			}
			section, podTemplate = cfg.Evaluated, cfg.PodTemplate
		case protocol.PhaseExpansion:
			if pv == nil {
				pv = w.volumeOf(pvc)
			}
			if pv == nil {
				if pv, err = defaultVolume(pvc, sc, prov.Name); err != nil {
					return err
				}
			}
			r.PV = pv
			cfg, ok, err := compiled.Expansion(ctx, r, get)
			if !ok {
				return fmt.Errorf("PavProvisioner %s has no spec.volumeExpansion: it cannot expand volumes", prov.Name)
			}
			if err != nil {
				return errors.New(problems(err))
			}
			section, podTemplate = cfg.Evaluated, cfg.PodTemplate
			want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
			claim := &corev1.ObjectReference{Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
			pod = func(tmpl *corev1.PodTemplateSpec) (*corev1.Pod, error) {
				return protocol.VolumePod(tmpl, prov.Name, protocol.PodDirRoot(o.kubeletDir), phase, pv.Name, claim,
					map[string]string{protocol.AnnotationExpansionTarget: want.String()}), nil
			}
		}
	case protocol.PhaseSnapshotCreation, protocol.PhaseSnapshotDeletion:
		r, err := snapshotRequest(w, phase, pvc, pv, prov.Name, o.selectedNode, class)
		if err != nil {
			return err
		}
		var cfg *templating.PodConfig
		if phase == protocol.PhaseSnapshotCreation {
			var ok bool
			if cfg, ok, err = compiled.SnapshotCreation(ctx, r, get); err == nil && !ok {
				return fmt.Errorf("PavProvisioner %s has no spec.snapshotCreation", prov.Name)
			}
		} else {
			cfg, err = compiled.SnapshotDeletion(ctx, r, get)
		}
		if err != nil {
			return errors.New(problems(err))
		}
		section, podTemplate = cfg.Evaluated, cfg.PodTemplate
		pod = func(tmpl *corev1.PodTemplateSpec) (*corev1.Pod, error) {
			return protocol.SnapshotPod(tmpl, prov.Name, protocol.PodDirRoot(o.kubeletDir), phase, r.Content.Name, string(r.Content.UID)), nil
		}
	default: // staging, unstaging
		if pvc == nil && pv == nil {
			return fmt.Errorf("phase %s needs --pvc or --pv", phase)
		}
		if pv == nil {
			pv = w.volumeOf(pvc)
		}
		if pv == nil {
			sc, err := class()
			if err != nil {
				return err
			}
			if pv, err = defaultVolume(pvc, sc, prov.Name); err != nil {
				return err
			}
		}
		if pvc == nil {
			pvc = defaultClaimOf(pv)
			claims = append(claims, pvc)
		}
		node, err := func() (*corev1.Node, error) {
			if o.node != "" {
				return one(o.node, "Node", func(w *renderWorld) []*corev1.Node { return w.nodes })
			}
			if len(w.nodes) == 1 {
				return w.nodes[0], nil
			}
			return &corev1.Node{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
				ObjectMeta: metav1.ObjectMeta{Name: "node", UID: fakeUID("Node/node"), Labels: map[string]string{corev1.LabelHostname: "node"}},
			}, nil
		}()
		if err != nil {
			return err
		}
		r := templating.StagingRequest{PVC: pvc, PV: pv, Node: node, ReadOnly: o.readOnly}
		if pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode == corev1.PersistentVolumeFilesystem {
			// What kubelet passes when it mounts the volume.
			r.MountOptions = pv.Spec.MountOptions
			if pv.Spec.CSI != nil {
				r.FSType = pv.Spec.CSI.FSType
			}
		}
		var cfg *templating.PodConfig
		if phase == protocol.PhaseStaging {
			cfg, err = compiled.Staging(ctx, r, get)
		} else {
			cfg, err = compiled.Unstaging(ctx, r, get)
		}
		if err != nil {
			return errors.New(problems(err))
		}
		section, podTemplate = cfg.Evaluated, cfg.PodTemplate
		targetPath := o.targetPath
		if targetPath == "" {
			targetPath = o.kubeletDir + "/pods/" + string(fakeUID("Pod/client")) + "/volumes/kubernetes.io~csi/" + pv.Name + "/mount"
		}
		handle := ""
		if pv.Spec.CSI != nil {
			handle = pv.Spec.CSI.VolumeHandle
		}
		id := protocol.StagingID(handle, targetPath)
		pod = func(tmpl *corev1.PodTemplateSpec) (*corev1.Pod, error) {
			if phase == protocol.PhaseStaging {
				return protocol.StagingPod(tmpl, prov.Name, templating.StagingRevision(prov), protocol.PodDirRoot(o.kubeletDir), node.Name, id, pv, pvc, protocol.Publication{
					TargetPath: targetPath, ReadOnly: o.readOnly, MountOptions: r.MountOptions, FSType: r.FSType})
			}
			return protocol.UnstagingPod(tmpl, prov.Name, protocol.PodDirRoot(o.kubeletDir), node.Name, id, pv, pvc, targetPath, o.readOnly), nil
		}
	}

	if !o.pods {
		out, err := marshal(section)
		if err != nil {
			return err
		}
		_, err = stdout.Write(out)
		return err
	}
	if noPod != "" {
		fmt.Fprintf(stderr, "no pod: %s\n", noPod)
		return nil
	}
	if podTemplate == nil {
		fmt.Fprintf(stderr, "no pod: the %s phase of PavProvisioner %s has no pod template\n", phase, prov.Name)
		return nil
	}
	built, err := pod(podTemplate)
	if err != nil {
		return err
	}
	out, err := marshal(built)
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// renderPhases are the phases render evaluates: every section of a PavProvisioner.
var renderPhases = []protocol.Phase{protocol.PhaseValidation, protocol.PhaseCreation, protocol.PhaseDeletion,
	protocol.PhaseExpansion, protocol.PhaseStaging, protocol.PhaseUnstaging, protocol.PhaseSnapshotCreation, protocol.PhaseSnapshotDeletion}

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
func snapshotRequest(w *renderWorld, phase protocol.Phase, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, driver, selectedNode string, class func() (*storagev1.StorageClass, error)) (templating.SnapshotRequest, error) {
	var r templating.SnapshotRequest
	switch {
	case len(w.contents) == 1:
		r.Content = w.contents[0]
	case len(w.contents) > 1:
		return r, fmt.Errorf("phase %s: want at most one VolumeSnapshotContent in --objects, found %d", phase, len(w.contents))
	case phase == protocol.PhaseSnapshotDeletion:
		return r, fmt.Errorf("phase %s needs a VolumeSnapshotContent (with its snapshot handle) in --objects", phase)
	case pv == nil && pvc == nil:
		return r, fmt.Errorf("phase %s needs --pvc or --pv (the volume), or a VolumeSnapshotContent in --objects", phase)
	}
	if pv == nil && pvc != nil {
		for _, v := range w.pvs {
			if pvc.Spec.VolumeName != "" && v.Name == pvc.Spec.VolumeName {
				pv = v
			}
		}
		if pv == nil {
			sc, err := class()
			if err != nil {
				return r, err
			}
			if pv, err = defaultVolume(pvc, sc, driver); err != nil {
				return r, err
			}
			if selectedNode != "" {
				// as PaV records it on the PVs it creates
				metav1.SetMetaDataAnnotation(&pv.ObjectMeta, protocol.AnnotationSelectedNode, selectedNode)
			}
		}
	}
	if r.Content == nil {
		handle := pv.Spec.CSI.VolumeHandle
		r.Content = &snapshotv1.VolumeSnapshotContent{
			TypeMeta:   metav1.TypeMeta{APIVersion: snapshotv1.SchemeGroupVersion.String(), Kind: "VolumeSnapshotContent"},
			ObjectMeta: metav1.ObjectMeta{Name: "snapcontent-" + string(fakeUID("VolumeSnapshot/snapshot")), UID: fakeUID("VolumeSnapshotContent/snapshot")},
			Spec: snapshotv1.VolumeSnapshotContentSpec{
				Driver: driver, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
				Source:            snapshotv1.VolumeSnapshotContentSource{VolumeHandle: &handle},
				VolumeSnapshotRef: corev1.ObjectReference{Namespace: metav1.NamespaceDefault, Name: "snapshot", UID: fakeUID("VolumeSnapshot/snapshot")},
			},
		}
	}
	ref := r.Content.Spec.VolumeSnapshotRef
	for _, s := range w.snapshots {
		if s.Name == ref.Name && (s.Namespace == ref.Namespace || s.Namespace == "" && ref.Namespace == metav1.NamespaceDefault) {
			r.Snapshot = s
		}
	}
	if n := r.Content.Spec.VolumeSnapshotClassName; n != nil {
		for _, c := range w.snapshotClasses {
			if c.Name == *n {
				r.ClassParameters = c.Parameters
			}
		}
	}
	if pv == nil && r.Content.Spec.Source.VolumeHandle != nil {
		for _, v := range w.pvs {
			if v.Spec.CSI != nil && v.Spec.CSI.VolumeHandle == *r.Content.Spec.Source.VolumeHandle {
				pv = v
			}
		}
	}
	if phase == protocol.PhaseSnapshotCreation {
		r.PV, r.PVC = pv, pvc
		if r.PVC == nil && pv != nil {
			r.PVC = defaultClaimOf(pv)
		}
	}
	return r, nil
}
