#!/bin/bash
# up.sh [--node NODE] - bring up the local Kubernetes cluster (see README "Development and tests"):
# a control plane and $NODES nodes (default 3) on this one machine.
#
# etcd, kube-apiserver, kube-controller-manager and kube-scheduler run in the network namespace
# "pavcluster", together with node 1 (pav-node1: containerd+runc, CNI bridge, kubelet,
# kube-proxy), which keeps the host's mount namespace: its hostPath volumes and Bidirectional
# mount propagation are this machine's. Every other node i runs the same node components in its
# own network namespace "pavnode<i>" and its own mount namespace (/run/pav-cluster/mntns/node<i>),
# where /var/lib and /run/containerd are the node's own: its kubelet root, CNI state and hostPath
# directories are not the other nodes'. The nodes' eth0 are plugged into bridge pavbr0 of
# pavcluster; each netns routes the other nodes' pod CIDRs to them. Node 3 runs its kubelet
# with k0s's root dir (/var/lib/k0s/kubelet), label and taint $ALT_ROOT_LABEL. The layout is in
# lib.sh; nodes.tsv lists the nodes. PAV_CLUSTER=2 brings up the second cluster (lib.sh), whose
# node 1 has its own mount namespace too.
#
# Idempotent: what exists or runs already is kept (a stopped kubelet is started again). Host
# packages come from Debian; the Kubernetes binary is built from the Go module proxy once per
# version into $PAV_CACHE. A cluster made by another Kubernetes release, with another number of
# nodes or with the single-node layout is purged first.
#   --node NODE      only (re)start that node's components (hack/cluster/node.sh start); the
#                    control plane must run.
#   --control-plane  only (re)start the control plane's components of the existing cluster
#                    (hack/cluster/restart.sh).
# Both keep the running cluster's Kubernetes release unless KUBE_VERSION is given.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ONLY="" CONTROL_PLANE_ONLY=""
usage() { echo "usage: $0 [--node NODE | --control-plane]" >&2; exit 2; }
case "${1:-}" in
  --node) [ $# = 2 ] || usage; ONLY=$(node_number "$2"); use_running_kube_version ;;
  --control-plane) [ $# = 1 ] || usage; CONTROL_PLANE_ONLY=1; use_running_kube_version ;;
  "") ;;
  *) usage ;;
esac
[ "$(id -u)" = 0 ] || { echo "cluster-up must run as root" >&2; exit 1; }

# ---------------------------------------------------------------- helpers
# write_config FILE < content: replace FILE only if the content differs, so a running
# component is not disturbed (kube-proxy exits when its config file is written).
# (Builtins only when nothing changed: a fork costs ~50 ms here, and warm runs write ~20 files.)
write_config() {
  local new old=""
  IFS= read -r -d '' new || true
  [ -f "$1" ] && { IFS= read -r -d '' old < "$1" || true; }
  [ "$new" = "$old" ] && return 0
  printf '%s' "$new" > "$1.tmp" && mv -f "$1.tmp" "$1"
  WROTE=1   # tells the caller that the file changed
}
# mkcert NAME SUBJECT EKU [SAN [CA]]: a certificate signed by the cluster's CA (or $PKI/CA.crt).
# Keys are ECDSA P-256: RSA keys took most of a cold start's PKI step (~0.35 s each, two per node).
mkcert() {
  local n=$1 subj=$2 eku=$3 san=${4:-} ca=${5:-ca}
  [ -f "$PKI/$n.crt" ] && return 0
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/$n.key" -out "$PKI/$n.csr" -subj "$subj" 2>/dev/null
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature"; echo "extendedKeyUsage=$eku"
    [ -n "$san" ] && echo "subjectAltName=$san"; } > "$PKI/$n.ext"
  openssl x509 -req -in "$PKI/$n.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial -days 3650 \
    -out "$PKI/$n.crt" -extfile "$PKI/$n.ext" 2>/dev/null
  rm -f "$PKI/$n.csr" "$PKI/$n.ext"
}
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
# start NAME CMD...: a control plane component, in netns pavcluster
start() { local n=$1; shift; start_proc "$n" "$PIDS/$n.pid" "$LOGS/$n.log" nsenter --net="$NSPATH" "$@"; }
# node_start NAME CMD...: a component of the node of node_vars, in its namespaces
node_start() { local n=$1; shift; start_proc "$NODE_NAME $n" "$NODE_PIDS/$n.pid" "$NODE_LOGS/$n.log" "${NODE_NSENTER[@]}" "$@"; }
# nsfs FILE: FILE is a bound namespace (a netns or mntns file that still holds its namespace)
nsfs() { [ "$(findmnt -n -o FSTYPE --mountpoint "$1" 2>/dev/null | tail -1)" = nsfs ]; }

# ---------------------------------------------------------------- the cluster's state
mkdirs() {
  mkdir -p "$STATE" "$PKI" "$LOGS" "$PIDS" "$NODES_DIR"
  [ -z "$HOST_NODE" ] || mkdir -p "$KUBELET_ROOT"
  chmod 700 "$STATE"
}
# purge WHY: this is a disposable test cluster: state that cannot be reused is wiped.
purge() {
  step "$1: purging the cluster's state"
  "$HACK_CLUSTER/down.sh" --purge
  mkdirs
}
# write_nodes_tsv: the contract of lib.sh's layout comment; written before anything of a node
# exists, so that down.sh finds every node.
write_nodes_tsv() {
  local i
  { printf '#name\tip\tnetns\tmntns\tkubelet_root\tpod_cidr\tcontainerd\tvar_lib\n'
    for i in $(seq "$NODES"); do
      node_vars "$i"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$NODE_NAME" "$NODE_IP" "$NODE_NETNS" "$NODE_MNTNS" \
        "$NODE_KUBELET_ROOT" "$NODE_POD_CIDR" "$NODE_SOCK" "$NODE_VAR_LIB"
    done; } | write_config "$NODES_TSV"
}

# ---------------------------------------------------------------- network
# netns pavcluster: the control plane and node 1, bridge pavbr0 with node 1's IP (the API
# server's), which every other node's veth is plugged into.
cluster_network() {
  if [ ! -e "$NSPATH" ]; then
    step "creating netns $NETNS"
    ip netns add "$NETNS"
  fi
  [ -e /proc/sys/net/bridge ] || modprobe br_netfilter 2>/dev/null || true
  nsx ip link show "$BRIDGE" >/dev/null 2>&1 || nsx ip link add "$BRIDGE" type bridge
  ip -n "$NETNS" -batch - <<EOF
link set lo up
addr replace $API_IP/24 dev $BRIDGE
link set $BRIDGE up
route replace default via $NODE_GW dev $BRIDGE
EOF
  netns_sysctls "$NSPATH"
}
# netns_sysctls NSPATH: routing between the node's pods and the bridge; Services to pods of the
# same node (iptables on bridged traffic, needs br_netfilter)
netns_sysctls() {
  nsenter --net="$1" sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward
    [ ! -e /proc/sys/net/bridge ] || echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables'
}
# node_network: netns pavnode<i>, its eth0 (veth pavn<i> on the bridge), and in the node's netns
# a route to every other node's pods via that node.
node_network() {
  local i=$NODE_I j
  if [ "$i" != 1 ]; then
    if [ ! -e "/run/netns/$NODE_NETNS" ]; then
      step "creating netns $NODE_NETNS"
      ip netns add "$NODE_NETNS"
    fi
    if ! ip -n "$NODE_NETNS" link show eth0 >/dev/null 2>&1; then
      nsx ip link del "pavn$i" 2>/dev/null || true   # a peer whose netns was remade
      nsx ip link add "pavn$i" type veth peer name eth0 netns "$NODE_NETNS"
      nsx ip link set "pavn$i" master "$BRIDGE" up
    fi
    ip -n "$NODE_NETNS" -batch - <<EOF
link set lo up
addr replace $NODE_IP/24 dev eth0
link set eth0 up
route replace default via $NODE_GW dev eth0
EOF
    netns_sysctls "/run/netns/$NODE_NETNS"
  fi
  for j in $(seq "$NODES"); do
    [ "$j" = "$i" ] || echo "route replace 10.244.$((j - 1)).0/24 via 10.201.0.$j"
  done | ip -n "$NODE_NETNS" -batch -
}

# ---------------------------------------------------------------- mount namespace (nodes >= 2)
# The node's mount namespace is a private copy of the host's, bound to $NODE_MNTNS so that it
# lives without a process. In it, /var/lib is the node's var-lib/ (with /var/lib/pav-cluster
# bound back in: configs, PKI, logs, the node's containerd) and /run/containerd (shim sockets,
# hardcoded by containerd 1.6) is the node's containerd state dir. First the copies of the
# host's mounts under /var/lib, /run and /tmp go: they are node 1's pods, volumes and netns
# files and the other nodes' namespaces, which a copy here would keep alive after the host
# dropped them. Last, every mount of the node is made shared (new peer groups, none with the
# host's), as systemd does on a real machine: Bidirectional hostPath volumes work anywhere on
# the node, not only under its kubelet root (which its kubelet makes rshared anyway). (Node 1 is
# this machine, whatever its root's propagation is.)
node_mntns() {
  node_is_host && return 0
  mkdir -p "$NODE_VAR_LIB/${STATE#/var/lib/}" "$NODE_DIR/run/containerd" "$SHIM_DIR"
  if nsfs "$NODE_MNTNS" && nodex sh -c "findmnt -n -o SOURCE --mountpoint /var/lib | grep -q '$NODE_VAR_LIB'"; then
    return 0
  fi
  if nsfs "$NODE_MNTNS"; then umount "$NODE_MNTNS"; fi   # half made: start again
  step "creating mount namespace $NODE_MNTNS"
  touch "$NODE_MNTNS"
  unshare --mount="$NODE_MNTNS" --propagation private sh -euc '
    awk '\''$5 ~ "^/(var/lib|run|tmp)/" { print length($5), $5 }'\'' /proc/self/mountinfo | sort -rn | cut -d" " -f2- |
      while IFS= read -r m; do umount -l "$(printf "%b" "$m")" 2>/dev/null || true; done
    mount --bind "$1" "$2/${1#/var/lib/}"
    mount --rbind "$2" /var/lib
    mount --bind "$3" "$4"
    mount --make-rshared /
  ' sh "$STATE" "$NODE_VAR_LIB" "$NODE_DIR/run/containerd" "$SHIM_DIR"
}

# mntns_dir: namespace files can only be bound on a private mount (a shared one would propagate
# them), so $MNTNS_DIR is one, bound onto itself (as `ip netns` does for /run/netns).
mntns_dir() {
  mkdir -p "$MNTNS_DIR"
  if [ "$(findmnt -n -o TARGET --mountpoint "$MNTNS_DIR" 2>/dev/null)" != "$MNTNS_DIR" ]; then
    mount --bind "$MNTNS_DIR" "$MNTNS_DIR"
  fi
  mount --make-private "$MNTNS_DIR"
}

# ---------------------------------------------------------------- cgroups (all but the host node)
# The kubelets must not share /kubepods: node i's pods go under /$NODE_CGROUP/kubepods (the
# kubelet wants its cgroupRoot to exist in every hierarchy). cgroup v1: a new cpuset is empty.
node_cgroup() {
  node_is_host && return 0
  local h v
  for h in /sys/fs/cgroup/*/; do
    [ -e "$h/cgroup.procs" ] && [ ! -d "$h$NODE_CGROUP" ] || continue
    mkdir "$h$NODE_CGROUP"
    if [ -e "$h/cpuset.cpus" ]; then
      read -r v < "$h/cpuset.cpus"; echo "$v" > "$h$NODE_CGROUP/cpuset.cpus"
      read -r v < "$h/cpuset.mems"; echo "$v" > "$h$NODE_CGROUP/cpuset.mems"
    fi
  done
}

# ---------------------------------------------------------------- PKI + kubeconfigs
cluster_pki() {
  if [ ! -f "$PKI/ca.crt" ]; then
    step "generating PKI"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 -subj "/CN=pav-cluster-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  fi
  mkcert apiserver "/CN=kube-apiserver" serverAuth \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$API_IP,IP:$SVC_IP"
  mkcert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  mkcert admin "/O=system:masters/CN=kubernetes-admin" clientAuth
  mkcert controller-manager "/CN=system:kube-controller-manager" clientAuth
  mkcert scheduler "/CN=system:kube-scheduler" clientAuth
  mkcert kube-proxy "/CN=system:kube-proxy" clientAuth
  [ -f "$PKI/sa.key" ] || { openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null; openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null; }
  mkkc "$KUBECONFIG_ADMIN" kubernetes-admin admin
  mkkc "$STATE/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
  mkkc "$STATE/scheduler.kubeconfig" system:kube-scheduler scheduler
  mkkc "$STATE/kube-proxy.kubeconfig" system:kube-proxy kube-proxy
}
# node_pki: the node's kubelet client certificate (system:node:<name>, for the Node authorizer)
# and serving certificate (its IP: the API server checks it for logs and exec).
node_pki() {
  mkcert "$NODE_NAME-kubelet-client" "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
  mkcert "$NODE_NAME-kubelet-server" "/CN=$NODE_NAME" serverAuth "DNS:$NODE_NAME,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1"
  mkkc "$NODE_DIR/kubelet.kubeconfig" "system:node:$NODE_NAME" "$NODE_NAME-kubelet-client"
}

# webhook_client_auth: the API server presents a client certificate to PaV's admission webhook
# (Service pav-webhook in namespace pav), from its own CA, webhook-client-ca.crt: a PaV whose
# webhook requires one (--webhook-client-ca) then answers the API server and refuses any pod.
# Webhooks that ask for no client certificate are called as before.
webhook_client_auth() {
  if [ ! -f "$PKI/webhook-client-ca.crt" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/webhook-client-ca.key" \
      -out "$PKI/webhook-client-ca.crt" -days 3650 -subj "/CN=pav-cluster-webhook-client-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  fi
  mkcert webhook-client "/CN=kube-apiserver-webhook-client" clientAuth "" webhook-client-ca
  # users are matched by the webhook's host: <service>.<namespace>.svc (port 443)
  write_config "$STATE/webhook-client.kubeconfig" <<EOF
apiVersion: v1
kind: Config
users:
- name: pav-webhook.pav.svc
  user:
    client-certificate: $PKI/webhook-client.crt
    client-key: $PKI/webhook-client.key
EOF
  write_config "$STATE/admission.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $STATE/webhook-client.kubeconfig
EOF
}

# ---------------------------------------------------------------- control plane
control_plane() {
  webhook_client_auth
  mkdir -p "$STATE/etcd" && chmod 700 "$STATE/etcd"
  # Debian's etcd 3.4.23 cannot be asked for watch progress (etcd >= 3.4.31 can), so after a
  # kube-apiserver restart its watch cache of a quiet resource would stay behind what clients
  # have seen ("Too large resource version") until etcd's periodic progress notification,
  # every 10 min by default: every 5 s here.
  start etcd /usr/bin/etcd --name pav --data-dir "$STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster pav=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
    --experimental-watch-progress-notify-interval=5s
  waitfor etcd 30 nsx curl -sf http://127.0.0.1:2379/health
  step "etcd ok ($(etcd --version | head -1))"

  start kube-apiserver "$KUBE_DIR/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 \
    --advertise-address="$API_IP" --bind-address=0.0.0.0 --secure-port=6443 \
    --service-cluster-ip-range="$SVC_CIDR" \
    --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP,Hostname \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --admission-control-config-file="$STATE/admission.yaml" \
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
  snapshot_machinery
  registry
}

# registry: the cluster's OCI registry at https://$REGISTRY (lib.sh), where `make release-push`
# pushes a release and `make test-release` installs it from. Its own CA, registry-ca: the nodes
# trust it for this registry only. No authentication: it listens only on the cluster's bridge.
registry() {
  if [ ! -f "$REGISTRY_CA" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/registry-ca.key" \
      -out "$REGISTRY_CA" -days 3650 -subj "/CN=pav-cluster-registry-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  fi
  mkcert registry "/CN=pav-cluster-registry" serverAuth "IP:$API_IP" registry-ca
  mkdir -p "$STATE/registry"
  write_config "$STATE/registry.yml" <<EOF
version: 0.1
log: {fields: {service: registry}}
storage:
  filesystem: {rootdirectory: $STATE/registry}
  delete: {enabled: true}
http:
  addr: $REGISTRY
  tls: {certificate: $PKI/registry.crt, key: $PKI/registry.key}
  headers: {X-Content-Type-Options: [nosniff]}
EOF
  start docker-registry /usr/bin/docker-registry serve "$STATE/registry.yml"
  waitfor registry 30 nsx curl -sf --cacert "$REGISTRY_CA" "https://$REGISTRY/v2/"
  step "registry https://$REGISTRY ok ($(docker-registry --version | awk '{print $3}'))"
}

# snapshot_machinery: the snapshot CRDs (server-side apply: unchanged ones are left alone) and
# the snapshot-controller, as a control plane component with the admin's credentials. On a
# running cluster `make cluster-up` (or `hack/cluster/up.sh --control-plane`) adds them.
snapshot_machinery() {
  ensure_snapshot_controller
  KC apply --server-side --force-conflicts --field-manager=pav-cluster -f "$SNAPSHOT_CRDS" >/dev/null
  KC wait --for=condition=Established --timeout=60s -f "$SNAPSHOT_CRDS" >/dev/null
  start snapshot-controller "$SNAPSHOT_BIN" --kubeconfig="$KUBECONFIG_ADMIN" --leader-election=false \
    --retry-interval-max=30s --v=2
  step "snapshot CRDs and snapshot-controller $(cat "$SNAPSHOT_CRDS/VERSION") ok"
}

# ---------------------------------------------------------------- node components
# node1_socket: node 1's containerd listens where a machine's does, /run/containerd/containerd.sock
# (PaV's node plugin follows its events there), unless another containerd (this machine's own,
# say) does: then on its private path, for good (lib.sh, $NODE_DIR/private-socket). A node 1 made
# before its socket moved is moved: its containerd and kubelet start again (containers keep running).
node1_socket() {
  [ "$NODE_I" = 1 ] && [ "$NODE_SOCK" = "$SHIM_DIR/containerd.sock" ] || return 0
  local own=$NODE_DIR/run/containerd/containerd.sock
  if listening "$own" && ! listening "$NODE_SOCK"; then
    step "$NODE_NAME: moving containerd's socket to $NODE_SOCK"
    stop_proc "$NODE_NAME kubelet" "$NODE_PIDS/kubelet.pid" 20
    stop_proc "$NODE_NAME containerd" "$NODE_PIDS/containerd.pid" 30
    rm -f "$own" "$own.ttrpc"
  elif listening "$own" || { ! running "$NODE_PIDS/containerd.pid" && listening "$NODE_SOCK"; }; then
    echo "  $NODE_NAME: another containerd listens on $NODE_SOCK; node 1's uses $own, where PaV's node plugin does not look (it learns of exits from pod status there)"
    touch "$NODE_DIR/private-socket"
    node_vars 1
  fi
}
# listening SOCKET: something accepts connections on that unix socket (curl fails with 7 only when
# it cannot connect; ctr would retry for 10 s)
listening() {
  [ -S "$1" ] || return 1
  curl -s -o /dev/null --max-time 2 --unix-socket "$1" http://localhost/ && return 0
  [ $? != 7 ]
}

node_containerd() {
  mkdir -p "$NODE_DIR/cni/net.d" "$NODE_DIR/containerd" "$NODE_DIR/run/containerd"
  node1_socket
  mkdir -p "${NODE_SOCK%/*}"
  write_config "$NODE_DIR/cni/net.d/10-pav-bridge.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "pav-bridge",
  "plugins": [
    { "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": { "type": "host-local", "dataDir": "$NODE_DIR/cni/networks",
                "ranges": [[{ "subnet": "$NODE_POD_CIDR" }]], "routes": [{ "dst": "0.0.0.0/0" }] } },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
  # the cluster's registry (up.sh registry), verified with its CA
  mkdir -p "$NODE_DIR/certs.d/$REGISTRY"
  write_config "$NODE_DIR/certs.d/$REGISTRY/hosts.toml" <<EOF
server = "https://$REGISTRY"
[host."https://$REGISTRY"]
  capabilities = ["pull", "resolve"]
  ca = "$REGISTRY_CA"
EOF
  WROTE=""
  write_config "$NODE_DIR/containerd.toml" <<EOF
version = 2
root = "$NODE_DIR/containerd"
state = "$NODE_DIR/run/containerd"
[grpc]
  address = "$NODE_SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_DIR/containerd/opt"
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
        Root = "$NODE_DIR/run/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$NODE_DIR/certs.d"
EOF
  # containerd reads its configuration once: a running one with an older one starts again (its
  # containers keep running, the kubelet reconnects).
  if [ -n "$WROTE" ] && running "$NODE_PIDS/containerd.pid"; then
    step "$NODE_NAME: containerd's configuration changed: restarting it"
    stop_proc "$NODE_NAME containerd" "$NODE_PIDS/containerd.pid" 30
  fi
  node_start containerd /usr/bin/containerd --config "$NODE_DIR/containerd.toml"
}

# node_pause: the pause image must be present before the first pod: there is no registry.
node_pause() {
  ctr --address "$NODE_SOCK" -n k8s.io images check "name==$PAUSE_IMAGE" 2>/dev/null | grep -q complete && return 0
  local tar=$HACK_CLUSTER/../../_output/images/pause.tar
  # nodes start in parallel: one builds the tarball, the others wait for it
  ( flock 9; [ -f "$tar" ] || "$HACK_CLUSTER/../images/build.sh" pause >/dev/null ) 9>"$STATE/.pause-build.lock"
  ctr --address "$NODE_SOCK" -n k8s.io images import --platform linux/amd64 "$tar" >/dev/null
  echo "  $NODE_NAME: imported $PAUSE_IMAGE"
}

node_kubelet() {
  local extra=() cgroup_root=/
  mkdir -p "$NODE_LOGS/pods"
  node_is_host || cgroup_root=/$NODE_CGROUP
  if [ "$NODE_KUBELET_ROOT" = "$ALT_KUBELET_ROOT" ]; then
    extra=(--node-labels="$ALT_ROOT_LABEL" --register-with-taints="$ALT_ROOT_LABEL:NoSchedule")
  fi
  write_config "$NODE_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs        # containerd 1.6 cannot report its cgroup driver (RuntimeConfig)
cgroupRoot: $cgroup_root      # one per node: the kubelets must not share /kubepods
failCgroupV1: false           # this host has cgroup v1 (hybrid); kubelet >= 1.35 refuses it by default
failSwapOn: false
containerRuntimeEndpoint: unix://$NODE_SOCK
address: 0.0.0.0
port: 10250
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/$NODE_NAME-kubelet-server.crt
tlsPrivateKeyFile: $PKI/$NODE_NAME-kubelet-server.key
clusterDomain: cluster.local
resolvConf: ""                # no upstream DNS inside the netns; keeps pods from querying the host resolver
podLogsDir: $NODE_LOGS/pods
healthzBindAddress: 127.0.0.1 # every node has its own netns, so its own loopback
healthzPort: 10248
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100   # images cannot be pulled again: never collect them
imageGCLowThresholdPercent: 99
serializeImagePulls: false
volumeStatsAggPeriod: 10s     # volume usage (NodeGetVolumeStats) every 10 s instead of every minute, for the tests
oomScoreAdj: 0                # no CAP_SYS_RESOURCE here, so the default -999 cannot be applied
crashLoopBackOff:             # (KubeletCrashLoopBackOffMax, beta and on since 1.35) the soak kills PaV's
  maxContainerRestartPeriod: 10s  # processes again and again: back within 10 s, not after up to 5 min
EOF
  node_start kubelet "$KUBE_DIR/kubelet" --config="$NODE_DIR/kubelet.yaml" --kubeconfig="$NODE_DIR/kubelet.kubeconfig" \
    --root-dir="$NODE_KUBELET_ROOT" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" "${extra[@]}" --v=1
}

# kube-proxy: ClusterIP Services (e.g. webhooks) in every node's netns
node_kube_proxy() {
  write_config "$NODE_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $STATE/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: $CLUSTER_CIDR
hostnameOverride: $NODE_NAME
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}   # nf_conntrack_max is read-only in a netns
EOF
  node_start kube-proxy "$KUBE_DIR/kube-proxy" --config="$NODE_DIR/kube-proxy.yaml" --v=1
}

node_up() {
  node_vars "$1"
  mkdir -p "$NODE_DIR" "$NODE_LOGS" "$NODE_PIDS"
  # all but the host node: /var/lib/kubelet exists (empty on node 3: hostPath volumes of it are node 3's own)
  node_is_host || mkdir -p "$NODE_VAR_LIB/kubelet" "$NODE_VAR_LIB/${NODE_KUBELET_ROOT#/var/lib/}"
  node_network
  node_mntns
  node_cgroup
  node_pki
  node_containerd
  waitfor "$NODE_NAME containerd" 30 ctr --address "$NODE_SOCK" version
  node_pause
  node_kubelet
  node_kube_proxy
  step "$NODE_NAME started (ip $NODE_IP, pods $NODE_POD_CIDR, netns $NODE_NETNS, mntns $NODE_MNTNS, kubelet root $NODE_KUBELET_ROOT)"
}

# nodes_up I...: bring up those nodes in parallel (each one's kubelet only needs the API server).
nodes_up() {
  local i p pids=() rc=0
  mntns_dir
  for i in "$@"; do node_up "$i" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc = 0 ] || { echo "a node did not start; see $LOGS" >&2; exit 1; }
}

# nodes_ready I...: wait until those nodes are Ready with kube-proxy up and their kubelet root
# rshared (the kubelet bind-mounts it onto itself; PaV's Bidirectional hostPath mounts under
# <root>/plugins depend on it).
nodes_ready() {
  local i names=()
  for i in "$@"; do names+=("pav-node$i"); done
  waitfor "registration of ${names[*]}" 120 KC get node "${names[@]}"
  KC wait --for=condition=Ready "${names[@]/#/node/}" --timeout=180s >/dev/null
  for i in "$@"; do
    node_vars "$i"
    waitfor "$NODE_NAME kube-proxy" 60 nodex curl -sf http://127.0.0.1:10256/healthz
    waitfor "$NODE_NAME $NODE_KUBELET_ROOT rshared" 30 sh -c "$(printf '%q ' "${NODE_NSENTER[@]}") findmnt -n -o PROPAGATION --target '$NODE_KUBELET_ROOT' | grep -q shared"
  done
}

# ---------------------------------------------------------------- main
if [ -n "$CONTROL_PLANE_ONLY" ]; then
  [ -f "$STATE/kube-version" ] || { echo "no cluster to restart: make cluster-up" >&2; exit 1; }
  control_plane
  exit 0
fi
if [ -n "$ONLY" ]; then
  KC get --raw /readyz >/dev/null 2>&1 || { echo "the control plane is not running: make cluster-up" >&2; exit 1; }
  NODES=$(cluster_nodes | wc -l)
  nodes_up "$ONLY"
  nodes_ready "$ONLY"
  step "node $NODE_NAME Ready"
  exit 0
fi

mkdirs
ensure_host_pkgs
ensure_kube
step "binaries ok: $("$KUBE_DIR/kubelet" --version)"

# State that cannot be reused: another Kubernetes release's (e.g. after `make test-matrix`; an
# older apiserver may not read what a newer one stored), the single-node layout's (no
# nodes.tsv; node "pav-node"), another number of nodes'.
if [ -f "$STATE/kube-version" ] && [ "$(cat "$STATE/kube-version")" != "$KUBE_VERSION" ]; then
  purge "cluster state is from Kubernetes $(cat "$STATE/kube-version"), switching to $KUBE_VERSION"
elif [ -f "$STATE/kube-version" ] && [ ! -f "$NODES_TSV" ]; then
  purge "cluster state has the single-node layout (node pav-node)"
elif [ -f "$NODES_TSV" ] && [ "$(cluster_nodes | wc -l)" != "$NODES" ]; then
  purge "cluster has $(cluster_nodes | wc -l) node(s), NODES=$NODES"
fi
echo "$KUBE_VERSION" > "$STATE/kube-version"
write_nodes_tsv

cluster_network
step "netns $NETNS ok (bridge $BRIDGE, $API_IP)"
cluster_pki
for i in $(seq "$NODES"); do node_vars "$i"; mkdir -p "$NODE_DIR"; node_pki; done
step "pki + kubeconfigs ok"
control_plane
nodes_up $(seq "$NODES")
write_nodes_tsv   # node 1's socket may have been decided meanwhile (node1_socket)
waitfor "default serviceaccount" 60 KC -n default get serviceaccount default
nodes_ready $(seq "$NODES")
step "$NODES node(s) Ready: $(KC get nodes --no-headers -o custom-columns=N:.metadata.name | xargs); kubeconfig $KUBECONFIG_ADMIN; kubectl: hack/cluster/kubectl"
