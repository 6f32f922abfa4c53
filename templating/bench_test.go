package templating

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The examples' provisioners are the realistic workload: their templates are
// what PaV compiles when a provisioner changes and evaluates on every claim
// and every staging.
func exampleProvisioner(b *testing.B, name string) []byte {
	b.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "examples", name, "provisioner.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	return doc
}

var benchExamples = []string{"hello-world", "s3-bucket", "gocryptfs"}

// BenchmarkCompile measures validating and compiling a whole PavProvisioner,
// paid once per provisioner generation (then the cache serves it).
func BenchmarkCompile(b *testing.B) {
	for _, name := range benchExamples {
		p := provisioner(b, string(exampleProvisioner(b, name)))
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCacheHit measures the per-operation lookup of a compiled provisioner.
func BenchmarkCacheHit(b *testing.B) {
	p := provisioner(b, string(exampleProvisioner(b, "s3-bucket")))
	p.UID, p.Generation = "5f0c1b9e-0000-4000-8000-000000000001", 3 // as read from the API server
	c := NewCache()
	if _, err := c.Get(p); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Get(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPhases measures evaluating each phase of the s3-bucket example
// (the largest templates) with realistic objects: the cost PaV adds to every
// provisioning and every NodePublishVolume before its pod is created.
func BenchmarkPhases(b *testing.B) {
	p := provisioner(b, string(exampleProvisioner(b, "s3-bucket")))
	c, err := Compile(p)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	dyn := DynamicRequest{PVC: testPVC(), Class: testClass()}
	dyn.Class.Parameters = map[string]string{"namespace": "ns", "secret": "s3-credentials"}
	stage := StagingRequest{PVC: testPVC(), PV: testPV(), Node: testNode()}
	stage.PV.Spec.CSI.VolumeAttributes = dyn.Class.Parameters
	phases := []struct {
		name string
		run  func() error
	}{
		{"validation", func() error { _, err := c.DynamicValidation(ctx, dyn, nil); return err }},
		{"creation", func() error { _, err := c.Creation(ctx, dyn, nil); return err }},
		{"deletion", func() error { _, err := c.Deletion(ctx, dyn, nil); return err }},
		{"staging", func() error { _, err := c.Staging(ctx, stage, nil); return err }},
	}
	for _, ph := range phases {
		b.Run(ph.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := ph.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
