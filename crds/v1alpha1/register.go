package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// SchemeBuilder registers PavProvisioner and PavProvisionerList.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this group's types to a scheme (the generated
	// clientset's, the controller's for Events).
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource is the GroupResource of a resource of this group (listers use it
// in their NotFound errors).
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &PavProvisioner{}, &PavProvisionerList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
