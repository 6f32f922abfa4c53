#!/bin/bash
# up.sh - bring up the local single-node Kubernetes cluster (see README "Development and tests").
#
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd+runc, CNI bridge,
# kubelet and kube-proxy, all inside the network namespace "pavcluster" (entered with
# `nsenter --net` only, so every component shares the host's mount namespace: hostPath
# volumes and Bidirectional mount propagation behave as on a real node).
#
# Idempotent: what exists or runs already is kept. Host packages come from Debian; the
# Kubernetes binary is built from the Go module proxy once per version into $PAV_CACHE.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { echo "cluster-up must run as root" >&2; exit 1; }
mkdir -p "$STATE" "$PKI" "$LOGS" "$PIDS" "$CTRD_ROOT" "$CTRD_STATE" "$STATE/cni/net.d" "$KUBELET_ROOT"
chmod 700 "$STATE"

# ---------------------------------------------------------------- host packages and binaries
ensure_host_pkgs
ensure_kube
step "binaries ok: $("$KUBE_DIR/kubelet" --version)"

# State made by another Kubernetes release (e.g. after `make test-matrix`) is not reused: an older
# apiserver may not read what a newer one stored. This is a disposable test cluster: start afresh.
if [ -f "$STATE/kube-version" ] && [ "$(cat "$STATE/kube-version")" != "$KUBE_VERSION" ]; then
  step "cluster state is from Kubernetes $(cat "$STATE/kube-version"), switching to $KUBE_VERSION: purging it"
  "$HACK_CLUSTER/down.sh" --purge
  mkdir -p "$STATE" "$PKI" "$LOGS" "$PIDS" "$CTRD_ROOT" "$CTRD_STATE" "$STATE/cni/net.d" "$KUBELET_ROOT"
  chmod 700 "$STATE"
fi
echo "$KUBE_VERSION" > "$STATE/kube-version"

# ---------------------------------------------------------------- network namespace
if [ ! -e "$NSPATH" ]; then
  step "creating netns $NETNS"
  ip netns add "$NETNS"
fi
nsx ip link set lo up
nsx ip link show k8snode0 >/dev/null 2>&1 || nsx ip link add k8snode0 type veth peer name k8snode1
nsx ip addr replace "$NODE_IP/24" dev k8snode0
nsx ip link set k8snode1 up
nsx ip link set k8snode0 up
nsx ip route replace default via "$NODE_GW" dev k8snode0
nsx sysctl -qw net.ipv4.ip_forward=1
modprobe br_netfilter 2>/dev/null || true
nsx sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
step "netns ok ($NSPATH, node ip $NODE_IP)"

# ---------------------------------------------------------------- PKI + kubeconfigs
mkcert() { # name subject eku [san]
  local n=$1 subj=$2 eku=$3 san=${4:-}
  [ -f "$PKI/$n.crt" ] && return 0
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$n.key" -out "$PKI/$n.csr" -subj "$subj" 2>/dev/null
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"; echo "extendedKeyUsage=$eku"
    [ -n "$san" ] && echo "subjectAltName=$san"; } > "$PKI/$n.ext"
  openssl x509 -req -in "$PKI/$n.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
    -out "$PKI/$n.crt" -extfile "$PKI/$n.ext" 2>/dev/null
  rm -f "$PKI/$n.csr" "$PKI/$n.ext"
}
if [ ! -f "$PKI/ca.crt" ]; then
  step "generating PKI"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 -subj "/CN=pav-cluster-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
fi
mkcert apiserver "/CN=kube-apiserver" serverAuth \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP,IP:$SVC_IP"
mkcert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
mkcert admin "/O=system:masters/CN=kubernetes-admin" clientAuth
mkcert controller-manager "/CN=system:kube-controller-manager" clientAuth
mkcert scheduler "/CN=system:kube-scheduler" clientAuth
mkcert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
mkcert kube-proxy "/CN=system:kube-proxy" clientAuth
mkcert kubelet-server "/CN=$NODE_NAME" serverAuth "DNS:$NODE_NAME,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1"
[ -f "$PKI/sa.key" ] || { openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null; openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null; }
mkkc() { # file user certname
  local f=$1
  [ -f "$f" ] && return 0
  cat > "$f.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: pav-cluster
  cluster:
    server: $API_SERVER
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$3.crt")
    client-key-data: $(base64 -w0 "$PKI/$3.key")
contexts:
- name: pav-cluster
  context: {cluster: pav-cluster, user: $2}
current-context: pav-cluster
EOF
  chmod 600 "$f.tmp"; mv "$f.tmp" "$f"
}
mkkc "$KUBECONFIG_ADMIN" kubernetes-admin admin
mkkc "$STATE/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
mkkc "$STATE/scheduler.kubeconfig" system:kube-scheduler scheduler
mkkc "$STATE/kubelet.kubeconfig" "system:node:$NODE_NAME" kubelet-client
mkkc "$STATE/kube-proxy.kubeconfig" system:kube-proxy kube-proxy
step "pki + kubeconfigs ok"

# ---------------------------------------------------------------- process helpers
# running NAME: its process exists and is not a zombie (a component that exited and
# was not reaped yet still answers kill -0).
running() {
  local pid
  pid=$(cat "$PIDS/$1.pid" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}
# write_config FILE < content: replace FILE only if the content differs, so a running
# component is not disturbed (kube-proxy exits when its config file is written).
write_config() {
  local tmp
  tmp=$(mktemp "$1.XXXXXX")
  cat > "$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv -f "$tmp" "$1"; fi
}
start() { # name cmd...  (detached, inside the netns; pid in $PIDS/name.pid, log in $LOGS/name.log)
  local name=$1; shift
  if running "$name"; then echo "  $name already running (pid $(cat "$PIDS/$name.pid"))"; return 0; fi
  rm -f "$PIDS/$name.pid"
  setsid -f sh -c 'echo $$ > "$0"; exec "$@"' "$PIDS/$name.pid" nsenter --net="$NSPATH" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null
  local i; for i in $(seq 50); do [ -s "$PIDS/$name.pid" ] && break; sleep 0.1; done
  echo "  started $name pid $(cat "$PIDS/$name.pid")"
}
waitfor() { # desc timeout-seconds cmd...
  local d=$1 t=$2 i; shift 2
  for i in $(seq $((t * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "TIMEOUT waiting for $d; see $LOGS" >&2; return 1
}

# ---------------------------------------------------------------- etcd
mkdir -p "$STATE/etcd" && chmod 700 "$STATE/etcd"
start etcd /usr/bin/etcd --name pav --data-dir "$STATE/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster pav=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
waitfor etcd 30 nsx curl -sf http://127.0.0.1:2379/health
step "etcd ok ($(etcd --version | head -1))"

# ---------------------------------------------------------------- control plane
start kube-apiserver "$KUBE_DIR/kube-apiserver" \
  --etcd-servers=http://127.0.0.1:2379 \
  --advertise-address="$NODE_IP" --bind-address=0.0.0.0 --secure-port=6443 \
  --service-cluster-ip-range="$SVC_CIDR" \
  --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP,Hostname \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --allow-privileged=true --profiling=false --v=1
waitfor kube-apiserver 120 KC get --raw /readyz
step "kube-apiserver ready"

# --kube-api-qps/burst: the PV binder needs ~6 requests per claim; the default 20 qps caps
# binding at ~4 volumes/s whatever the provisioner does.
start kube-controller-manager "$KUBE_DIR/kube-controller-manager" \
  --kubeconfig="$STATE/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$STATE/controller-manager.kubeconfig" --authorization-kubeconfig="$STATE/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --service-cluster-ip-range="$SVC_CIDR" --kube-api-qps=100 --kube-api-burst=200 --profiling=false --v=1
start kube-scheduler "$KUBE_DIR/kube-scheduler" \
  --kubeconfig="$STATE/scheduler.kubeconfig" \
  --authentication-kubeconfig="$STATE/scheduler.kubeconfig" --authorization-kubeconfig="$STATE/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --leader-elect=false --profiling=false --v=1

# ---------------------------------------------------------------- containerd + CNI
write_config "$STATE/cni/net.d/10-pav-bridge.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "pav-bridge",
  "plugins": [
    { "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": { "type": "host-local", "dataDir": "$STATE/cni/networks",
                "ranges": [[{ "subnet": "$POD_SUBNET" }]], "routes": [{ "dst": "0.0.0.0/0" }] } },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
write_config "$STATE/containerd.toml" <<EOF
version = 2
root = "$CTRD_ROOT"
state = "$CTRD_STATE"
[grpc]
  address = "$SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CTRD_ROOT/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  netns_mounts_under_state_dir = true
  # root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj (sandbox -998) makes runc fail with
  # "can't get final child's PID from pipe: EOF"; clamp to containerd's own oom_score_adj instead
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$STATE/run/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
EOF
start containerd /usr/bin/containerd --config "$STATE/containerd.toml"
waitfor containerd 30 ctr --address "$SOCK" version
step "containerd ok ($(containerd --version | awk '{print $3}'))"

# The pause image must be present before the first pod: there is no registry to pull from.
if ! ctr --address "$SOCK" -n k8s.io images check "name==$PAUSE_IMAGE" 2>/dev/null | grep -q complete; then
  "$HACK_CLUSTER/../images/build.sh" pause >/dev/null
  "$HACK_CLUSTER/load-images.sh" pause
fi

# ---------------------------------------------------------------- kubelet
mkdir -p "$LOGS/pods"
write_config "$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs        # containerd 1.6 cannot report its cgroup driver (RuntimeConfig)
failCgroupV1: false           # this host has cgroup v1 (hybrid); kubelet >= 1.35 refuses it by default
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
address: 0.0.0.0
port: 10250
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet-server.crt
tlsPrivateKeyFile: $PKI/kubelet-server.key
clusterDomain: cluster.local
resolvConf: ""                # no upstream DNS inside the netns; keeps pods from querying the host resolver
podLogsDir: $LOGS/pods
healthzBindAddress: 127.0.0.1
healthzPort: 10248
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100   # images cannot be pulled again: never collect them
imageGCLowThresholdPercent: 99
serializeImagePulls: false
volumeStatsAggPeriod: 10s     # volume usage (NodeGetVolumeStats) every 10 s instead of every minute, for the tests
oomScoreAdj: 0                # no CAP_SYS_RESOURCE here, so the default -999 cannot be applied
EOF
start kubelet "$KUBE_DIR/kubelet" --config="$STATE/kubelet.yaml" --kubeconfig="$STATE/kubelet.kubeconfig" \
  --root-dir="$KUBELET_ROOT" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1

# ---------------------------------------------------------------- kube-proxy (ClusterIP Services, e.g. webhooks)
write_config "$STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $STATE/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: 10.244.0.0/16
hostnameOverride: $NODE_NAME
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}   # nf_conntrack_max is read-only in a netns
EOF
start kube-proxy "$KUBE_DIR/kube-proxy" --config="$STATE/kube-proxy.yaml" --v=1

waitfor "node registration" 120 KC get node "$NODE_NAME"
KC wait --for=condition=Ready "node/$NODE_NAME" --timeout=180s >/dev/null
waitfor "default serviceaccount" 60 KC -n default get serviceaccount default
waitfor kube-proxy 60 nsx curl -sf http://127.0.0.1:10256/healthz
# kubelet bind-mounts its root dir onto itself and makes it rshared; PaV's Bidirectional
# hostPath mounts under $KUBELET_ROOT/plugins depend on it.
waitfor "$KUBELET_ROOT rshared" 30 sh -c "findmnt -n -o PROPAGATION --target '$KUBELET_ROOT' | grep -q shared"
step "node $NODE_NAME Ready; kubeconfig $KUBECONFIG_ADMIN; kubectl: hack/cluster/kubectl"
