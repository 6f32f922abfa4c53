package v1alpha1

import (
	"reflect"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

// fullProvisioner sets every field of PaV's types (fieldsFilled checks it) and
// the pointer, map and slice fields of its metadata.
func fullProvisioner() *PavProvisioner {
	str := func(s string) *string { return &s }
	value := func(s string) *Value {
		return NewValue(map[string]interface{}{"s": s, "list": []interface{}{s, int64(1), map[string]interface{}{"k": s}}})
	}
	section := func(s string) Section { return Section{Template: str("{{ " + s + " }}"), Unknown: []string{s}} }
	now := metav1.NewTime(time.Unix(1000, 0))
	grace := int64(30)
	return &PavProvisioner{
		TypeMeta: metav1.TypeMeta{Kind: "PavProvisioner", APIVersion: SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Generation: 2, Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"a": "v"},
			Finalizers: []string{"f"}, DeletionTimestamp: &now, DeletionGracePeriodSeconds: &grace,
			OwnerReferences: []metav1.OwnerReference{{Name: "o", Controller: new(bool)}},
		},
		Spec: PavProvisionerSpec{
			ProvisioningModes: []ProvisioningMode{Dynamic, Static},
			VolumeValidation: &VolumeValidation{Section: section("v"), VolumeModes: value("vm"), AccessModes: value("am"),
				MinCapacity: value("min"), MaxCapacity: value("max"), PodTemplate: value("vp")},
			VolumeCreation: &VolumeCreation{Section: section("c"), Handle: value("h"), Capacity: value("cap"), PodTemplate: value("cp"),
				NodeAffinity: value("na"), Cloning: true, Restoring: true},
			VolumeDeletion: &VolumeDeletion{Section: section("d"), PodTemplate: value("dp")},
			VolumeStaging: &VolumeStaging{Section: section("s"), PodTemplate: value("sp"), AllowSetuidAndDevices: true,
				FSGroupPolicy: ptr(storagev1.FileFSGroupPolicy), Recovery: RecoveryNone, Shared: true, UpdateStrategy: UpdateRollingUpdate},
			VolumeUnstaging:       &VolumeUnstaging{Section: section("u"), PodTemplate: value("up")},
			VolumeExpansion:       &VolumeExpansion{Section: section("e"), PodTemplate: value("ep")},
			VolumeModification:    &VolumeModification{Section: section("m"), PodTemplate: value("mp")},
			SnapshotCreation:      &SnapshotCreation{Section: section("sc"), PodTemplate: value("scp")},
			SnapshotDeletion:      &SnapshotDeletion{Section: section("sd"), PodTemplate: value("sdp")},
			GroupSnapshotCreation: &GroupSnapshotCreation{Section: section("gc"), PodTemplate: value("gcp")},
			GroupSnapshotDeletion: &GroupSnapshotDeletion{Section: section("gd"), PodTemplate: value("gdp")},
			PodLogsInEvents:       true,
			TopologyKeys:          []string{"k"},
			StorageCapacity:       &StorageCapacity{Capacity: value("cc"), PodTemplate: value("cpt"), RefreshPeriod: &metav1.Duration{Duration: time.Minute}},
			InlineVolumes:         true,
			InlineVolumePolicy: &InlineVolumePolicy{
				Attributes:             []InlineVolumeAttribute{{Name: "a", Pattern: "p", Enum: []string{"e"}, MaxLength: ptr(int32(3)), Default: ptr("e")}},
				NamespaceSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"k": "v"}},
				MaxVolumesPerPod:       ptr(int32(1)),
				MaxVolumesPerNamespace: ptr(int32(2)),
			},
		},
		Status: PavProvisionerStatus{ObservedGeneration: 2, Stagings: 3, OutdatedStagings: 1, Conditions: []metav1.Condition{
			{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: now}}},
	}
}

// A deep copy shares no memory with its original: changing every value the
// copy reaches (through pointers, maps, slices and template values) leaves the
// original as it was.
func TestDeepCopySharesNothing(t *testing.T) {
	fieldsFilled(t, reflect.ValueOf(fullProvisioner()).Elem(), "PavProvisioner")
	orig := fullProvisioner()
	cp := orig.DeepCopy()
	if !reflect.DeepEqual(cp, orig) {
		t.Fatalf("the copy differs from the original:\n%+v\n%+v", cp, orig)
	}
	mutate(reflect.ValueOf(cp).Elem())
	if reflect.DeepEqual(cp, orig) {
		t.Fatal("mutate changed nothing")
	}
	if !reflect.DeepEqual(orig, fullProvisioner()) {
		t.Errorf("changing the copy changed the original:\n%+v\nwant\n%+v", orig, fullProvisioner())
	}

	// The list and the object through DeepCopyObject, as caches and clients copy them.
	list := &PavProvisionerList{Items: []PavProvisioner{*fullProvisioner()}}
	lcp := list.DeepCopyObject().(*PavProvisionerList)
	mutate(reflect.ValueOf(lcp).Elem())
	if !reflect.DeepEqual(list.Items[0], *fullProvisioner()) {
		t.Errorf("changing a copy of a list changed the original")
	}
}

// fieldsFilled fails for every field of PaV's types (this package's structs)
// left zero in v, so a new field must join fullProvisioner.
func fieldsFilled(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			fieldsFilled(t, v.Elem(), path)
		}
	case reflect.Struct:
		if v.Type().PkgPath() != reflect.TypeOf(PavProvisioner{}).PkgPath() {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if v.Field(i).IsZero() {
				t.Errorf("fullProvisioner leaves %s.%s zero: set it", path, f.Name)
				continue
			}
			fieldsFilled(t, v.Field(i), path+"."+f.Name)
		}
	}
}

// mutate changes every value reachable from v in place: through pointers,
// slices, maps and interfaces, every string, number, bool and time.
func mutate(v reflect.Value) {
	if v.Type() == reflect.TypeOf(time.Time{}) {
		v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Hour)))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			mutate(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				mutate(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			mutate(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			mutate(e)
			v.SetMapIndex(k, e)
		}
	case reflect.Interface:
		if !v.IsNil() {
			e := reflect.New(v.Elem().Type()).Elem()
			e.Set(v.Elem())
			mutate(e)
			v.Set(e)
		}
	case reflect.String:
		v.SetString(v.String() + "!")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	}
}
