package main

import (
	"context"
	"os"

	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/nodeagent"
	"github.com/albertofaria/pav/protocol"
)

type nodeOptions struct {
	kubeconfig  string
	nodeName    string
	kubeletDir  string
	qps         float32
	burst       int
	httpAddr    string
	metricsAddr string
	metricsAuth bool
	workers     int
	runtime     string
	maxVolumes  int64
	preflight   bool
}

func init() {
	o := nodeOptions{}
	cmd := processCommand("node", "Run PaV's node plugin: a CSI driver for every PavProvisioner, staging and unstaging volumes on this node",
		func(ctx context.Context) error { return runNode(ctx, o) })
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: in-cluster configuration)")
	f.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "name of this node (default: $NODE_NAME)")
	f.StringVar(&o.kubeletDir, "kubelet-dir", protocol.DefaultKubeletDir, protocol.KubeletDirHelp)
	f.Float32Var(&o.qps, "kube-api-qps", 100, "client-side rate limit on Kubernetes API requests per second")
	f.IntVar(&o.burst, "kube-api-burst", 200, "client-side burst of Kubernetes API requests")
	f.StringVar(&o.httpAddr, "http-endpoint", ":8081", "address of /healthz and /readyz (empty: disabled)")
	f.StringVar(&o.metricsAddr, "metrics-endpoint", "127.0.0.1:9091", metricsFlagHelp)
	f.BoolVar(&o.metricsAuth, "metrics-auth", true, metricsAuthFlagHelp)
	f.IntVar(&o.workers, "result-workers", 4, "pods whose results are collected in parallel")
	f.StringVar(&o.runtime, "runtime-endpoint", "unix:///run/containerd/containerd.sock",
		"containerd's socket on this node: its task exit events tell the node plugin that PaV's pods' containers exited before kubelet's pod status does (empty: disabled; exits are learnt from the pod status alone)")
	f.Int64Var(&o.maxVolumes, "max-volumes-per-node", 0,
		"most PaV volumes of each PavProvisioner that pods on this node may use, reported to kubelet (CSI max_volumes_per_node, CSINode allocatable count) for the scheduler to enforce (0: no limit)")
	f.BoolVar(&o.preflight, "preflight", true,
		"check at start that the kernel has the system calls the node plugin uses and that --kubelet-dir is a shared mount (mountPropagation: Bidirectional); if not, say why in the log, in an Event on the Node and in /readyz, and stay not ready (false: for a node plugin that serves no real kubelet, as in tests)")
	rootCmd.AddCommand(cmd)
}

func runNode(ctx context.Context, o nodeOptions) error {
	reg := newRegistry() // before any client or queue, as for the controller
	cfg, err := restConfig(o.kubeconfig, o.qps, o.burst)
	if err != nil {
		return err
	}
	cfg.UserAgent = "pav-node/" + version
	access, err := metricsReviews(cfg, o.metricsAuth)
	if err != nil {
		return err
	}
	go serveMetrics(ctx, o.metricsAddr, reg, access)
	client, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return nodeagent.Run(ctx, nodeagent.Config{
		Registry:          reg,
		NodeName:          o.nodeName,
		KubeletDir:        o.kubeletDir,
		Version:           version,
		Kube:              client,
		Pav:               client,
		Engine:            nodeagent.NewTemplatingEngine(client),
		HealthAddress:     o.httpAddr,
		RuntimeEndpoint:   o.runtime,
		Workers:           o.workers,
		MaxVolumesPerNode: o.maxVolumes,
		SkipPreflight:     !o.preflight,
	})
}
