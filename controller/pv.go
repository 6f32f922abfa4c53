package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// handleKey is a PV's key in indexCSIHandle. Driver names are PavProvisioner
// names, DNS labels without '/', so the first '/' ends the driver.
func handleKey(driver, handle string) string { return driver + "/" + handle }

// handleGuard keeps a provisioner's handles unique. The API does not (PVs
// are named pvc-<claim uid>, whatever their handle), and the PV cache lags
// behind the PVs just created, so two creations finishing at once would
// both find their handle free. Only the leader creates PVs; within it, the
// check and the creation are one step per handle (a stripe of locks), and
// created remembers the PVs this process created until the cache shows
// them (onVolume). A new leader starts from a synced cache once the old one
// stopped renewing its lease, which leaves only a creation request the old
// leader had in flight for longer than that gap.
type handleGuard struct {
	stripes [64]sync.Mutex
	mu      sync.Mutex
	created map[string]string // handleKey → the PV this process created with it
}

// lock serializes the check and creation of PVs with the handle key.
func (g *handleGuard) lock(key string) (unlock func()) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	m := &g.stripes[h.Sum32()%uint32(len(g.stripes))]
	m.Lock()
	return m.Unlock
}

func (g *handleGuard) remember(key, pv string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.created == nil {
		g.created = map[string]string{}
	}
	g.created[key] = pv
}

func (g *handleGuard) recall(key string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.created[key]
}

// forget drops the record of pv, once the cache shows it or it is gone.
func (g *handleGuard) forget(key, pv string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.created[key] == pv {
		delete(g.created, key)
	}
}

// handleOwner is the PV other than name that has driver's handle (nil if
// none): one the cache shows, or one this process created that it does not
// show yet, confirmed by the API server (the cache may still show a PV
// that is gone). A PV being deleted still owns its handle: its deletion pod
// has yet to run.
func (c *Controller) handleOwner(ctx context.Context, driver, handle, name string) (*corev1.PersistentVolume, error) {
	key := handleKey(driver, handle)
	var candidates []string
	objs, err := c.pvIndexer.ByIndex(indexCSIHandle, key)
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		if pv := obj.(*corev1.PersistentVolume); pv.Name != name {
			candidates = append(candidates, pv.Name)
		}
	}
	if n := c.handles.recall(key); n != "" && n != name && !slices.Contains(candidates, n) {
		candidates = append(candidates, n)
	}
	for _, n := range candidates {
		pv, err := c.kube.CoreV1().PersistentVolumes().Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c.handles.forget(key, n)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading PersistentVolume %s, which had handle %q: %w", n, handle, err)
		}
		if pv.Spec.CSI != nil && handleKey(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle) == key {
			return pv, nil
		}
		c.handles.forget(key, n)
	}
	return nil, nil
}

// handleInUseMessage says that handle is already owner's.
func handleInUseMessage(handle string, owner *corev1.PersistentVolume) string {
	msg := fmt.Sprintf("volume handle %q is already the handle of PersistentVolume %s", handle, owner.Name)
	if ref := owner.Spec.ClaimRef; ref != nil {
		msg += fmt.Sprintf(" (claim %s/%s)", ref.Namespace, ref.Name)
	}
	return msg + " of the same PavProvisioner; handles are unique per PavProvisioner, so no PersistentVolume is created with it"
}

// restoreClass is a class read from a snapshot with the parameters its
// snapshot left out (protocol.RestoreReservedParameters), while it exists.
func (c *Controller) restoreClass(snap *storagev1.StorageClass) *storagev1.StorageClass {
	live, _ := c.classes.Get(snap.Name)
	return protocol.RestoreReservedParameters(snap, live)
}

// requestFromVolume rebuilds a deletion request from what the PV stored
// (the class without its reserved parameters: see Controller.restoreClass).
func requestFromVolume(pv *corev1.PersistentVolume) (templating.DynamicRequest, error) {
	var req templating.DynamicRequest
	pvcJSON, ok := pv.Annotations[protocol.AnnotationClaimSnapshot]
	if !ok {
		return req, fmt.Errorf("PersistentVolume %s has no %s annotation", pv.Name, protocol.AnnotationClaimSnapshot)
	}
	scJSON, ok := pv.Annotations[protocol.AnnotationClassSnapshot]
	if !ok {
		return req, fmt.Errorf("PersistentVolume %s has no %s annotation", pv.Name, protocol.AnnotationClassSnapshot)
	}
	req.PVC = &corev1.PersistentVolumeClaim{}
	if err := json.Unmarshal([]byte(pvcJSON), req.PVC); err != nil {
		return req, fmt.Errorf("decoding annotation %s of PersistentVolume %s: %w", protocol.AnnotationClaimSnapshot, pv.Name, err)
	}
	req.Class = &storagev1.StorageClass{}
	if err := json.Unmarshal([]byte(scJSON), req.Class); err != nil {
		return req, fmt.Errorf("decoding annotation %s of PersistentVolume %s: %w", protocol.AnnotationClassSnapshot, pv.Name, err)
	}
	req.SelectedNodeName = pv.Annotations[protocol.AnnotationSelectedNode]
	return req, nil
}
