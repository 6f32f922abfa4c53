package templating

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func compiled(t *testing.T, doc string) *Compiled {
	t.Helper()
	c, err := Compile(provisioner(t, doc))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return c
}

func dynReq() DynamicRequest {
	return DynamicRequest{PVC: testPVC(), Class: testClass(), SelectedNodeName: "node-1"}
}
func stageReq() StagingRequest {
	return StagingRequest{PVC: testPVC(), PV: testPV(), Node: testNode(), ReadOnly: true}
}

// A provisioner that lists ReadWriteOncePod accepts claims for it; one that
// does not list access modes keeps the user guide's default and refuses them.
func TestReadWriteOncePod(t *testing.T) {
	ctx := context.Background()
	r := dynReq()
	r.PVC.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
	req, err := DynamicVolumeRequest(r.PVC)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := compiled(t, withSection(`
volumeValidation:
  accessModes: [ReadWriteOncePod]
`)).DynamicValidation(ctx, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Check(req); err != nil {
		t.Errorf("listed: %v", err)
	}
	cfg, err = compiled(t, minimal).DynamicValidation(ctx, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Check(req); err == nil || !strings.Contains(err.Error(), "access mode ReadWriteOncePod is not supported") {
		t.Errorf("default access modes: %v", err)
	}
}

// fsGroupPolicy is a literal: a staging section written as one template
// cannot set it (the CSIDriver is made before anything is evaluated).
func TestFSGroupPolicyIsLiteral(t *testing.T) {
	c := compiled(t, `
metadata: {name: test}
spec:
  provisioningModes: [Static]
  volumeStaging: "{% set yaml = true %}{fsGroupPolicy: File, podTemplate: {spec: {containers: [{name: s, image: i}]}}}"
`)
	_, err := c.Staging(context.Background(), stageReq(), nil)
	if err == nil || !strings.Contains(err.Error(), "spec.volumeStaging.fsGroupPolicy: Forbidden: unknown field") {
		t.Errorf("Staging = %v", err)
	}
}

func TestValidationPhase(t *testing.T) {
	ctx := context.Background()
	c := compiled(t, minimal)
	cfg, err := c.DynamicValidation(ctx, dynReq(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.VolumeModes, []corev1.PersistentVolumeMode{"Filesystem"}) ||
		!reflect.DeepEqual(cfg.AccessModes, []corev1.PersistentVolumeAccessMode{"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"}) ||
		cfg.MinCapacity != nil || cfg.MaxCapacity != nil || cfg.PodTemplate != nil || len(cfg.Evaluated) != 0 {
		t.Errorf("defaults: %+v", cfg)
	}

	c = compiled(t, withSection(`
volumeValidation:
  volumeModes: "{% set yaml = true %}[{{ params.mode }}]"
  accessModes: ["{{ requestedAccessModes[0] }}"]
  minCapacity: "{{ params.size }}Mi"
  maxCapacity: 10Gi
  podTemplate:
    spec:
      containers:
        - name: check
          image: img
          args: ["{{ requestedMinCapacity }}", "{{ pvc.metadata.name }}", "{{ sc.metadata.name }}", "{{ selectedNodeName }}"]
`))
	r := dynReq()
	r.Class.Parameters["mode"] = "Block"
	cfg, err = c.DynamicValidation(ctx, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.VolumeModes, []corev1.PersistentVolumeMode{"Block"}) ||
		!reflect.DeepEqual(cfg.AccessModes, []corev1.PersistentVolumeAccessMode{"ReadWriteOnce"}) ||
		cfg.MinCapacity.String() != "5Mi" || cfg.MaxCapacity.String() != "10Gi" {
		t.Errorf("evaluated: %+v", cfg)
	}
	if got := cfg.PodTemplate.Spec.Containers[0].Args; !reflect.DeepEqual(got, []string{"1073741824", "claim", "cls", "node-1"}) {
		t.Errorf("args %q", got)
	}
	if got := cfg.Evaluated["volumeModes"]; !reflect.DeepEqual(got, []interface{}{"Block"}) {
		t.Errorf("Evaluated volumeModes %#v", got)
	}
	if err := cfg.Check(must(DynamicVolumeRequest(r.PVC))); err == nil || !strings.Contains(err.Error(), "volume mode Filesystem is not supported (supported: Block)") {
		t.Errorf("Check: %v", err)
	}

	// Evaluated values are typed with their paths.
	r.Class.Parameters["mode"] = "Tape"
	r.Class.Parameters["size"] = "x"
	_, err = c.DynamicValidation(ctx, r, nil)
	for _, want := range []string{`spec.volumeValidation.minCapacity: Invalid value: "xMi": must be a capacity`, `spec.volumeValidation.volumeModes[0]: Unsupported value: "Tape"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %s", err, want)
		}
	}

	// Static validation: handle and pv instead of sc and pvc, and the pod
	// template (dynamic provisioning only) is left alone, even when it uses
	// what only the dynamic context has.
	c = compiled(t, withSection(`
volumeValidation:
  minCapacity: "{{ 1 if handle == 'h-1' and pv.metadata.name == 'pv-1' and params.a == 'b' else 'wrong' }}"
  maxCapacity: "{{ requestedMaxCapacity }}"
  podTemplate:
    spec:
      containers: [{name: c, image: img, args: ["{{ pvc.metadata.name }}", "{{ sc.metadata.name }}"]}]
`))
	cfg, err = c.StaticValidation(ctx, StaticRequest{PV: testPV()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PodTemplate != nil || cfg.Evaluated["podTemplate"] != nil {
		t.Errorf("static validation evaluated the pod template: %v", cfg.PodTemplate)
	}
	if cfg.MinCapacity == nil || cfg.MinCapacity.Value() != 1 || cfg.MaxCapacity == nil || cfg.MaxCapacity.Value() != 2147483648 {
		t.Errorf("static min/max %v %v", cfg.MinCapacity, cfg.MaxCapacity)
	}
	// ... and sc/pvc are undefined there: an expression using them fails.
	c = compiled(t, withSection(`
volumeValidation:
  minCapacity: "{{ pvc.metadata.name }}"
`))
	if _, err := c.StaticValidation(ctx, StaticRequest{PV: testPV()}, nil); err == nil || !strings.Contains(err.Error(), "spec.volumeValidation.minCapacity") {
		t.Errorf("static validation using pvc: %v", err)
	}
}

func TestProvisioningModesEnforced(t *testing.T) {
	ctx := context.Background()
	static := compiled(t, strings.Replace(minimalNoCreation, "[Dynamic, Static]", "[Static]", 1))
	if _, err := static.DynamicValidation(ctx, dynReq(), nil); err == nil || !strings.Contains(err.Error(), "does not support Dynamic provisioning") {
		t.Errorf("DynamicValidation on a Static provisioner: %v", err)
	}
	if _, err := static.Creation(ctx, dynReq(), nil); err == nil {
		t.Error("Creation on a Static provisioner")
	}
	if _, err := static.Deletion(ctx, dynReq(), nil); err == nil {
		t.Error("Deletion on a Static provisioner")
	}
	dynamic := compiled(t, strings.Replace(minimal, "[Dynamic, Static]", "[Dynamic]", 1))
	if _, err := dynamic.StaticValidation(ctx, StaticRequest{PV: testPV()}, nil); err == nil {
		t.Error("StaticValidation on a Dynamic provisioner")
	}
}

func TestCreationPhase(t *testing.T) {
	ctx := context.Background()
	c := compiled(t, withSection(`
volumeCreation:
  handle: "{{ defaultHandle }}-{{ params.size }}"
  capacity: "{{ requestedMinCapacity }}"
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchFields: [{key: metadata.name, operator: In, values: ["{{ selectedNodeName }}"]}]
  podTemplate:
    metadata: {namespace: "{{ pvc.metadata.namespace }}"}
    spec:
      nodeName: "{{ selectedNodeName }}"
      containers: [{name: c, image: img, command: [sh, -c, "{{ requestedMaxCapacity is none }}"]}]
volumeDeletion:
  podTemplate:
    spec:
      containers: [{name: c, image: img, args: ["{{ defaultHandle }}"]}]
`))
	cfg, err := c.Creation(ctx, dynReq(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Handle != "pvc-1111-2222-5" || cfg.Capacity.Value() != 1<<30 {
		t.Errorf("handle %q capacity %v", *cfg.Handle, cfg.Capacity)
	}
	if got := cfg.NodeAffinity.Required.NodeSelectorTerms[0].MatchFields[0].Values; !reflect.DeepEqual(got, []string{"node-1"}) {
		t.Errorf("node affinity values %q", got)
	}
	if cfg.PodTemplate.Namespace != "ns" || cfg.PodTemplate.Spec.NodeName != "node-1" {
		t.Errorf("pod template %+v", cfg.PodTemplate)
	}
	if got := cfg.PodTemplate.Spec.Containers[0].Command[2]; got != "True" {
		t.Errorf("requestedMaxCapacity is none: %q", got)
	}
	d, err := c.Deletion(ctx, dynReq(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.PodTemplate.Spec.Containers[0].Args; !reflect.DeepEqual(got, []string{"pvc-1111-2222"}) {
		t.Errorf("deletion args %q", got)
	}

	// Absent sections and fields evaluate to empty configs.
	c = compiled(t, minimal)
	if cfg, err := c.Creation(ctx, dynReq(), nil); err != nil || cfg.Handle != nil || cfg.PodTemplate != nil || cfg.NodeAffinity != nil {
		t.Errorf("empty creation: %+v %v", cfg, err)
	}

	// A handle evaluated to something that is not a file name is refused.
	c = compiled(t, withSection(`
volumeCreation:
  handle: "{{ params.path }}"
  capacity: 1Gi
`))
	if _, err := c.Creation(ctx, dynReq(), nil); err == nil || !strings.Contains(err.Error(), `spec.volumeCreation.handle: Invalid value: "/data": the handle "/data" is not allowed`) {
		t.Errorf("handle /data: %v", err)
	}
	if cfg, err := c.Deletion(ctx, dynReq(), nil); err != nil || cfg.PodTemplate != nil {
		t.Errorf("empty deletion: %+v %v", cfg, err)
	}
	if cfg, err := c.Unstaging(ctx, stageReq(), nil); err != nil || cfg.PodTemplate != nil {
		t.Errorf("empty unstaging: %+v %v", cfg, err)
	}
}

func TestEvaluationTypeErrors(t *testing.T) {
	ctx := context.Background()
	c := compiled(t, withSection(`
volumeCreation:
  capacity: "{{ params.path }}"
  handle: "{% set yaml = true %}[1, 2]"
  podTemplate:
    spec:
      containers: [{name: "{{ params.path }}", image: img}]
`))
	_, err := c.Creation(ctx, dynReq(), nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`spec.volumeCreation.capacity: Invalid value: "/data": must be a capacity`,
		`spec.volumeCreation.handle: Invalid value: "<list>": must be a string`,
		`spec.volumeCreation.podTemplate.spec.containers[0].name: Invalid value: "/data"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant %s", err, want)
		}
	}
}

// A template that copies the claim's annotations into its pod would let a
// tenant forge PaV's metadata: refused when evaluated, with the path.
func TestEvaluatedReservedPodMetadata(t *testing.T) {
	c := compiled(t, withSection(`
volumeCreation:
  capacity: 1Gi
  podTemplate:
    metadata:
      annotations: "{% set yaml = true %}{{ pvc.metadata.annotations | tojson }}"
      finalizers: ["{{ pvc.metadata.annotations['f'] }}"]
    spec: {containers: [{name: c, image: img}]}
`))
	r := dynReq()
	r.PVC.Annotations = map[string]string{"note": "x", "f": "pav.albertofaria.github.io/volume",
		"pav.albertofaria.github.io/succeeded": "true", "pav.albertofaria.github.io/result-handle": ".."}
	_, err := c.Creation(context.Background(), r, nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"spec.volumeCreation.podTemplate.metadata.annotations[pav.albertofaria.github.io/result-handle]: Forbidden: names under pav.albertofaria.github.io/ are reserved to PaV",
		"spec.volumeCreation.podTemplate.metadata.annotations[pav.albertofaria.github.io/succeeded]: Forbidden",
		"spec.volumeCreation.podTemplate.metadata.finalizers[0]: Forbidden",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant %s", err, want)
		}
	}
	r.PVC.Annotations = map[string]string{"note": "x", "f": "example.com/f"}
	if cfg, err := c.Creation(context.Background(), r, nil); err != nil || cfg.PodTemplate.Annotations["note"] != "x" {
		t.Fatalf("Creation = %+v, %v", cfg, err)
	}
}

func TestYAMLValues(t *testing.T) {
	ctx := context.Background()
	c := compiled(t, withSection(`
volumeCreation:
  capacity: "{% set yaml = true %}{{ requestedMinCapacity * 2 }}"
  handle: "{% set yaml = true %}null"
  podTemplate:
    spec:
      containers:
        - name: c
          image: img
          args: "{% set yaml = true %}[a, '{{ '{{' }} not evaluated }}']"
          ports: [{containerPort: "{% set yaml = true %}8080"}]
`))
	cfg, err := c.Creation(ctx, dynReq(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Capacity.Value() != 2<<30 {
		t.Errorf("capacity %v", cfg.Capacity)
	}
	if cfg.Handle != nil {
		t.Errorf("null handle: %q", *cfg.Handle)
	}
	if _, ok := cfg.Evaluated["handle"]; ok {
		t.Error("a null value is kept in Evaluated")
	}
	ctr := cfg.PodTemplate.Spec.Containers[0]
	if !reflect.DeepEqual(ctr.Args, []string{"a", "{{ not evaluated }}"}) || ctr.Ports[0].ContainerPort != 8080 {
		t.Errorf("container %+v", ctr)
	}

	c = compiled(t, withSection(`
volumeCreation:
  capacity: "{% set yaml = true %}[unclosed"
`))
	if _, err := c.Creation(ctx, dynReq(), nil); err == nil || !strings.Contains(err.Error(), "spec.volumeCreation.capacity: Invalid value: \"[unclosed\": the template set yaml to true but its output is not valid YAML") {
		t.Errorf("bad YAML: %v", err)
	}
}

func TestStagingPhase(t *testing.T) {
	ctx := context.Background()
	c := compiled(t, `
metadata: {name: test}
spec:
  provisioningModes: [Static]
  volumeStaging:
    podTemplate:
      spec:
        containers:
          - name: c
            image: img
            args: ["{{ volumeMode }}", "{{ accessModes | join(',') }}", "{{ capacity }}", "{{ params.a }}", "{{ handle }}", "{{ readOnly }}", "{{ pvc.metadata.name }}", "{{ pv.metadata.name }}", "{{ node.metadata.labels.zone }}"]
  volumeUnstaging:
    podTemplate: "{% set yaml = true %}{spec: {containers: [{name: u, image: '{{ handle }}'}]}}"
`)
	cfg, err := c.Staging(ctx, stageReq(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Block", "ReadWriteOnce", "2147483648", "b", "h-1", "True", "claim", "pv-1", "z"}
	if got := cfg.PodTemplate.Spec.Containers[0].Args; !reflect.DeepEqual(got, want) {
		t.Errorf("args %q, want %q", got, want)
	}
	u, err := c.Unstaging(ctx, stageReq(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if u.PodTemplate.Spec.Containers[0].Image != "h-1" {
		t.Errorf("unstaging %+v", u.PodTemplate)
	}

	c = compiled(t, `
metadata: {name: test}
spec:
  provisioningModes: [Static]
  volumeStaging:
    podTemplate: "{% set yaml = true %}null"
`)
	if _, err := c.Staging(ctx, stageReq(), nil); err == nil || !strings.Contains(err.Error(), "spec.volumeStaging.podTemplate: Required value") {
		t.Errorf("staging pod evaluated to null: %v", err)
	}
}

func TestGetPVC(t *testing.T) {
	ctx := context.WithValue(context.Background(), struct{}{}, "marker")
	c := compiled(t, withSection(`
volumeCreation:
  handle: "{{ get_pvc('other', 'ns2').spec.volumeName }}"
  capacity: 1Gi
`))
	var calls []string
	get := func(gctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
		if gctx.Value(struct{}{}) != "marker" {
			t.Error("get_pvc did not get the caller's context")
		}
		calls = append(calls, namespace+"/"+name)
		if name != "other" {
			return nil, errors.New("not found")
		}
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "vol-9"}}, nil
	}
	cfg, err := c.Creation(ctx, dynReq(), get)
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Handle != "vol-9" || !reflect.DeepEqual(calls, []string{"ns2/other"}) {
		t.Errorf("handle %q calls %v", *cfg.Handle, calls)
	}

	c = compiled(t, withSection(`
volumeCreation:
  handle: "{{ get_pvc('missing', 'ns2').spec.volumeName }}"
  capacity: 1Gi
`))
	if _, err := c.Creation(ctx, dynReq(), get); err == nil || !strings.Contains(err.Error(), "spec.volumeCreation.handle") || !strings.Contains(err.Error(), "not found") {
		t.Errorf("get_pvc error: %v", err)
	}
	if _, err := c.Creation(ctx, dynReq(), nil); err == nil {
		t.Error("get_pvc without a getter did not fail")
	}
}

func TestContextNotMutated(t *testing.T) {
	c := compiled(t, withSection(`
volumeCreation:
  handle: "{% set x = pvc.metadata.update({'name': 'changed'}) %}{{ pvc.metadata.name }}"
  capacity: 1Gi
`))
	r := dynReq()
	_, _ = c.Creation(context.Background(), r, nil)
	if r.PVC.Name != "claim" {
		t.Errorf("the request's PVC was changed: %s", r.PVC.Name)
	}
}

func TestCheck(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	i := func(v int64) *int64 { return &v }
	cfg := &ValidationConfig{
		VolumeModes: []corev1.PersistentVolumeMode{"Filesystem"},
		AccessModes: []corev1.PersistentVolumeAccessMode{"ReadWriteOnce", "ReadOnlyMany"},
		MinCapacity: q("1Gi"), MaxCapacity: q("10Gi"),
	}
	tests := []struct {
		name string
		r    VolumeRequest
		want []string
	}{
		{"fits", VolumeRequest{"Filesystem", []corev1.PersistentVolumeAccessMode{"ReadWriteOnce"}, 1 << 30, nil}, nil},
		{"fits with limit", VolumeRequest{"Filesystem", nil, 5 << 30, i(10 << 30)}, nil},
		{"min request below minCapacity is fine without a limit", VolumeRequest{"Filesystem", nil, 1, nil}, nil},
		{"volume mode", VolumeRequest{"Block", nil, 1 << 30, nil}, []string{"volume mode Block is not supported (supported: Filesystem)"}},
		{"access mode", VolumeRequest{"Filesystem", []corev1.PersistentVolumeAccessMode{"ReadWriteOnce", "ReadWriteMany"}, 1 << 30, nil}, []string{"access mode ReadWriteMany is not supported (supported: ReadWriteOnce, ReadOnlyMany)"}},
		{"too big", VolumeRequest{"Filesystem", nil, 11 << 30, nil}, []string{"the requested capacity 11Gi is above the maximum capacity 10Gi"}},
		{"limit too small", VolumeRequest{"Filesystem", nil, 1 << 20, i(1 << 20)}, []string{"the capacity limit 1Mi is below the minimum capacity 1Gi"}},
		{"ReadWriteOncePod only where listed", VolumeRequest{"Filesystem", []corev1.PersistentVolumeAccessMode{"ReadWriteOncePod"}, 1 << 30, nil}, []string{"access mode ReadWriteOncePod is not supported (supported: ReadWriteOnce, ReadOnlyMany)"}},
		{"everything", VolumeRequest{"Block", []corev1.PersistentVolumeAccessMode{"ReadWriteMany"}, 11 << 30, i(1)}, []string{"volume mode", "access mode", "above the maximum", "below the minimum"}},
	}
	for _, tt := range tests {
		err := cfg.Check(tt.r)
		if (err != nil) != (tt.want != nil) {
			t.Errorf("%s: error %v", tt.name, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q, want %q", tt.name, err, w)
			}
		}
	}
	// Static: the PV's capacity is both the minimum and the maximum.
	pv := testPV()
	pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("512Mi")
	pv.Spec.VolumeMode = nil
	pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadWriteOnce"}
	if err := cfg.Check(must(StaticVolumeRequest(pv))); err == nil || !strings.Contains(err.Error(), "below the minimum capacity") {
		t.Errorf("static: %v", err)
	}
}

func TestCache(t *testing.T) {
	p := provisioner(t, minimal)
	p.UID, p.Generation = types.UID("u1"), 1
	c := NewCache()
	a, err := c.Get(p)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b, err := c.Get(p); err != nil || b != a {
				t.Errorf("cached Get: %p %v", b, err)
			}
		}()
	}
	wg.Wait()
	p2 := p.DeepCopy()
	p2.Generation = 2
	p2.Spec.VolumeStaging.PodTemplate = nil
	if _, err := c.Get(p2); err == nil {
		t.Error("new generation not recompiled")
	}
	if _, err := c.Get(p2); err == nil {
		t.Error("cached failure lost")
	}
	c.Forget(p.UID)
	if b, err := c.Get(p); err != nil || b == a {
		t.Errorf("after Forget: %p %v", b, err)
	}
	// The compiled copy is independent of the caller's object.
	p.Spec.ProvisioningModes[0] = "changed"
	if a.Provisioner.Spec.ProvisioningModes[0] != "Dynamic" {
		t.Error("Compiled shares the caller's object")
	}
	_ = fmt.Sprint
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
