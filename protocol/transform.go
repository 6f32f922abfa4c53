package protocol

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cache transforms (cache.SharedInformer.SetTransform): they run on each
// object as it arrives from the API server, before the informer caches it
// or hands it to an event handler, and change it in place (client-go
// decoded it for this informer alone).

// StripManagedFields drops metadata.managedFields, which PaV never reads:
// server-side apply bookkeeping that is often the largest part of an object.
// Templates never see it either (their objects go through snapshots that
// drop it too), and an Update of a cached object without it leaves the
// server's managedFields as they are (an absent field means "unchanged").
func StripManagedFields(obj interface{}) (interface{}, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// StripNonCSIVolume is StripManagedFields for PVs that also reduces a PV of
// no CSI driver, which can never be one of PaV's, to its name, UID and
// resourceVersion: the node plugin looks PVs up only by CSI driver and
// volume handle, and keeps in full only those that have one.
func StripNonCSIVolume(obj interface{}) (interface{}, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return StripManagedFields(obj)
	}
	if pv.Spec.CSI == nil {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv.Name, UID: pv.UID, ResourceVersion: pv.ResourceVersion}}, nil
	}
	pv.ManagedFields = nil
	return pv, nil
}
