# lib.sh - settings shared by the cluster scripts (sourced, not run).
#
# The layout is a contract other scripts and tests rely on; change it only together with them:
#   $PAV_CACHE/kube-<version>/kube   multi-call Kubernetes binary (kept across clones and purges)
#   /var/lib/pav-cluster/kube-version the Kubernetes version the cluster state was made with
#   /var/lib/pav-cluster             cluster state: pki/, *.kubeconfig, etcd/, containerd/, logs/
#   /var/lib/pav-cluster/kubeconfig  admin kubeconfig (server https://10.201.0.1:6443)
#   /var/lib/kubelet                 kubelet root dir (the standard one)
#   netns pavcluster                 network namespace of every component and pod
PAV_CACHE=${PAV_CACHE:-/var/cache/pav}
HACK_CLUSTER=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KBUILD=$HACK_CLUSTER/kbuild
# KUBE_VERSION: one of the releases in kbuild/versions (default: the newest). Supported: the three
# newest minor releases; `make test` runs the newest, `make test-matrix` the oldest and the newest.
KUBE_VERSIONS=$(ls "$KBUILD/versions" | sed -n 's/\.mod$//p' | sort -V | xargs)
KUBE_VERSION=${KUBE_VERSION:-${KUBE_VERSIONS##* }}
case " $KUBE_VERSIONS " in *" $KUBE_VERSION "*) ;; *) echo "KUBE_VERSION=$KUBE_VERSION is not one of: $KUBE_VERSIONS" >&2; exit 1;; esac
KUBE_DIR=$PAV_CACHE/kube-$KUBE_VERSION
KUBE_BIN=$KUBE_DIR/kube

STATE=/var/lib/pav-cluster
PKI=$STATE/pki
LOGS=$STATE/logs
PIDS=$STATE/pids
CTRD_ROOT=$STATE/containerd
CTRD_STATE=$STATE/run/containerd
SOCK=$CTRD_STATE/containerd.sock
KUBECONFIG_ADMIN=$STATE/kubeconfig
KUBELET_ROOT=/var/lib/kubelet
# containerd 1.6 hardcodes its shim sockets under /run/containerd/s whatever its state dir
SHIM_DIR=/run/containerd

NETNS=pavcluster
NSPATH=/run/netns/$NETNS
NODE_NAME=pav-node
NODE_IP=10.201.0.1
NODE_GW=10.201.0.254        # never exists; components that look for a default route find one
POD_SUBNET=10.244.0.0/24
SVC_CIDR=10.96.0.0/16
SVC_IP=10.96.0.1
API_SERVER=https://$NODE_IP:6443
PAUSE_IMAGE=registry.k8s.io/pause:3.10

# Debian packages the cluster needs on the host.
HOST_PKGS="containerd runc containernetworking-plugins etcd-server etcd-client busybox-static iptables conntrack openssl curl util-linux iproute2 kmod"

T0=${T0:-$(date +%s.%N)}
step() { printf '[%6.1fs] %s\n' "$(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN{print a-b}')" "$*"; }
nsx() { nsenter --net="$NSPATH" "$@"; }
KC() { nsx "$KUBE_DIR/kubectl" --kubeconfig="$KUBECONFIG_ADMIN" "$@"; }

# kube_source_hash: hash of the wrapper module's sources; the cached binary is rebuilt when it changes.
kube_source_hash() {
  (cd "$KBUILD" && { find cmd -type f -name '*.go'; echo build.sh "versions/$KUBE_VERSION.mod" "versions/$KUBE_VERSION.sum"; } | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
}

# ensure_host_pkgs: install missing Debian packages (apt-get update first, once).
ensure_host_pkgs() {
  local need="" p
  for p in $HOST_PKGS "$@"; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
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
