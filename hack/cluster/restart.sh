#!/bin/bash
# restart.sh COMPONENT [NODE] - crash a component of the local cluster (SIGKILL) and start it
# again, as a supervisor would after a crash; returns once it serves again.
#   control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, snapshot-controller
#   (up.sh --control-plane)
#   node NODE (pav-node2, node2 or 2): kubelet, kube-proxy, containerd (up.sh --node, which waits
#   until the Node is Ready)
# Used by the chaos soak (test/soak); keeps the running cluster's Kubernetes release.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
usage() { echo "usage: $0 etcd|kube-apiserver|kube-controller-manager|kube-scheduler|snapshot-controller | kubelet|kube-proxy|containerd NODE" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0 must run as root" >&2; exit 1; }
case ${1:-} in
  etcd|kube-apiserver|kube-controller-manager|kube-scheduler|snapshot-controller)
    [ $# = 1 ] || usage
    pidf=$PIDS/$1.pid restart=("$HACK_CLUSTER/up.sh" --control-plane) ;;
  kubelet|kube-proxy|containerd)
    [ $# = 2 ] || usage
    n=$(node_number "$2"); node_vars "$n"
    pidf=$NODE_PIDS/$1.pid restart=("$HACK_CLUSTER/up.sh" --node "$n") ;;
  *) usage ;;
esac
running "$pidf" || { echo "$1 is not running ($pidf)" >&2; exit 1; }
pid=$(cat "$pidf")
kill -KILL "$pid"
wait_exited "$pid"
step "killed $1 ($pid)"
exec "${restart[@]}"
