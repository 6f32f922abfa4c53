package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
)

func provisionerFixture(name string) *v1alpha1.PavProvisioner {
	return &v1alpha1.PavProvisioner{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "puid"},
		Spec:       v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}},
	}
}
