package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Hand-written deep copies: the types are few and small, and a generator would
// add a build step for no gain.

func (in *PavProvisioner) DeepCopyInto(out *PavProvisioner) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

func (in *PavProvisioner) DeepCopy() *PavProvisioner {
	if in == nil {
		return nil
	}
	out := new(PavProvisioner)
	in.DeepCopyInto(out)
	return out
}

func (in *PavProvisioner) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *PavProvisionerSpec) DeepCopyInto(out *PavProvisionerSpec) {
	*out = *in
	if in.ProvisioningModes != nil {
		out.ProvisioningModes = append([]ProvisioningMode(nil), in.ProvisioningModes...)
	}
	if in.VolumeValidation != nil {
		v := *in.VolumeValidation
		v.Section = in.VolumeValidation.Section.DeepCopy()
		v.VolumeModes = in.VolumeValidation.VolumeModes.DeepCopy()
		v.AccessModes = in.VolumeValidation.AccessModes.DeepCopy()
		v.MinCapacity = in.VolumeValidation.MinCapacity.DeepCopy()
		v.MaxCapacity = in.VolumeValidation.MaxCapacity.DeepCopy()
		v.PodTemplate = in.VolumeValidation.PodTemplate.DeepCopy()
		out.VolumeValidation = &v
	}
	if in.VolumeCreation != nil {
		v := *in.VolumeCreation
		v.Section = in.VolumeCreation.Section.DeepCopy()
		v.Handle = in.VolumeCreation.Handle.DeepCopy()
		v.Capacity = in.VolumeCreation.Capacity.DeepCopy()
		v.PodTemplate = in.VolumeCreation.PodTemplate.DeepCopy()
		v.NodeAffinity = in.VolumeCreation.NodeAffinity.DeepCopy()
		out.VolumeCreation = &v
	}
	if in.VolumeDeletion != nil {
		out.VolumeDeletion = &VolumeDeletion{Section: in.VolumeDeletion.Section.DeepCopy(), PodTemplate: in.VolumeDeletion.PodTemplate.DeepCopy()}
	}
	if in.VolumeStaging != nil {
		out.VolumeStaging = &VolumeStaging{Section: in.VolumeStaging.Section.DeepCopy(), PodTemplate: in.VolumeStaging.PodTemplate.DeepCopy()}
	}
	if in.VolumeExpansion != nil {
		out.VolumeExpansion = &VolumeExpansion{Section: in.VolumeExpansion.Section.DeepCopy(), PodTemplate: in.VolumeExpansion.PodTemplate.DeepCopy()}
	}
	if in.VolumeUnstaging != nil {
		out.VolumeUnstaging = &VolumeUnstaging{Section: in.VolumeUnstaging.Section.DeepCopy(), PodTemplate: in.VolumeUnstaging.PodTemplate.DeepCopy()}
	}
}

// DeepCopy copies a Section (its template string is immutable).
func (in Section) DeepCopy() Section {
	out := in
	if in.Unknown != nil {
		out.Unknown = append([]string(nil), in.Unknown...)
	}
	return out
}

func (in *PavProvisionerStatus) DeepCopyInto(out *PavProvisionerStatus) {
	*out = *in
	if in.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(in.Conditions))
		for i := range in.Conditions {
			in.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

func (in *PavProvisionerList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(PavProvisionerList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]PavProvisioner, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
