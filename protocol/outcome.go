package protocol

import (
	"errors"
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// What a creation makes, for a claim (the controller) and for an inline
// volume (the node plugin) alike: the spec's order is the evaluated
// volumeCreation field first, then the creation pod's /pav file.

// CreationResults are the /pav files a finished creation pod left, as the
// node plugin collected them onto it (nil: not written).
type CreationResults struct {
	Handle, Capacity, Attributes *string
	// Error is /pav/error: the pod's, or the node plugin's note on a file it
	// refused to read.
	Error string
}

// CreationResultsOf reads the results collected onto a creation pod.
func CreationResultsOf(pod *corev1.Pod) CreationResults {
	ann := pod.Annotations
	opt := func(k string) *string {
		if v, ok := ann[k]; ok {
			return &v
		}
		return nil
	}
	return CreationResults{
		Handle:     opt(AnnotationResultHandle),
		Capacity:   opt(AnnotationResultCapacity),
		Attributes: opt(AnnotationResultVolumeAttributes),
		Error:      ann[AnnotationResultError],
	}
}

// ChooseHandle: volumeCreation.handle, else the creation pod's /pav/handle,
// else defaultHandle.
func ChooseHandle(field *string, file *string, defaultHandle string) (string, error) {
	if field != nil {
		if err := CheckHandle(*field); err != nil {
			return "", fmt.Errorf("spec.volumeCreation.handle: %w", err)
		}
		return *field, nil
	}
	if file != nil {
		h := strings.TrimSpace(*file)
		if err := CheckHandle(h); err != nil {
			return "", fmt.Errorf("the creation pod's /pav/%s: %w", FileHandle, err)
		}
		return h, nil
	}
	return defaultHandle, nil
}

// ChooseCapacity: volumeCreation.capacity, else the creation pod's
// /pav/capacity; one of them must be there. The result passes
// CheckCapacity.
func ChooseCapacity(field *resource.Quantity, file *string, hadPod bool) (resource.Quantity, error) {
	var q resource.Quantity
	switch {
	case field != nil:
		q = field.DeepCopy()
	case file != nil:
		s := strings.TrimSpace(*file)
		var err error
		if q, err = resource.ParseQuantity(s); err != nil {
			return resource.Quantity{}, fmt.Errorf("the creation pod wrote %q to /pav/%s, which is not a capacity (e.g. 1073741824 or 1Gi): %v", s, FileCapacity, err)
		}
	case hadPod:
		return resource.Quantity{}, fmt.Errorf("the volume's capacity is unknown: spec.volumeCreation.capacity is not set and the creation pod did not write /pav/%s", FileCapacity)
	default:
		return resource.Quantity{}, fmt.Errorf("the volume's capacity is unknown: spec.volumeCreation.capacity is not set and there is no creation pod to write /pav/%s", FileCapacity)
	}
	return q, CheckCapacity(q)
}

// CheckCapacity: a volume's capacity is positive and at most an int64 of
// bytes (what the templates' capacity and Kubernetes' quantities hold).
func CheckCapacity(capacity resource.Quantity) error {
	if capacity.Sign() <= 0 {
		return fmt.Errorf("the volume's capacity %s is not positive", capacity.String())
	}
	if capacity.Cmp(*resource.NewQuantity(math.MaxInt64, resource.BinarySI)) > 0 {
		return fmt.Errorf("the volume's capacity %s is too large: at most %d bytes", capacity.String(), int64(math.MaxInt64))
	}
	return nil
}

// ClaimVolume is the handle and capacity of what a claim's creation made
// (ChooseHandle, ChooseCapacity), or why the controller refuses it
// (CheckClaimCapacity): from the evaluated volumeCreation's fields and the
// creation pod's /pav files (nil: not written, or no pod: hadPod false).
func ClaimVolume(handleField *string, capacityField *resource.Quantity, handleFile, capacityFile *string, hadPod bool, pvc *corev1.PersistentVolumeClaim) (string, resource.Quantity, error) {
	handle, err := ChooseHandle(handleField, handleFile, VolumeName(pvc))
	if err != nil {
		return "", resource.Quantity{}, err
	}
	capacity, err := ChooseCapacity(capacityField, capacityFile, hadPod)
	if err != nil {
		return "", resource.Quantity{}, err
	}
	if err := CheckClaimCapacity(capacity, pvc); err != nil {
		return "", resource.Quantity{}, err
	}
	return handle, capacity, nil
}

// CheckClaimCapacity is what a claim's volume may have: CheckCapacity,
// never smaller than the claim requests, and not above its limit when it
// has one.
func CheckClaimCapacity(capacity resource.Quantity, pvc *corev1.PersistentVolumeClaim) error {
	if err := CheckCapacity(capacity); err != nil {
		return err
	}
	if req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok && capacity.Cmp(req) < 0 {
		return fmt.Errorf("the volume's capacity %s is less than the %s the claim requests", capacity.String(), req.String())
	}
	if lim, ok := pvc.Spec.Resources.Limits[corev1.ResourceStorage]; ok && capacity.Cmp(lim) > 0 {
		return fmt.Errorf("the volume's capacity %s exceeds the claim's limit of %s", capacity.String(), lim.String())
	}
	return nil
}

// ChooseAttributes reads the creation pod's /pav/volume-attributes, if it
// wrote one (nil if not), with ParseVolumeAttributes' rules; resultError,
// the pod's /pav/error, says why the node plugin may have refused to read
// the file.
func ChooseAttributes(file *string, resultError string, class *storagev1.StorageClass) (map[string]string, error) {
	if file == nil {
		return nil, nil
	}
	attrs, err := ParseVolumeAttributes(*file, class)
	if err != nil {
		msg := fmt.Sprintf("its /pav/%s is refused: %v", FileVolumeAttributes, err)
		if e := strings.TrimSpace(resultError); e != "" {
			msg += " (its /pav/" + FileError + ": " + e + ")"
		}
		return nil, errors.New(msg)
	}
	return attrs, nil
}
