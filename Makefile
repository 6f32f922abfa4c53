# PaV-Go. `make help` lists the targets. Everything that touches the local cluster needs root.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

IMAGE ?= pav:latest
GO ?= go
GOTEST_FLAGS ?=
# flags of the e2e test binaries (built with `go test -c`), e.g. E2E_FLAGS="-test.v -test.run Smoke"
E2E_FLAGS ?= -test.v -test.timeout=60m
export IMAGE

# Only one e2e run, PaV (re)install or cluster up/down/purge may touch the shared cluster at a
# time. Targets take /tmp/pav-e2e.lock themselves (/tmp/pav-e2e2.lock: the second local cluster's,
# PAV_CLUSTER=2, hack/cluster/lib.sh); a caller already holding it sets PAV_E2E_LOCKED=1.
# (-o: the command's children, e.g. the daemons up.sh starts, do not inherit the lock.)
LOCK = $(if $(PAV_E2E_LOCKED),,flock -o /tmp/pav-e2e$(PAV_CLUSTER).lock env PAV_E2E_LOCKED=1)

# packages whose tests carry a build tag
tagged_pkgs = $(sort $(dir $(shell grep -rlE '^//go:build .*\b$(1)\b' --include='*_test.go' . 2>/dev/null | grep -v -e '^./hack/cluster/kbuild/' -e '^./third_party/')))

.PHONY: help
help:
	@grep -E '^[a-z][a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 20

.PHONY: build
build: ## go build ./... and bin/pav, stamped with VERSION (default: this commit's v* tag, else dev) and the commit (hack/version.sh)
	$(GO) build ./...
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$$(hack/version.sh)" -o bin/pav ./cmd/pav

.PHONY: vet
vet: ## go vet ./...
	$(GO) vet ./...

.PHONY: generate verify-generated verify-chart manifests
generate: ## deep copies, clientset, lister (k8s.io/code-generator), third_party/leaderelection from client-go, the CRD (controller-gen) from crds/v1alpha1, and deployment.yaml (make manifests)
	hack/generate.sh
verify-generated: ## fail if `make generate` would change anything (part of `make test`)
	hack/verify-generated.sh
manifests: ## deployment.yaml: the Helm chart's default rendering with its CRD and Namespace (hack/manifests.sh, the real helm from hack/ensure-helm.sh)
	hack/manifests.sh
verify-chart: ## the Helm chart charts/pav with the real helm (hack/ensure-helm.sh): lint, schema, deployment.yaml is its rendering, values (part of `make test`; no cluster)
	PAV_HELM=$$(hack/ensure-helm.sh) $(GO) test -count=1 -v ./charts/

# ---------------------------------------------------------------- local cluster
# NODES: nodes of the local cluster (1-9). Node 1 shares the control plane's netns and this
# machine's mount namespace; every other node has its own of both; node 3 has k0s's kubelet root.
# PAV_CLUSTER=2: the cluster targets (and e2e, test-upstream, deploy-only) act on a second local
# cluster, where no node is this machine (hack/cluster/lib.sh); `make test` runs test-upstream there.
NODES ?= 3
export NODES
.PHONY: cluster-up cluster-down cluster-purge
cluster-up: ## start the local cluster, a control plane and NODES nodes (default 3; idempotent; builds Kubernetes once into $PAV_CACHE)
	$(LOCK) env NODES=$(NODES) hack/cluster/up.sh
cluster-down: ## stop the cluster; leaves no process, mount, cgroup, namespace or interface behind
	$(LOCK) hack/cluster/down.sh
cluster-purge: ## cluster-down and wipe its state (/var/lib/pav-cluster, /var/lib/kubelet)
	$(LOCK) hack/cluster/down.sh --purge

# ---------------------------------------------------------------- images
.PHONY: images cluster-load image
images: ## build the pause, test and PaV images as OCI tarballs in _output/images (no Docker)
	hack/images/build.sh all
cluster-load: ## import _output/images/*.tar (LOAD_IMAGES: only those, e.g. "pav test") into the containerd of every node
	$(LOCK) hack/cluster/load-images.sh $(LOAD_IMAGES)
image: ## build the PaV image with Docker (same contents as `make images`' pav.tar)
	docker build -t $(IMAGE) --build-arg VERSION_LDFLAGS="$$(hack/version.sh)" .

# ---------------------------------------------------------------- release
.PHONY: release release-push test-release
release: ## the release artefacts of VERSION=vX.Y.Z in _output/release/VERSION: pav for linux/amd64 and arm64, the two-platform image archive with its SBOM, the chart, deployment.yaml pinned to it, checksums (hack/release.sh; needs CHANGELOG.md's section for VERSION)
	hack/release.sh $(VERSION)
release-push: ## push release VERSION to REGISTRY (default the local cluster's, 10.201.0.1:5000): the two-platform image by digest (crane), the chart (helm push oci://), with EXAMPLES=1 hello-world's image (hack/release-push.sh)
	hack/release-push.sh $(VERSION) $(REGISTRY)
# The release that `make test-release` builds from this tree when VERSION is not given (a
# pre-release: its notes are CHANGELOG.md's Unreleased section), and the release it upgrades from.
RELEASE_TEST_VERSION ?= v0.4.0-dev
PREVIOUS_RELEASE ?= $(shell awk '!/^\#/ && NF { v = $$1 } END { print v }' hack/releases.tsv)
test-release: ## make release, push it to the local cluster's registry, install it from there alone with helm install oci:// and with the pinned manifest (nodes pull by digest), run hello-world each time (hack/release-test.sh); then upgrade from the previous release (hack/releases.tsv, built once from its commit) with a writing client and roll back (hack/upgrade-test.sh; not part of `make test`)
	$(MAKE) release VERSION=$(or $(VERSION),$(RELEASE_TEST_VERSION))
	hack/images/build.sh test
	$(MAKE) release-push VERSION=$(or $(VERSION),$(RELEASE_TEST_VERSION)) REGISTRY= EXAMPLES=1
	previous=$$(hack/previous-release.sh $(PREVIOUS_RELEASE)) && RELEASE_DIR=$$previous hack/release-push.sh $(PREVIOUS_RELEASE)
	$(LOCK) hack/release-test.sh $(or $(VERSION),$(RELEASE_TEST_VERSION))
	$(LOCK) hack/upgrade-test.sh $(PREVIOUS_RELEASE) $(or $(VERSION),$(RELEASE_TEST_VERSION))

# ---------------------------------------------------------------- install on the local cluster
KUBECTL ?= hack/cluster/kubectl
.PHONY: deploy undeploy
deploy: ## build and load the images, install deployment.yaml with $(IMAGE), wait until PaV runs
	$(MAKE) images cluster-load
	$(MAKE) deploy-only
.PHONY: deploy-only
deploy-only: ## install deployment.yaml with $(IMAGE) (images already loaded), restart PaV and wait (hack/deploy.sh); on the local cluster also node 3's node plugin (hack/cluster/kubelet-root-pool.sh)
	$(LOCK) env KUBECTL='$(KUBECTL)' sh -c 'hack/deploy.sh $(if $(filter hack/cluster/kubectl,$(KUBECTL)),&& hack/cluster/kubelet-root-pool.sh)'
undeploy: ## uninstall as the spec says: CRD first (waits up to 3 min for PavProvisioners to go), then the rest
	$(LOCK) sh -c '$(KUBECTL) delete --ignore-not-found --timeout=180s crd pavprovisioners.pav.albertofaria.github.io && $(KUBECTL) delete --ignore-not-found --timeout=180s -f deployment.yaml'

# ---------------------------------------------------------------- examples
.PHONY: examples-images demo
examples-images: ## build the examples' images (Debian packages, versitygw) into _output/images; then make cluster-load
	hack/images/examples.sh
demo: ## bring the local cluster up if none is reachable, install PaV, run examples/hello-world, print what it read
	hack/demo.sh

# ---------------------------------------------------------------- tests
.PHONY: test test-unit test-integration e2e e2e-slow test-upstream test-helm
# E2E_IMAGES: image targets `make test` builds before loading them into the cluster
E2E_IMAGES ?= images examples-images
# with three nodes or more the multi-node e2e tests must run (they skip on a smaller cluster)
MULTINODE = $(if $(filter-out 1 2,$(NODES)),PAV_E2E_MULTINODE=1)
# make test's cluster: three nodes (node 3 with k0s's kubelet root), so the multi-node e2e
# tests run; `make test TEST_NODES=1` for a quicker single-node run without them.
TEST_NODES ?= 3
test: NODES = $(TEST_NODES)
test: ## generated files up to date, the Helm chart (verify-chart), unit, integration, e2e, a subset of the storage conformance suite (test-conformance-quick), the Helm test, the original PaV's system tests (on a second, one-node cluster), then a short chaos soak (brings the clusters up, the main one with TEST_NODES nodes, default 3, loads images, installs PaV)
	$(MAKE) verify-generated
	$(MAKE) verify-chart
	# On CI the clusters start empty: a run must not inherit what an earlier one left.
	$(if $(CI),$(LOCK) hack/cluster/down.sh --purge)
	$(if $(CI),PAV_CLUSTER=2 $(MAKE) cluster-purge)
	$(LOCK) env NODES=$(NODES) hack/cluster/up.sh
	PAV_CLUSTER=2 $(MAKE) cluster-up NODES=1
	$(MAKE) $(E2E_IMAGES)
	$(MAKE) cluster-load
	# (the original PaV's tests run PaV and the test image's alpine and ubuntu)
	PAV_CLUSTER=2 $(MAKE) cluster-load LOAD_IMAGES="pav test"
	# Three at once, as they need different things: the unit and integration
	# tests the CPU; the original PaV's system tests, which install and
	# uninstall PaV and mostly wait (6 min in their own sleeps), a cluster of
	# their own (the second); the Helm test, e2e and the conformance subset the
	# main cluster. The first two's output is kept until all three ended.
	# After the unit tests, Kubernetes' e2e.test for the conformance subset is
	# built there (cached; on a cold machine ~2 min off the main cluster's path).
	mkdir -p _output
	{ $(MAKE) test-unit test-integration; rc=$$?; hack/cluster/ensure-e2e.sh; exit $$rc; } > _output/test-unit.log 2>&1 & unit=$$!; \
	  PAV_CLUSTER=2 $(MAKE) test-upstream > _output/test-upstream.log 2>&1 & upstream=$$!; \
	  $(MAKE) test-helm && $(MAKE) e2e $(MULTINODE) && $(MAKE) test-conformance-quick; main=$$?; \
	  wait $$unit; unit=$$?; wait $$upstream; upstream=$$?; \
	  echo "==== make test-unit test-integration (ran beside the tests on the clusters)"; cat _output/test-unit.log; \
	  echo "==== PAV_CLUSTER=2 make test-upstream (ran on the second cluster beside the main one's tests)"; cat _output/test-upstream.log; \
	  [ $$main = 0 ] && [ $$unit = 0 ] && [ $$upstream = 0 ]
	# Last: the soak crashes kube-apiserver, and clients that saw it refuse
	# them meanwhile (RBAC not loaded yet) back off for up to 30 s (kube-proxy
	# then routes new Services late).
	$(MAKE) soak SOAK_CYCLES=$(TEST_SOAK_CYCLES)

test-upstream: ## the original PaV's system tests (test/upstream) on the local cluster (PAV_CLUSTER=2: the second), each with its own install and uninstall of PaV; PaV is installed again after
	$(LOCK) sh -c '$(MAKE) undeploy && hack/cluster/upstream-tests.sh; rc=$$?; $(MAKE) deploy-only && exit $$rc'

test-helm: ## the Helm chart on the local cluster (test/e2e/helm, tag helm): uninstall deployment.yaml, helm install, upgrade with volumes in use, uninstall; PaV is installed again after (REINSTALL=0: not)
	hack/ensure-helm.sh >/dev/null
	$(LOCK) sh -c '$(MAKE) undeploy && PAV_HELM=$$(hack/ensure-helm.sh) E2E_PKGS=./test/e2e/helm E2E_TAGS=helm hack/cluster/e2e.sh $(E2E_FLAGS); rc=$$?; $(if $(filter 0,$(REINSTALL)),,$(MAKE) deploy-only && )exit $$rc'

# Supported Kubernetes releases (hack/cluster/kbuild/versions); `make test` runs the newest.
KUBE_VERSIONS := $(shell ls hack/cluster/kbuild/versions | sed -n 's/\.mod$$//p' | sort -V)
.PHONY: test-matrix
test-matrix: ## the e2e suite on the oldest, then the newest supported Kubernetes, NODES nodes (purges the local cluster between them)
	set -e; for v in $(firstword $(KUBE_VERSIONS)) $(lastword $(KUBE_VERSIONS)); do \
	  echo "==== e2e on Kubernetes $$v, $(NODES) node(s)"; \
	  $(LOCK) env NODES=$(NODES) KUBE_VERSION=$$v hack/cluster/up.sh; \
	  $(MAKE) $(E2E_IMAGES); KUBE_VERSION=$$v $(MAKE) cluster-load; \
	  KUBE_VERSION=$$v $(MAKE) deploy-only; KUBE_VERSION=$$v $(MAKE) e2e $(MULTINODE); \
	done

# The chaos soak (test/soak, tag soak): SOAK_CYCLES lifecycles under faults, SOAK_SEED to replay one.
SOAK_CYCLES ?= 200
TEST_SOAK_CYCLES ?= 12
.PHONY: soak
soak: ## chaos soak on the local cluster (PaV installed): SOAK_CYCLES volume lifecycles (default 200; make test runs 12) while faults are injected, then an audit; report in _output/soak/report.md; SOAK_SEED=N replays a run
	$(LOCK) env SOAK_CYCLES=$(SOAK_CYCLES) $(if $(SOAK_SEED),SOAK_SEED=$(SOAK_SEED)) E2E_PKGS=./test/soak E2E_TAGS=soak hack/cluster/e2e.sh -test.v -test.timeout=180m

test-unit: ## go test ./..., then each fuzz target for TEST_FUZZTIME (default 3000 inputs)
	$(GO) test $(GOTEST_FLAGS) ./...
	$(MAKE) fuzz FUZZTIME=$(TEST_FUZZTIME)

# The fuzz targets, package:target (go test -fuzz takes one of each per run).
FUZZ_TARGETS = ./templating:FuzzValidate ./templating/jinja:FuzzCompileRender ./controller/webhook:FuzzHandler
FUZZTIME ?= 5m
# make test counts inputs instead of time: with a duration, Go 1.26's fuzzing coordinator
# can fail a target that found nothing ("context deadline exceeded" as -fuzztime ends, under
# CPU load: golang/go#75804, fixed in Go 1.27); a count never takes that path.
TEST_FUZZTIME ?= 3000x
.PHONY: fuzz
fuzz: ## each fuzz target (templates, whole provisioners, the webhook handler) for FUZZTIME (default 5m); a failing input lands in the package's testdata/fuzz: keep it there, a seed from then on
	$(foreach t,$(FUZZ_TARGETS),$(GO) test -run '^$$' -fuzz '^$(word 2,$(subst :, ,$(t)))$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s $(word 1,$(subst :, ,$(t))) &&) true

# The Jinja differential tester (templating/jinja TestDifferential): N random templates from SEED,
# rendered by PaV and by real Jinja 3; `make test` runs its default (2,000 templates, seed 1).
N ?= 200000
SEED ?= 1
.PHONY: fuzz-jinja
fuzz-jinja: ## N random templates (default 200000) from SEED (default 1) rendered by PaV and by real Jinja 3 (python3-jinja2, installed if missing), compared; divergences in _output/fuzz-jinja.jsonl
	mkdir -p _output
	PAV_JINJADIFF_N=$(N) PAV_JINJADIFF_SEED=$(SEED) PAV_JINJADIFF_OUT=$(CURDIR)/_output/fuzz-jinja.jsonl \
	  $(GO) test -count=1 -timeout 24h -run '^TestDifferential$$' -v ./templating/jinja/

test-integration: ## tests with build tag `integration` (real etcd + kube-apiserver on loopback)
	hack/cluster/ensure-kube.sh >/dev/null
	$(if $(call tagged_pkgs,integration),PAV_REQUIRE_INTEGRATION=1 $(GO) test -tags integration -v $(GOTEST_FLAGS) $(call tagged_pkgs,integration),@echo "no integration tests")

.PHONY: bench bench-scale
bench: ## benchmarks: Jinja rendering, templating phases, staging latency, then on a real API server a claim burst, the memory of the controller (leader, standby) and node plugin as processes (BenchmarkMemory) and the control plane at scale (BenchmarkControlPlaneScale, ~3 min)
	$(GO) test -run '^$$' -bench . -benchmem ./...
	hack/cluster/ensure-kube.sh >/dev/null
	PAV_REQUIRE_INTEGRATION=1 $(GO) test -tags integration -timeout 30m -run '^$$' -bench . -benchtime 3x ./test/integration/

bench-scale: ## only BenchmarkControlPlaneScale: pav controller with 1,000 nodes and 5,000 claims across 50 provisioners, pav node with 110 staged volumes (~3 min on 2 cores)
	hack/cluster/ensure-kube.sh >/dev/null
	PAV_REQUIRE_INTEGRATION=1 $(GO) test -tags integration -timeout 30m -run '^$$' -bench ControlPlaneScale -benchtime 1x ./test/integration/

# The side-by-side cluster benchmark (test/benchcluster, tag benchcluster). Its CSI anchor's image
# goes to _output/bench/images, out of the way of `make cluster-load`.
BENCH_ANCHOR ?= 1
BENCH_IMAGES := _output/bench/images
.PHONY: bench-cluster
bench-cluster: ## side by side on the local cluster (PaV installed): a plain pod, PaV and a CSI anchor (external-provisioner v5.3.0 + hack/csianchor's driver; BENCH_ANCHOR=0 leaves it out); BENCH_SAMPLES (30), BENCH_BURST (100), BENCH_PROVISIONERS (20); prints a table, writes _output/bench/cluster.json
	$(if $(filter 0,$(BENCH_ANCHOR)),,IMAGES_DIR=$(BENCH_IMAGES) hack/images/build.sh csi-anchor)
	$(LOCK) env BENCH_ANCHOR=$(BENCH_ANCHOR) $(foreach v,BENCH_SAMPLES BENCH_BURST BENCH_PROVISIONERS,$(if $($(v)),$(v)=$($(v)))) sh -c '$(if $(filter 0,$(BENCH_ANCHOR)),,hack/cluster/load-images.sh $(BENCH_IMAGES)/csi-anchor.tar && )E2E_PKGS=./test/benchcluster E2E_TAGS=benchcluster hack/cluster/e2e.sh -test.v -test.timeout=90m -test.run TestClusterBenchmark'

e2e: ## build and run the e2e tests (build tag `e2e`) against the running cluster (hack/cluster/e2e.sh)
	hack/cluster/e2e.sh $(E2E_FLAGS)

e2e-slow: ## the slow e2e tests (build tag `e2e_slow`: storage capacity and topology across three nodes, recovery of gocryptfs and Block volumes, a rolling update of stagings, the node plugin killed around a shared staging) against the running three-node cluster; not part of `make test`
	PAV_E2E_MULTINODE=1 E2E_TAGS=e2e_slow hack/cluster/e2e.sh $(E2E_FLAGS)

# ---------------------------------------------------------------- storage conformance
# Kubernetes' storage conformance suite (the "External Storage" tests of test/e2e/storage/external)
# against examples/*/testdriver.yaml: hack/cluster/conformance.sh, results in docs/testing.md.
CONFORMANCE_IMAGES := _output/conformance/images
CONFORMANCE_EXAMPLES ?= $(patsubst examples/%/testdriver.yaml,%,$(wildcard examples/*/testdriver.yaml))
.PHONY: test-conformance conformance-images
conformance-images: ## the images the storage conformance suite runs (agnhost; busybox, also under nginx's and glibc-dns-testing's names) into _output/conformance/images; builds e2e.test once into $PAV_CACHE
	IMAGES_DIR=$(CONFORMANCE_IMAGES) hack/images/build.sh conformance
test-conformance: ## Kubernetes' storage conformance suite (everything not Disruptive or Serial) against each example's testdriver.yaml (CONFORMANCE_EXAMPLES), one after the other, on the local cluster (brought up if needed) with PaV and the example installed; results in _output/conformance/results.md
	$(LOCK) env NODES=$(NODES) hack/cluster/up.sh
	$(MAKE) images conformance-images
	hack/images/examples.sh loop sshfs sshd
	hack/cluster/conformance.sh $(CONFORMANCE_EXAMPLES)
# The subset `make test-conformance-quick` runs: per example a volume written and read by two
# pods, a snapshot restored (host-directory: the snapshot suite; loop-block: a Block claim from a
# snapshot), RWX across nodes (sshfs; the node-local examples skip it).
CONFORMANCE_QUICK_FOCUS := External.Storage.*(volumes should store data|Dynamic Snapshot \(delete policy\)\] snapshottable.*check deletion \(persistent\)|\(block volmode\)\] provisioning should provision storage with snapshot data source \[|multiVolume should concurrently access the single volume from pods on different node)
.PHONY: test-conformance-quick
test-conformance-quick: ## a few tests of test-conformance per example (CONFORMANCE_QUICK_FOCUS) on the running cluster (images built: make images examples-images); results in _output/conformance-quick/results.md
	$(MAKE) conformance-images
	CONFORMANCE_FOCUS='$(CONFORMANCE_QUICK_FOCUS)' CONFORMANCE_OUT=$(CURDIR)/_output/conformance-quick hack/cluster/conformance.sh $(CONFORMANCE_EXAMPLES)
