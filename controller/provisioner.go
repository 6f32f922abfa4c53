package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	corev1 "k8s.io/api/core/v1"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// Condition reasons and Event reasons on PavProvisioners.
const (
	reasonValid          = "Valid"
	reasonInvalid        = "InvalidSpec"
	reasonReady          = "Ready"
	reasonCSIDriverError = "CSIDriverConflict"
	reasonTerminating    = "Terminating"
)

// desiredCSIDriver is the CSIDriver object kubelet needs for a provisioner:
// no attach step, pod info on mount (the node plugin needs the client pod),
// persistent volumes only, the provisioner's fsGroup policy, and
// storageCapacity when it tracks capacity (the scheduler then reads its
// CSIStorageCapacity objects).
func desiredCSIDriver(p *v1alpha1.PavProvisioner) *storagev1.CSIDriver {
	f, t := false, true
	policy := p.FSGroupPolicy()
	capacity := p.Spec.StorageCapacity != nil
	modes := []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	if p.Spec.InlineVolumes {
		modes = append(modes, storagev1.VolumeLifecycleEphemeral)
	}
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{
			Name:   p.Name,
			Labels: map[string]string{protocol.LabelProvisioner: p.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.SchemeGroupVersion.String(),
				Kind:       v1alpha1.Kind,
				Name:       p.Name,
				UID:        p.UID,
			}},
		},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:       &f,
			PodInfoOnMount:       &t,
			RequiresRepublish:    &f,
			StorageCapacity:      &capacity,
			FSGroupPolicy:        &policy,
			VolumeLifecycleModes: modes,
		},
	}
}

func csiDriverMatches(have, want *storagev1.CSIDriver) bool {
	return equality.Semantic.DeepEqual(have.Spec.AttachRequired, want.Spec.AttachRequired) &&
		equality.Semantic.DeepEqual(have.Spec.PodInfoOnMount, want.Spec.PodInfoOnMount) &&
		equality.Semantic.DeepEqual(have.Spec.VolumeLifecycleModes, want.Spec.VolumeLifecycleModes)
}

func ownedBy(m metav1.Object, p *v1alpha1.PavProvisioner) bool {
	for _, o := range m.GetOwnerReferences() {
		if o.Kind == v1alpha1.Kind && o.Name == p.Name && o.UID == p.UID {
			return true
		}
	}
	return false
}

func ownedByAnyProvisioner(m metav1.Object) bool {
	for _, o := range m.GetOwnerReferences() {
		if o.Kind == v1alpha1.Kind && strings.HasPrefix(o.APIVersion, v1alpha1.GroupName+"/") {
			return true
		}
	}
	return false
}

// classNames are the names of the StorageClasses of provisioner name, sorted.
func (c *Controller) classNames(name string) []string {
	var names []string
	classes, _ := c.classes.List(everything)
	for _, sc := range classes {
		if sc.Provisioner == name {
			names = append(names, sc.Name)
		}
	}
	sort.Strings(names)
	return names
}

func (c *Controller) syncProvisioner(ctx context.Context, name string) error {
	p := c.provisioner(name)
	if p == nil {
		c.metrics.provisionerGone(name)
		// Gone: its CSIDriver must go too (garbage collection would also do it).
		if d, err := c.csiDrivers.Get(name); err == nil && ownedByAnyProvisioner(d) {
			return c.deleteCSIDriver(ctx, d)
		}
		return nil
	}
	c.metrics.provisionerSeen(name, c.classNames(name))
	if p.DeletionTimestamp != nil {
		return c.provisionerTerminating(ctx, p)
	}
	if !protocol.HasFinalizer(p, protocol.FinalizerProvisioner) {
		updated, err := protocol.AddFinalizer(ctx, c.pav.PavV1alpha1().PavProvisioners().Patch, p, protocol.FinalizerProvisioner)
		if err != nil {
			return err
		}
		p = updated
	}

	csiProblem, err := c.ensureCSIDriver(ctx, p)
	if err != nil {
		return err
	}
	specErrs := c.engine.Validate(p)
	status, event := decideProvisionerStatus(p, specErrs, csiProblem)
	status.Stagings, status.OutdatedStagings = countStagings(c.podsBy(indexProvisioner, protocol.LabelValue(p.Name)), templating.StagingRevision(p))
	if event != "" {
		c.recorder.Event(p, corev1.EventTypeWarning, reasonInvalid, event)
	}
	if err := c.updateProvisionerStatus(ctx, p, status); err != nil {
		return err
	}
	return c.syncCapacity(ctx, p, p.Spec.StorageCapacity != nil && len(specErrs) == 0)
}

// decideProvisionerStatus is a live provisioner's status given the problems
// found in its spec and with its CSIDriver (csiProblem, "" if none), and the
// message of the Event to emit when it newly became invalid ("" if none).
func decideProvisionerStatus(p *v1alpha1.PavProvisioner, specErrs field.ErrorList, csiProblem string) (*v1alpha1.PavProvisionerStatus, string) {
	status := &p.DeepCopy().Status
	status.ObservedGeneration = p.Generation
	valid := metav1.Condition{Type: v1alpha1.ConditionValid, Status: metav1.ConditionTrue, Reason: reasonValid,
		Message: "the spec is valid", ObservedGeneration: p.Generation}
	if len(specErrs) > 0 {
		msgs := make([]string, 0, len(specErrs))
		for _, e := range specErrs {
			msgs = append(msgs, e.Error())
		}
		valid.Status, valid.Reason = metav1.ConditionFalse, reasonInvalid
		valid.Message = truncate(strings.Join(msgs, "; "), 4000)
	}
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: reasonReady,
		Message: "the provisioner is ready", ObservedGeneration: p.Generation}
	switch {
	case csiProblem != "":
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reasonCSIDriverError, csiProblem
	case valid.Status != metav1.ConditionTrue:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reasonInvalid, "the spec is invalid (see condition Valid)"
	}
	event := ""
	old := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionValid)
	if valid.Status == metav1.ConditionFalse && (old == nil || old.Status != valid.Status || old.Message != valid.Message) {
		event = valid.Message
	}
	meta.SetStatusCondition(&status.Conditions, valid)
	meta.SetStatusCondition(&status.Conditions, ready)
	return status, event
}

// countStagings counts the staging pods among pods that serve volumes (not
// being deleted), and those made from another revision than current.
func countStagings(pods []*corev1.Pod, current string) (stagings, outdated int32) {
	for _, pod := range pods {
		if pod.Labels[protocol.LabelPhase] != string(protocol.PhaseStaging) || pod.DeletionTimestamp != nil {
			continue
		}
		stagings++
		if pod.Annotations[protocol.AnnotationStagingRevision] != current {
			outdated++
		}
	}
	return stagings, outdated
}

func (c *Controller) updateProvisionerStatus(ctx context.Context, p *v1alpha1.PavProvisioner, status *v1alpha1.PavProvisionerStatus) error {
	if equality.Semantic.DeepEqual(&p.Status, status) {
		return nil
	}
	cp := p.DeepCopy()
	cp.Status = *status
	if _, err := c.pav.PavV1alpha1().PavProvisioners().UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating status of PavProvisioner %s: %w", p.Name, err)
	}
	return nil
}

// ensureCSIDriver creates or repairs the provisioner's CSIDriver. A non-empty
// message means a problem the user must fix (a foreign CSIDriver of that name).
func (c *Controller) ensureCSIDriver(ctx context.Context, p *v1alpha1.PavProvisioner) (string, error) {
	want := desiredCSIDriver(p)
	have, err := c.csiDrivers.Get(p.Name)
	if apierrors.IsNotFound(err) {
		_, err := c.kube.StorageV1().CSIDrivers().Create(ctx, want, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating CSIDriver %s: %w", p.Name, err)
		}
		klog.InfoS("Created CSIDriver", "name", p.Name)
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !ownedByAnyProvisioner(have) {
		return fmt.Sprintf("a CSIDriver named %q exists and is not managed by PaV; delete it or rename the PavProvisioner", p.Name), nil
	}
	if !ownedBy(have, p) || !csiDriverMatches(have, want) {
		// Left by an earlier PavProvisioner of the same name, or changed:
		// most CSIDriver fields are immutable, so replace it.
		return "", c.deleteCSIDriver(ctx, have)
	}
	if !equality.Semantic.DeepEqual(have.Spec.FSGroupPolicy, want.Spec.FSGroupPolicy) ||
		!equality.Semantic.DeepEqual(have.Spec.StorageCapacity, want.Spec.StorageCapacity) {
		// Both mutable (fsGroupPolicy since Kubernetes 1.29), so changed in
		// place: while a CSIDriver is missing, a client pod scheduled
		// meanwhile would wait for an attach that never comes.
		updated := have.DeepCopy()
		updated.Spec.FSGroupPolicy, updated.Spec.StorageCapacity = want.Spec.FSGroupPolicy, want.Spec.StorageCapacity
		if _, err := c.kube.StorageV1().CSIDrivers().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return "", fmt.Errorf("updating the fsGroupPolicy and storageCapacity of CSIDriver %s: %w", p.Name, err)
		}
		klog.InfoS("Updated CSIDriver", "name", p.Name, "fsGroupPolicy", *want.Spec.FSGroupPolicy, "storageCapacity", *want.Spec.StorageCapacity)
	}
	return "", nil
}

func (c *Controller) deleteCSIDriver(ctx context.Context, d *storagev1.CSIDriver) error {
	err := c.kube.StorageV1().CSIDrivers().Delete(ctx, d.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &d.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting CSIDriver %s: %w", d.Name, err)
	}
	return nil
}

// provisionerTerminating holds a deleted PavProvisioner until PaV is done
// with it: until no volume PaV must still delete, no VolumeSnapshotContent
// or VolumeGroupSnapshotContent of its with deletionPolicy Delete (PaV
// deletes its snapshot when it goes) and none of its pods (a staging pod means a staged volume) is left.
// Retained and statically provisioned PVs, which PaV never deletes, and
// Retain contents do not hold it (as in the original PaV: uninstalling must
// not wait for them). Then it removes what it owns and lets the provisioner
// go.
func (c *Controller) provisionerTerminating(ctx context.Context, p *v1alpha1.PavProvisioner) error {
	if !protocol.HasFinalizer(p, protocol.FinalizerProvisioner) {
		return nil
	}
	// Capacity pods measure no volume: they go first, with the objects.
	if err := c.syncCapacity(ctx, p, false); err != nil {
		return err
	}
	var vols []*corev1.PersistentVolume
	objs, _ := c.pvIndexer.ByIndex(indexCSIDriver, p.Name)
	for _, o := range objs {
		if pv, ok := o.(*corev1.PersistentVolume); ok && pavMustDelete(pv) {
			vols = append(vols, pv)
		}
	}
	contents, err := c.contentsToDelete(ctx, p.Name)
	if err != nil {
		return err
	}
	groups, err := c.groupContentsToDelete(ctx, p.Name)
	if err != nil {
		return err
	}
	pods := c.podsBy(indexProvisioner, protocol.LabelValue(p.Name))
	if len(vols) > 0 || contents > 0 || groups > 0 || len(pods) > 0 {
		status := &p.DeepCopy().Status
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reasonTerminating,
			Message: fmt.Sprintf("being deleted; waiting for %d PersistentVolume(s), %d VolumeSnapshotContent(s), %d VolumeGroupSnapshotContent(s) and %d pod(s) of this provisioner to go",
				len(vols), contents, groups, len(pods)),
			ObservedGeneration: p.Generation,
		})
		return c.updateProvisionerStatus(ctx, p, status)
	}
	if d, err := c.csiDrivers.Get(p.Name); err == nil && ownedBy(d, p) {
		if err := c.deleteCSIDriver(ctx, d); err != nil {
			return err
		}
	}
	if _, err := protocol.RemoveFinalizer(ctx, c.pav.PavV1alpha1().PavProvisioners().Patch, p, protocol.FinalizerProvisioner); err != nil {
		return err
	}
	klog.InfoS("PavProvisioner released", "name", p.Name)
	return nil
}

// contentsToDelete counts the VolumeSnapshotContents of driver whose
// snapshot PaV deletes with them (deletionPolicy Delete).
func (c *Controller) contentsToDelete(ctx context.Context, driver string) (int, error) {
	if c.contentInformer == nil {
		return 0, nil
	}
	return countDeletePolicy(ctx, driver, c.contentInformer.HasSynced(),
		func() ([]*snapshotv1.VolumeSnapshotContent, error) { return c.contents.List(everything) },
		func(ctx context.Context) ([]snapshotv1.VolumeSnapshotContent, error) {
			list, err := c.snapshots.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("listing VolumeSnapshotContents: %w", err)
			}
			return list.Items, nil
		},
		func(c *snapshotv1.VolumeSnapshotContent) (string, snapshotv1.DeletionPolicy) {
			return c.Spec.Driver, c.Spec.DeletionPolicy
		})
}

// groupContentsToDelete is contentsToDelete for VolumeGroupSnapshotContents.
func (c *Controller) groupContentsToDelete(ctx context.Context, driver string) (int, error) {
	if c.groupContentInformer == nil {
		return 0, nil
	}
	return countDeletePolicy(ctx, driver, c.groupContentInformer.HasSynced(),
		func() ([]*groupsnapshotv1.VolumeGroupSnapshotContent, error) { return c.groupContents.List(everything) },
		func(ctx context.Context) ([]groupsnapshotv1.VolumeGroupSnapshotContent, error) {
			list, err := c.snapshots.GroupsnapshotV1().VolumeGroupSnapshotContents().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("listing VolumeGroupSnapshotContents: %w", err)
			}
			return list.Items, nil
		},
		func(c *groupsnapshotv1.VolumeGroupSnapshotContent) (string, snapshotv1.DeletionPolicy) {
			return c.Spec.Driver, c.Spec.DeletionPolicy
		})
}

// countDeletePolicy counts the contents of driver with deletionPolicy
// Delete: from the cache once it synced; before that (a new leader) from
// the API, where a cluster without the CRD has none.
func countDeletePolicy[T any](ctx context.Context, driver string, synced bool,
	cached func() ([]*T, error), listed func(context.Context) ([]T, error),
	spec func(*T) (string, snapshotv1.DeletionPolicy)) (int, error) {
	var contents []*T
	if synced {
		all, err := cached()
		if err != nil {
			return 0, err
		}
		contents = all
	} else {
		items, err := listed(ctx)
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		for i := range items {
			contents = append(contents, &items[i])
		}
	}
	n := 0
	for _, content := range contents {
		if d, policy := spec(content); d == driver && policy == snapshotv1.VolumeSnapshotContentDelete {
			n++
		}
	}
	return n, nil
}

// pavMustDelete: PaV provisioned the volume (its finalizer is on the PV) and
// will run the deletion phase for it once it is released.
func pavMustDelete(pv *corev1.PersistentVolume) bool {
	return protocol.HasFinalizer(pv, protocol.FinalizerVolume) && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
