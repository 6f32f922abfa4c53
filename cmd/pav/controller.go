package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/controller"
	"github.com/albertofaria/pav/controller/webhook"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
	"github.com/albertofaria/pav/third_party/leaderelection"
	"github.com/albertofaria/pav/third_party/leaderelection/resourcelock"
)

type controllerOptions struct {
	kubeconfig    string
	qps           float32
	burst         int
	claimWorkers  int
	volumeWorkers int
	retryStart    time.Duration
	retryMax      time.Duration
	resultsWait   time.Duration
	resync        time.Duration
	httpAddr      string
	metricsAddr   string
	metricsAuth   bool
	shutdownDelay time.Duration
	kubeletDir    string
	poolDirs      []string

	leaderElection bool
	leaseNamespace string
	leaseName      string
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration

	webhookAddr    string
	webhookSecret  string
	webhookService string
	webhookConfig  string
	webhookCA      string
	webhookNames   []string
	webhookCAOpt   bool
}

func init() {
	o := controllerOptions{}
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "pav"
	}
	cmd := processCommand("controller", "Run PaV's controller: dynamic provisioning and deletion for all PavProvisioners, and the admission webhook",
		func(ctx context.Context) error { return runController(ctx, o) })
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: in-cluster configuration)")
	f.Float32Var(&o.qps, "kube-api-qps", 200, "client-side rate limit on Kubernetes API requests per second")
	f.IntVar(&o.burst, "kube-api-burst", 400, "client-side burst of Kubernetes API requests")
	f.IntVar(&o.claimWorkers, "claim-workers", 16, "claims synced in parallel")
	f.IntVar(&o.volumeWorkers, "volume-workers", 16, "volumes synced in parallel")
	f.DurationVar(&o.retryStart, "retry-interval-start", time.Second, "first retry delay after a failed provisioning or deletion; doubles per failure")
	f.DurationVar(&o.retryMax, "retry-interval-max", 5*time.Minute, "maximum retry delay")
	f.DurationVar(&o.resultsWait, "results-timeout", 2*time.Minute, "how long a terminated PaV pod waits for the node plugin to collect its /pav files")
	f.DurationVar(&o.resync, "resync", 10*time.Minute, "informer resync period (a safety net; all work is event-driven)")
	f.StringVar(&o.httpAddr, "http-endpoint", ":8080", "address of /healthz and /readyz (empty: disabled)")
	f.StringVar(&o.metricsAddr, "metrics-endpoint", "127.0.0.1:9090", metricsFlagHelp)
	f.BoolVar(&o.metricsAuth, "metrics-auth", true, metricsAuthFlagHelp)
	f.StringVar(&o.kubeletDir, "kubelet-dir", protocol.DefaultKubeletDir, protocol.KubeletDirHelp)
	f.StringArrayVar(&o.poolDirs, "pool-kubelet-dir", nil, "<label selector>:<dir>, repeatable: the kubelet root directory of the nodes the selector matches (a node pool with its own node plugin DaemonSet), first match wins; the controller puts the /pav of the pods it places on such a node (capacity pods) there")
	f.DurationVar(&o.shutdownDelay, "shutdown-delay", 5*time.Second, "after SIGTERM, how long the admission webhook keeps answering while not ready, so that the Service's endpoints and kube-proxy stop sending it requests before it stops")
	f.BoolVar(&o.leaderElection, "leader-election", true, "elect one active controller among replicas")
	f.StringVar(&o.leaseNamespace, "leader-election-namespace", ns, "namespace of the leader election Lease")
	f.StringVar(&o.leaseName, "leader-election-name", "pav-controller", "name of the leader election Lease")
	f.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "")
	f.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "")
	f.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "")
	f.StringVar(&o.webhookAddr, "webhook-address", ":9443", "address of the PavProvisioner admission webhook (empty: disabled)")
	f.StringVar(&o.webhookSecret, "webhook-secret", "pav-webhook-cert", "Secret (in the leader election namespace) holding the webhook's CA and certificate")
	f.StringVar(&o.webhookService, "webhook-service", "pav-webhook", "Service through which the API server reaches the webhook")
	f.StringVar(&o.webhookConfig, "webhook-configuration", "pav.albertofaria.github.io", "ValidatingWebhookConfiguration whose caBundle the controller maintains (empty: leave alone)")
	f.StringVar(&o.webhookCA, "webhook-client-ca", "", "PEM file of the CAs of the client certificate the API server presents to the webhook (its AdmissionConfiguration's kubeconfig): callers without one are refused at the TLS handshake; re-read when it changes (empty: any caller)")
	f.BoolVar(&o.webhookCAOpt, "webhook-client-ca-optional", false, "with --webhook-client-ca: while that file does not exist (an optional ConfigMap not created), any caller gets past the TLS handshake; once it exists, only callers with a certificate from its CAs")
	f.StringSliceVar(&o.webhookNames, "webhook-client-names", nil, "with --webhook-client-ca: names (CN or DNS SAN) one of which the client certificate must carry (empty: any from those CAs)")
	rootCmd.AddCommand(cmd)
}

func restConfig(kubeconfig string, qps float32, burst int) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	cfg.UserAgent = "pav-controller/" + version
	return cfg, nil
}

func runController(ctx context.Context, o controllerOptions) error {
	if (len(o.webhookNames) > 0 || o.webhookCAOpt) && o.webhookCA == "" {
		return fmt.Errorf("--webhook-client-names and --webhook-client-ca-optional need --webhook-client-ca")
	}
	// Before any client, queue or elector: client-go takes its metrics
	// providers once, for what is made afterwards.
	reg := newRegistry()
	cfg, err := restConfig(o.kubeconfig, o.qps, o.burst)
	if err != nil {
		return err
	}
	access, err := metricsReviews(cfg, o.metricsAuth)
	if err != nil {
		return err
	}
	go serveMetrics(ctx, o.metricsAddr, reg, access)
	client, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	engine := controller.NewTemplatingEngine(client)
	// The reconcilers, their informers and caches exist only on the leader:
	// a standby builds them when it takes over (and exits when it loses the
	// lead), so it holds nothing but the webhook meanwhile.
	if err := protocol.CheckKubeletDir(o.kubeletDir); err != nil {
		return err
	}
	poolDirs, err := parsePoolKubeletDirs(o.poolDirs)
	if err != nil {
		return err
	}
	newController := func() (*controller.Controller, error) {
		return controller.New(controller.Config{
			Kube: client, Pav: client, Snapshots: client, Engine: engine,
			ClaimWorkers: o.claimWorkers, VolumeWorkers: o.volumeWorkers,
			RetryStart: o.retryStart, RetryMax: o.retryMax,
			ResultsTimeout: o.resultsWait, Resync: o.resync,
			Metrics:         controller.NewMetrics(reg),
			KubeletDir:      o.kubeletDir,
			PoolKubeletDirs: poolDirs,
			// PaV's namespace: the CSIStorageCapacity objects go there.
			Namespace: o.leaseNamespace,
		})
	}

	// A stop (ctx) ends the reconcilers and leadership at once, but the
	// webhook and the HTTP endpoint serve on until the drain is over: /readyz
	// fails and connections are not kept alive meanwhile, so the API server
	// sends its next admission requests to another replica instead of
	// failing them against one that is gone (rolling restarts, upgrades).
	var servers sync.WaitGroup
	defer servers.Wait() // deferred first, so it runs after stopServing
	serving, stopServing := context.WithCancel(context.Background())
	defer stopServing()

	// The webhook runs on every replica (the Service may route to any).
	var wh *webhook.Server
	if o.webhookAddr != "" {
		wh = startWebhook(serving, &servers, client, o, reg)
	}
	go func() {
		<-ctx.Done()
		if wh != nil {
			wh.Drain()
		}
		klog.InfoS("Stopping: draining the admission webhook", "for", o.shutdownDelay)
		select {
		case <-time.After(o.shutdownDelay):
		case <-serving.Done():
		}
		stopServing()
	}()

	var watchdog *leaderelection.HealthzAdaptor
	if o.httpAddr != "" {
		watchdog = serveControllerHealth(ctx, serving, o.httpAddr, wh)
	}
	var elector *leaderelection.LeaderElector
	if o.leaderElection {
		if elector, err = newElector(ctx, client, o, watchdog, newController); err != nil {
			return err
		}
	}

	if elector == nil {
		var ctrl *controller.Controller
		if ctrl, err = newController(); err == nil {
			err = ctrl.Run(ctx)
		}
	} else {
		elector.Run(ctx) // returns once ctx ends, the Lease released
	}
	<-serving.Done()
	return err
}

// startWebhook serves the admission webhook until serving ends (servers
// tracks it); the process exits if it fails.
func startWebhook(serving context.Context, servers *sync.WaitGroup, client *kubeclient.Clientset, o controllerOptions, reg *prometheus.Registry) *webhook.Server {
	wh := &webhook.Server{
		Kube: client, Namespace: o.leaseNamespace, SecretName: o.webhookSecret,
		ServiceName: o.webhookService, WebhookConfigName: o.webhookConfig,
		Addr: o.webhookAddr, Handler: &webhook.Handler{Check: templating.Check, Metrics: webhook.NewMetrics(reg)},
		ClientCAFile: o.webhookCA, ClientNames: o.webhookNames, ClientCAOptional: o.webhookCAOpt,
	}
	servers.Add(1)
	go func() {
		defer servers.Done()
		if err := wh.Run(serving); err != nil {
			klog.ErrorS(err, "Admission webhook stopped")
			os.Exit(1)
		}
	}()
	return wh
}

// serveControllerHealth serves /healthz (the leader election's watchdog,
// returned for the elector) and /readyz (the webhook serving, not yet
// stopping: ctx) on addr until serving ends; the process exits if it fails.
func serveControllerHealth(ctx, serving context.Context, addr string, wh *webhook.Server) *leaderelection.HealthzAdaptor {
	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := watchdog.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		// Ready = able to answer admission reviews; only the leader runs
		// the reconcilers, so they do not count (standbys must be ready too).
		if ctx.Err() != nil {
			http.Error(w, "stopping", http.StatusServiceUnavailable)
			return
		}
		if wh != nil && !wh.Ready() {
			http.Error(w, "webhook not serving yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "HTTP endpoint stopped")
			os.Exit(1)
		}
	}()
	go func() {
		<-serving.Done()
		_ = srv.Close()
	}()
	return watchdog
}

// newElector builds and runs a controller while this replica leads. Leadership ends when stop
// ends (the Lease is released for the standby) or when it is lost; in the
// second case the process exits, as informers and queues cannot be
// restarted, and the Deployment restarts it as a standby.
func newElector(stop context.Context, kube kubeclient.Interface, o controllerOptions, watchdog *leaderelection.HealthzAdaptor, newController func() (*controller.Controller, error)) (*leaderelection.LeaderElector, error) {
	host, _ := os.Hostname()
	id := host + "_" + string(uuid.NewUUID())
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.leaseNamespace, Name: o.leaseName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	lec := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Name:            o.leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				klog.InfoS("Became leader", "identity", id)
				ctrl, err := newController()
				if err != nil {
					klog.ErrorS(err, "Controller not built")
					klog.Flush()
					os.Exit(1)
				}
				if err := ctrl.Run(ctx); err != nil && stop.Err() == nil {
					klog.ErrorS(err, "Controller stopped")
					os.Exit(1)
				}
			},
			OnStoppedLeading: func() {
				if stop.Err() != nil {
					klog.InfoS("Leadership released", "identity", id)
					return
				}
				klog.InfoS("Leadership lost; exiting", "identity", id)
				klog.Flush()
				os.Exit(0)
			},
		},
	}
	if watchdog != nil {
		lec.WatchDog = watchdog
	}
	return leaderelection.NewLeaderElector(lec)
}

// parsePoolKubeletDirs reads --pool-kubelet-dir values, "<label
// selector>:<dir>" (neither label keys nor values contain a colon).
func parsePoolKubeletDirs(values []string) ([]controller.PoolKubeletDir, error) {
	var out []controller.PoolKubeletDir
	for _, v := range values {
		sel, dir, ok := strings.Cut(v, ":")
		if !ok {
			return nil, fmt.Errorf("--pool-kubelet-dir %q: want <label selector>:<dir>", v)
		}
		selector, err := labels.Parse(sel)
		if err != nil || selector.Empty() {
			return nil, fmt.Errorf("--pool-kubelet-dir %q: label selector %q: want a non-empty selector (%v)", v, sel, err)
		}
		if err := protocol.CheckKubeletDir(dir); err != nil {
			return nil, fmt.Errorf("--pool-kubelet-dir %q: %w", v, err)
		}
		out = append(out, controller.PoolKubeletDir{Selector: selector, Dir: dir})
	}
	return out, nil
}
