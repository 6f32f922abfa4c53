package main

// Blank imports pinning the project's chosen dependencies in go.mod until the
// packages that use them exist. Delete an import once real code uses it.
import (
	_ "github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	_ "github.com/nikolalohinski/gonja/v2"
	_ "github.com/nikolalohinski/gonja/v2/exec"
	_ "google.golang.org/grpc"
	_ "k8s.io/apimachinery/pkg/api/validation"
	_ "sigs.k8s.io/yaml"
)
