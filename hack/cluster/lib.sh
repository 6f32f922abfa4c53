# lib.sh - settings and helpers shared by the cluster scripts (sourced, not run).
#
# The layout is a contract other scripts and tests rely on; change it only together with them:
#   $PAV_CACHE/kube-<version>/kube   multi-call Kubernetes binary (kept across clones and purges)
#   /var/lib/pav-cluster/kube-version the Kubernetes version the cluster state was made with
#   /var/lib/pav-cluster             cluster state: pki/, *.kubeconfig, etcd/, logs/, pids/, nodes/
#   /var/lib/pav-cluster/kubeconfig  admin kubeconfig (server https://10.201.0.1:6443)
#   /var/lib/pav-cluster/nodes.tsv   the nodes, one per line after a "#" header line, tab-separated:
#       name          pav-node<i> (i = 1..NODES)
#       ip            10.201.0.<i>
#       netns         network namespace: pavcluster (node 1, shared with the control plane), pavnode<i>
#       mntns         mount namespace file, /run/pav-cluster/mntns/node<i>; "-" for node 1 (the host's)
#       kubelet_root  /var/lib/kubelet; /var/lib/k0s/kubelet on node 3 (as k0s has it), which also
#                     carries label and NoSchedule taint $ALT_ROOT_LABEL
#       pod_cidr      10.244.<i-1>.0/24
#       containerd    the node's containerd socket, as the host's mount namespace reaches it; inside
#                     the node's own it is /run/containerd/containerd.sock, as on a real machine
#                     (where PaV's node plugin finds it): for node 1 that is its path (unless this
#                     machine runs a containerd of its own there: then node 1's is under run/ below),
#                     for the others their run/containerd/ below, which their mount namespace has at
#                     /run/containerd
#       var_lib       where the node's /var/lib is in the host's mount namespace: /var/lib for
#                     node 1; /var/lib/pav-cluster/nodes/node<i>/var-lib for the others (mounts made
#                     by the node, e.g. under its kubelet root, are only visible inside its mntns)
#   /var/lib/pav-cluster/nodes/node<i>/  per node: containerd/ (root), run/ (containerd state and
#                                    socket, runc state), cni/, configs, var-lib/ (nodes >= 2)
#   /var/lib/pav-cluster/logs/node<i>/  per node: containerd, kubelet, kube-proxy logs; pods/
#   /var/lib/kubelet                 node 1's kubelet root dir (the standard one, the host's)
#   netns pavcluster                 control plane and node 1, bridge pavbr0 (10.201.0.1/24) that
#                                    every other node's eth0 (a veth) is plugged into
# PAV_CLUSTER=2 selects a second local cluster, made like the first under its own names:
#   /var/lib/pav-cluster2, netns pavcluster2 and pav2node<i>, cgroups pav2-node<i>,
#   /run/pav-cluster2/mntns, lock /tmp/pav-e2e2.lock.
# No node of it is this machine: node 1 too has its own mount namespace, cgroup and containerd,
# as nodes >= 2 have. Its addresses are the first's: each cluster is its own network namespace.
# `make test` runs the original PaV's system tests, which install and uninstall PaV, on a
# one-node second cluster while the main one runs the e2e tests.
# Inside node i's mount namespace (i >= 2) /var/lib is var-lib/ above (with the host's
# /var/lib/pav-cluster bound back in) and /run/containerd is its own: every node has its own
# /var/lib/kubelet, /var/lib/cni and e.g. /var/lib/pav-examples. Enter a node with
# hack/cluster/node-exec NODE CMD...
PAV_CACHE=${PAV_CACHE:-/var/cache/pav}
HACK_CLUSTER=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KBUILD=$HACK_CLUSTER/kbuild
# KUBE_VERSION: one of the releases in kbuild/versions (default: the newest). Supported: the three
# newest minor releases; `make test` runs the newest, `make test-matrix` the oldest and the newest.
KUBE_VERSIONS=$(ls "$KBUILD/versions" | sed -n 's/\.mod$//p' | sort -V | xargs)
# Restarting part of a running cluster (up.sh --node/--control-plane, node.sh) keeps its release:
# those scripts call use_running_kube_version, which only acts if KUBE_VERSION was not given.
KUBE_VERSION_GIVEN=${KUBE_VERSION:+1}
KUBE_VERSION=${KUBE_VERSION:-${KUBE_VERSIONS##* }}
case " $KUBE_VERSIONS " in *" $KUBE_VERSION "*) ;; *) echo "KUBE_VERSION=$KUBE_VERSION is not one of: $KUBE_VERSIONS" >&2; exit 1;; esac
KUBE_DIR=$PAV_CACHE/kube-$KUBE_VERSION
KUBE_BIN=$KUBE_DIR/kube

case ${PAV_CLUSTER:-} in ""|2) ;; *) echo "PAV_CLUSTER=$PAV_CLUSTER: the local clusters are the main one (unset) and 2" >&2; exit 1 ;; esac
CLUSTER_SUFFIX=${PAV_CLUSTER:-}
# HOST_NODE: the node that is this machine (its mount namespace, /var/lib/kubelet, the machine's
# containerd socket and /kubepods cgroup): node 1 of the main cluster, none of the second.
HOST_NODE=1
[ -z "$CLUSTER_SUFFIX" ] || HOST_NODE=""
STATE=/var/lib/pav-cluster$CLUSTER_SUFFIX
# E2E_LOCK: held by whatever uses the cluster (tests, loading images, bringing it up or down)
E2E_LOCK=/tmp/pav-e2e$CLUSTER_SUFFIX.lock
# use_running_kube_version: unless the caller set KUBE_VERSION, use the release the running
# cluster was made with (a v1.35 cluster's kubelet must not come back as v1.37's).
use_running_kube_version() {
  [ -z "$KUBE_VERSION_GIVEN" ] && [ -f "$STATE/kube-version" ] || return 0
  KUBE_VERSION=$(cat "$STATE/kube-version")
  KUBE_DIR=$PAV_CACHE/kube-$KUBE_VERSION
  KUBE_BIN=$KUBE_DIR/kube
}

PKI=$STATE/pki
LOGS=$STATE/logs
PIDS=$STATE/pids
KUBECONFIG_ADMIN=$STATE/kubeconfig
KUBELET_ROOT=/var/lib/kubelet
# containerd 1.6 hardcodes its shim sockets under /run/containerd/s whatever its state dir
SHIM_DIR=/run/containerd

NETNS=pavcluster$CLUSTER_SUFFIX
NSPATH=/run/netns/$NETNS
BRIDGE=pavbr0               # in netns pavcluster: node 1's address, every other node's veth
API_IP=10.201.0.1           # node 1's IP, on $BRIDGE
NODE_GW=10.201.0.254        # never exists; components that look for a default route find one
SVC_CIDR=10.96.0.0/16
SVC_IP=10.96.0.1
CLUSTER_CIDR=10.244.0.0/16  # node i's pods: 10.244.<i-1>.0/24
API_SERVER=https://$API_IP:6443
PAUSE_IMAGE=registry.k8s.io/pause:3.10
# The cluster's OCI registry (Debian's docker-registry, CNCF Distribution 2.8; up.sh registry):
# HTTPS on node 1's address in netns pavcluster, so every node's containerd reaches it as it
# reaches the API server; its certificate is signed by $REGISTRY_CA, which the nodes' containerd
# trust for this host only (certs.d/$REGISTRY/hosts.toml). Storage under $STATE/registry.
REGISTRY=$API_IP:5000
REGISTRY_CA=$STATE/pki/registry-ca.crt

# NODES: how many nodes up.sh brings up (1-9, default 3). Every other script acts on the nodes
# the running cluster has (nodes.tsv).
NODES=${NODES:-3}
case $NODES in [1-9]) ;; *) echo "NODES=$NODES: the local cluster has 1 to 9 nodes" >&2; exit 1 ;; esac
NODES_TSV=$STATE/nodes.tsv
NODES_DIR=$STATE/nodes
MNTNS_DIR=/run/pav-cluster$CLUSTER_SUFFIX/mntns
# Node 3 runs its kubelet with k0s's root dir, so that PaV's --kubelet-dir is exercised; the
# label and NoSchedule taint (key=value) keep pods made for the default root off it.
ALT_KUBELET_ROOT=/var/lib/k0s/kubelet
ALT_ROOT_LABEL=pav-cluster.local/kubelet-root=k0s
ALT_ROOT_NODE=3

# node_vars I: set the NODE_* variables to node I's settings (the layout above).
node_vars() {
  local i=$1
  NODE_I=$i
  NODE_NAME=pav-node$i
  NODE_IP=10.201.0.$i
  NODE_POD_CIDR=10.244.$((i - 1)).0/24
  NODE_DIR=$NODES_DIR/node$i
  NODE_LOGS=$LOGS/node$i
  NODE_PIDS=$PIDS/node$i
  NODE_SOCK=$NODE_DIR/run/containerd/containerd.sock
  # the host node: where a machine's containerd listens, unless another containerd does (up.sh node1_socket)
  [ "$i" = "$HOST_NODE" ] && [ ! -e "$NODE_DIR/private-socket" ] && NODE_SOCK=$SHIM_DIR/containerd.sock
  NODE_KUBELET_ROOT=$KUBELET_ROOT
  [ "$i" = "$ALT_ROOT_NODE" ] && NODE_KUBELET_ROOT=$ALT_KUBELET_ROOT
  # node 1 shares the control plane's netns
  NODE_NETNS=pav${CLUSTER_SUFFIX}node$i
  [ "$i" = 1 ] && NODE_NETNS=$NETNS
  # NODE_CGROUP: the cgroup its kubelet puts its pods under ("" for the host node's /kubepods)
  if [ "$i" = "$HOST_NODE" ]; then
    NODE_MNTNS=- NODE_VAR_LIB=/var/lib NODE_CGROUP=""
  else
    NODE_MNTNS=$MNTNS_DIR/node$i NODE_VAR_LIB=$NODE_DIR/var-lib NODE_CGROUP=pav$CLUSTER_SUFFIX-node$i
  fi
  NODE_NSENTER=(nsenter --net="/run/netns/$NODE_NETNS")
  [ "$NODE_MNTNS" = - ] || NODE_NSENTER+=(--mount="$NODE_MNTNS")
}
# node_is_host: the node of node_vars is this machine (HOST_NODE)
node_is_host() { [ "$NODE_MNTNS" = - ]; }
# nodex CMD...: run CMD in the namespaces of the node of node_vars (cwd: / for nodes >= 2)
nodex() { "${NODE_NSENTER[@]}" "$@"; }

# cluster_nodes: the numbers of the running cluster's nodes (nodes.tsv), one per line.
cluster_nodes() { [ -f "$NODES_TSV" ] && awk -F'\t' '!/^#/ { sub(/^pav-node/, "", $1); print $1 }' "$NODES_TSV"; return 0; }
# node_number NODE: the number of node NODE (pav-node2, node2 or 2), or fail.
node_number() {
  local n=${1#pav-}; n=${n#node}
  case $n in [1-9]) ;; *) echo "no such node: $1 (pav-node1 ... pav-node9)" >&2; return 1 ;; esac
  cluster_nodes | grep -qx "$n" || { echo "node $1 is not in the cluster ($NODES_TSV: $(cluster_nodes | xargs))" >&2; return 1; }
  echo "$n"
}

# Debian packages the cluster needs on the host.
HOST_PKGS="docker-registry containerd runc containernetworking-plugins etcd-server etcd-client busybox-static iptables conntrack openssl curl util-linux iproute2 kmod openssh-client"

T0=${T0:-$(date +%s.%N)}; export T0   # scripts run by scripts count from the same start
step() { printf '[%6.1fs] %s\n' "$(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN{print a-b}')" "$*"; }
nsx() { nsenter --net="$NSPATH" "$@"; }
KC() { nsx "$KUBE_DIR/kubectl" --kubeconfig="$KUBECONFIG_ADMIN" "$@"; }

# ---------------------------------------------------------------- processes
# Every component runs detached (setsid) with its pid in a file under $PIDS and its output
# appended to a log under $LOGS.
# running PIDFILE: its process exists and is not a zombie (a component that exited and was not
# reaped yet still answers kill -0), and it is still that component: PIDFILE is named after
# the binary (kubelet.pid), and after a machine restart its number may belong to another
# process or even to a thread (/proc/TID answers too; seen: a stale kubelet.pid naming a
# thread of the new kube-apiserver, so that node's kubelet was never started).
# (Builtins only: a fork costs ~50 ms here.)
running() {
  local pid comm st k v want=${1##*/}
  want=${want%.pid}
  { read -r pid < "$1"; } 2>/dev/null && [ -n "$pid" ] &&
    { read -r pid comm st _ < "/proc/$pid/stat"; } 2>/dev/null && [ "$st" != Z ] || return 1
  # sh and nsenter: the moments between start_proc's pid file and its exec of the binary.
  case $comm in "(${want:0:15})"|"(sh)"|"(nsenter)") ;; *) return 1 ;; esac
  while read -r k v; do [ "$k" = Tgid: ] && { [ "$v" = "$pid" ]; return; }; done < "/proc/$pid/status"
  return 1
}
# start_proc NAME PIDFILE LOGFILE CMD...: start CMD unless PIDFILE's process runs.
start_proc() {
  local name=$1 pidf=$2 log=$3; shift 3
  if running "$pidf"; then echo "  $name already running (pid $(cat "$pidf"))"; return 0; fi
  rm -f "$pidf"
  mkdir -p "${pidf%/*}" "${log%/*}"
  # Descriptors 3-9 are closed: a daemon must not keep a caller's lock ($E2E_LOCK) held.
  setsid -f sh -c 'echo $$ > "$0"; exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- "$@"' "$pidf" "$@" >>"$log" 2>&1 </dev/null
  local i; for i in $(seq 50); do [ -s "$pidf" ] && break; sleep 0.1; done
  echo "  started $name pid $(cat "$pidf")"
}
# stop_proc NAME PIDFILE [GRACE]: SIGTERM, SIGKILL after GRACE seconds (default 15).
stop_proc() {
  local n=$1 pidf=$2 g=${3:-15} p i
  [ -f "$pidf" ] || return 0
  p=$(cat "$pidf")
  if running "$pidf"; then  # not a stale number another process now has
    kill -TERM "$p" 2>/dev/null
    for i in $(seq $((g * 10))); do running "$pidf" || break; sleep 0.1; done
    if running "$pidf"; then echo "  $n did not stop in ${g}s: SIGKILL"; kill -KILL "$p" 2>/dev/null; fi
    wait_exited "$p"
    echo "  stopped $n ($p)"
  fi
  rm -f "$pidf"
}
# wait_exited PID: until PID and all its threads have exited and closed their files (up to 10 s).
# A dying Go process's leader shows as a zombie while its other threads still exit, holding
# listening sockets and open files: "not running" comes before "gone".
wait_exited() {
  local i
  for i in $(seq 100); do
    [ -d "/proc/$1" ] || return 0
    [ "$(awk '$1 == "State:" {print $2}' "/proc/$1/status" 2>/dev/null)" = Z ] && [ -z "$(ls -A "/proc/$1/fd" 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  echo "  process $1 still exiting after 10 s" >&2
}
waitfor() { # desc timeout-seconds cmd...
  local d=$1 t=$2 i; shift 2
  for i in $(seq $((t * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "TIMEOUT waiting for $d; see $LOGS" >&2; return 1
}

# kube_source_hash: hash of the cluster binaries' sources (not cmd/e2e-storage, ensure_e2e's); the
# cached binary is rebuilt when it changes.
kube_source_hash() {
  (cd "$KBUILD" && { find cmd/kube cmd/crilite -type f -name '*.go'; echo build.sh "versions/$KUBE_VERSION.mod" "versions/$KUBE_VERSION.sum"; } | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
}

# ensure_host_pkgs: install missing Debian packages (apt-get update first, once).
ensure_host_pkgs() {
  local need="" p have
  # dpkg-query exits 1 when a package was never installed: on a new machine, most of them
  have=" $(dpkg-query -W -f='${db:Status-Status}:${Package} ' $HOST_PKGS "$@" 2>/dev/null || true) "
  for p in $HOST_PKGS "$@"; do case $have in *" installed:$p "*) ;; *) need="$need $p" ;; esac; done
  [ -z "$need" ] && return 0
  step "apt-get install$need"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
}

# ensure_kube: build the multi-call binary into $KUBE_DIR unless an up-to-date one is cached.
ensure_kube() {
  local h; h=$(kube_source_hash)
  if [ -x "$KUBE_BIN" ] && [ -x "$KUBE_DIR/crilite" ] && [ "$(cat "$KUBE_DIR/.source-hash" 2>/dev/null)" = "$h" ]; then
    :
  else
    command -v go >/dev/null || { echo "go is needed to build Kubernetes $KUBE_VERSION" >&2; return 1; }
    step "building Kubernetes $KUBE_VERSION into $KUBE_DIR (cold: ~5 min, warm Go cache: ~30 s)"
    mkdir -p "$KUBE_DIR"
    # serialize concurrent builds (e.g. integration tests and cluster-up started together)
    ( flock 9; "$KBUILD/build.sh" "$KUBE_VERSION" "$KUBE_DIR" && echo "$h" > "$KUBE_DIR/.source-hash" ) 9>"$PAV_CACHE/.kube-build.lock"
  fi
  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
    [ "$(readlink "$KUBE_DIR/$c" 2>/dev/null)" = kube ] || ln -sfn kube "$KUBE_DIR/$c"
  done
}

# Kubernetes' end-to-end test binary e2e.test, agnhost and the ginkgo CLI of KUBE_VERSION (the
# storage conformance suite, `make test-conformance`), built from the Go module proxy by
# kbuild/build-e2e.sh.
# ensure_e2e: build them into $E2E_DIR ($PAV_CACHE/e2e-<version>) unless up-to-date ones are
# cached (cold: ~10 min).
ensure_e2e() {
  E2E_DIR=$PAV_CACHE/e2e-$KUBE_VERSION
  local h; h=$(cd "$KBUILD" && cat build-e2e.sh cmd/e2e-storage/*.go "e2e/$KUBE_VERSION.mod" "e2e/$KUBE_VERSION.sum" ginkgo/go.mod ginkgo/go.sum | sha256sum | cut -c1-16)
  [ -x "$E2E_DIR/e2e.test" ] && [ -x "$E2E_DIR/agnhost" ] && [ -x "$E2E_DIR/ginkgo" ] && [ "$(cat "$E2E_DIR/.source-hash" 2>/dev/null)" = "$h" ] && return 0
  command -v go >/dev/null || { echo "go is needed to build Kubernetes' e2e.test" >&2; return 1; }
  step "building Kubernetes $KUBE_VERSION's e2e.test, agnhost and ginkgo into $E2E_DIR (cold: ~10 min)"
  mkdir -p "$E2E_DIR"
  ( flock 9; "$KBUILD/build-e2e.sh" "$KUBE_VERSION" "$E2E_DIR" && echo "$h" > "$E2E_DIR/.source-hash" ) 9>"$PAV_CACHE/.e2e-build.lock"
}

# The snapshot-controller of kubernetes-csi/external-snapshotter (VolumeSnapshots; PaV plays the
# csi-snapshotter sidecar for its provisioners), built from the Go module proxy with the module
# file in kbuild/snapshotter, and the snapshot CRDs of the same release (third_party/external-snapshotter).
SNAPSHOT_DIR=$PAV_CACHE/snapshot-controller
SNAPSHOT_BIN=$SNAPSHOT_DIR/snapshot-controller
SNAPSHOT_CRDS=$HACK_CLUSTER/../../third_party/external-snapshotter/crds
# ensure_snapshot_controller: build it into $SNAPSHOT_DIR unless an up-to-date one is cached.
ensure_snapshot_controller() {
  local h; h=$(cd "$KBUILD/snapshotter" && cat go.mod go.sum | sha256sum | cut -c1-16)
  [ -x "$SNAPSHOT_BIN" ] && [ "$(cat "$SNAPSHOT_DIR/.source-hash" 2>/dev/null)" = "$h" ] && return 0
  command -v go >/dev/null || { echo "go is needed to build the snapshot-controller" >&2; return 1; }
  step "building the snapshot-controller into $SNAPSHOT_DIR (cold: ~5 min)"
  mkdir -p "$SNAPSHOT_DIR"
  ( flock 9
    cd "$KBUILD/snapshotter" &&
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$SNAPSHOT_BIN.tmp" github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller &&
    mv -f "$SNAPSHOT_BIN.tmp" "$SNAPSHOT_BIN" && echo "$h" > "$SNAPSHOT_DIR/.source-hash"
  ) 9>"$PAV_CACHE/.snapshot-build.lock"
}

# ensure_crane: print the path of go-containerregistry's crane (pushes OCI layouts to a registry,
# reads digests), built into $PAV_CACHE/tools once (~2 min).
CRANE_VERSION=v0.22.1
ensure_crane() {
  local d=$PAV_CACHE/tools/crane-$CRANE_VERSION
  if [ ! -x "$d/crane" ]; then
    echo "building crane $CRANE_VERSION into $d" >&2
    GOBIN=$d CGO_ENABLED=0 go install -trimpath -ldflags '-s -w' "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION" >&2
  fi
  echo "$d/crane"
}

# ensure_cosign: print the path of sigstore's cosign (signs and verifies release images), built
# into $PAV_CACHE/tools once (~19 min on 2 cores sharing the machine, 217 modules, 98 MB).
COSIGN_VERSION=v2.6.5
ensure_cosign() {
  local d=$PAV_CACHE/tools/cosign-$COSIGN_VERSION
  if [ ! -x "$d/cosign" ]; then
    echo "building cosign $COSIGN_VERSION into $d (~19 min the first time)" >&2
    GOBIN=$d CGO_ENABLED=0 go install -trimpath -ldflags '-s -w' "github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION" >&2
  fi
  echo "$d/cosign"
}

# ensure_yq: print the path of mikefarah's yq (v4 syntax; Debian's yq is another program),
# built into $PAV_CACHE/tools once.
YQ_VERSION=v4.54.2
ensure_yq() {
  local d=$PAV_CACHE/tools/yq-$YQ_VERSION
  if [ ! -x "$d/yq" ]; then
    echo "building yq $YQ_VERSION into $d" >&2
    GOBIN=$d CGO_ENABLED=0 go install "github.com/mikefarah/yq/v4@$YQ_VERSION" >&2
  fi
  echo "$d/yq"
}
