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

// StripVolumeToLookup reduces a PV to what the node plugin finds PVs by and
// reads from its cache: name, UID, resourceVersion and, for a CSI volume, its
// driver and volume handle, its claim and its capacity. The node plugin
// caches every PV of the cluster (the API has no field selector on the CSI
// driver), so what it keeps of each is what one node plugin's memory grows
// with; it gets a whole PV from the API server when it stages it.
func StripVolumeToLookup(obj interface{}) (interface{}, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return StripManagedFields(obj)
	}
	out := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv.Name, UID: pv.UID, ResourceVersion: pv.ResourceVersion}}
	if csi := pv.Spec.CSI; csi != nil {
		out.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: csi.Driver, VolumeHandle: csi.VolumeHandle}
		out.Spec.Capacity = pv.Spec.Capacity
		if ref := pv.Spec.ClaimRef; ref != nil {
			out.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}
		}
	}
	return out, nil
}
