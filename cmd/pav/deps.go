package main

// Blank imports pinning the project's chosen dependencies in go.mod until the
// packages that use them exist. Delete an import once real code uses it.
import (
	_ "github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	_ "github.com/nikolalohinski/gonja/v2"
	_ "github.com/nikolalohinski/gonja/v2/exec"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/spf13/cobra"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/api/storage/v1"
	_ "k8s.io/apimachinery/pkg/api/validation"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/leaderelection"
	_ "k8s.io/client-go/tools/record"
	_ "k8s.io/client-go/util/workqueue"
	_ "k8s.io/klog/v2"
	_ "sigs.k8s.io/yaml"
)
