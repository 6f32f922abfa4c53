#!/bin/bash
# node.sh stop|start NODE - take a node of the local cluster away and bring it back
# (NODE: pav-node2, node2 or 2).
#   stop    SIGTERM the node's kubelet only, as on a machine whose kubelet died: its containers,
#           containerd and kube-proxy keep running, the Node turns NotReady after ~40 s.
#   start   start the node's components again (idempotent: up.sh --node), then wait until the
#           Node is Ready; a deleted Node is registered again by its kubelet.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ $# = 2 ] || { echo "usage: $0 stop|start NODE" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0 must run as root" >&2; exit 1; }
n=$(node_number "$2")
node_vars "$n"
case $1 in
  stop) stop_proc "$NODE_NAME kubelet" "$NODE_PIDS/kubelet.pid" 20 ;;
  start) exec "$HACK_CLUSTER/up.sh" --node "$NODE_NAME" ;;
  *) echo "usage: $0 stop|start NODE" >&2; exit 2 ;;
esac
