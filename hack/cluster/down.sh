#!/bin/bash
# down.sh [--purge] - stop the local cluster and leave nothing behind: no process, container,
# mount (under /var/lib/pav-cluster, /var/lib/kubelet, /run/containerd, nor in the nodes' mount
# namespaces), mount or network namespace, kubepods or pav-node<i> cgroup, interface, loop device
# backed by a file under /var/lib/pav-*. With PAV_CLUSTER=2 (lib.sh) the second cluster, which
# has no host node: this machine's /var/lib/kubelet, /run/containerd, /kubepods, CNI cache and
# loop devices are the main cluster's and are left alone.
#   --purge   also wipe the cluster's state (/var/lib/pav-cluster, which holds the nodes >= 2's
#             /var/lib, and /var/lib/kubelet). The cached Kubernetes binary in $PAV_CACHE is kept.
# Works on a cluster cut short or made with the single-node layout too: it acts on the nodes of
# nodes.tsv and on every node whose netns, mount namespace or state directory is there.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
PURGE=0
for a in "$@"; do case $a in --purge) PURGE=1 ;; *) echo "usage: $0 [--purge]" >&2; exit 2 ;; esac; done
[ "$(id -u)" = 0 ] || { echo "cluster-down must run as root" >&2; exit 1; }

NODE_NUMBERS=$({ echo 1; cluster_nodes
  ls /run/netns 2>/dev/null | sed -n "s/^pav${CLUSTER_SUFFIX}node\([0-9]\)$/\1/p"
  ls "$MNTNS_DIR" 2>/dev/null | sed -n 's/^node\([0-9]\)$/\1/p'
  ls "$NODES_DIR" 2>/dev/null | sed -n 's/^node\([0-9]\)$/\1/p'; } | sort -un | xargs)
nsfs() { [ "$(findmnt -n -o FSTYPE --mountpoint "$1" 2>/dev/null | tail -1)" = nsfs ]; }
# node_alive: the namespaces of the node of node_vars exist (nsenter into them works)
node_alive() { [ -e "/run/netns/$NODE_NETNS" ] && { node_is_host || nsfs "$NODE_MNTNS"; }; }
ctr_ok() { [ -S "$1" ] && ctr --address "$1" version >/dev/null 2>&1; }

step "stopping kubelets"
for i in $NODE_NUMBERS; do node_vars "$i"; stop_proc "$NODE_NAME kubelet" "$NODE_PIDS/kubelet.pid" 20; done
stop_proc kubelet "$PIDS/kubelet.pid" 20   # single-node layout

# remove_pods SOCKET CMD-PREFIX...: every pod sandbox and container of that containerd
remove_pods() {
  local sock=$1 ns t c; shift
  [ -x "$KUBE_DIR/crilite" ] && timeout 120 "$@" "$KUBE_DIR/crilite" -r "unix://$sock" rmp-all
  for ns in $(ctr --address "$sock" namespaces ls -q); do
    for t in $(ctr --address "$sock" -n "$ns" tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n "$ns" tasks kill -a -s SIGKILL "$t" >/dev/null 2>&1; sleep 0.2
      ctr --address "$sock" -n "$ns" tasks delete -f "$t" >/dev/null 2>&1
    done
    for c in $(ctr --address "$sock" -n "$ns" containers ls -q 2>/dev/null); do ctr --address "$sock" -n "$ns" containers rm "$c" >/dev/null 2>&1; done
  done
}
step "removing pod sandboxes and containers"
for i in $NODE_NUMBERS; do
  node_vars "$i"
  sock=$NODE_SOCK
  ctr_ok "$sock" || sock=$NODE_DIR/run/containerd/containerd.sock   # node 1 of a cluster made before its socket moved
  if node_alive && ctr_ok "$sock"; then remove_pods "$sock" "${NODE_NSENTER[@]}" 2>&1 | sed "s/^/  $NODE_NAME: /" & fi
done
legacy_sock=$STATE/run/containerd/containerd.sock   # single-node layout
if [ -e "$NSPATH" ] && ctr_ok "$legacy_sock"; then remove_pods "$legacy_sock" nsenter --net="$NSPATH" 2>&1 | sed 's/^/  /' & fi
wait

step "stopping control plane, kube-proxies and containerds"
for i in $NODE_NUMBERS; do node_vars "$i"; stop_proc "$NODE_NAME kube-proxy" "$NODE_PIDS/kube-proxy.pid" & done
for n in kube-scheduler kube-controller-manager snapshot-controller docker-registry; do stop_proc "$n" "$PIDS/$n.pid" & done
wait
stop_proc kube-apiserver "$PIDS/kube-apiserver.pid" 30
stop_proc etcd "$PIDS/etcd.pid" 30 &
for i in $NODE_NUMBERS; do node_vars "$i"; stop_proc "$NODE_NAME containerd" "$NODE_PIDS/containerd.pid" 30 & done
wait
# whatever else a pid file names (e.g. the single-node layout's kube-proxy and containerd)
for f in $(find "$PIDS" -name '*.pid' 2>/dev/null); do stop_proc "$(basename "$f" .pid)" "$f" 30; done

# Leftovers: shims of *our* containerds (identified by their socket: under $STATE, the host
# node's in $SHIM_DIR), any process still in a kubelet-made cgroup (/kubepods of the host node,
# $NODE_CGROUP of the others), and any process in a node's network or mount namespace (e.g. a
# shell of node-exec).
node_vars 1; node1_sock=$NODE_SOCK   # the host node's: /run/containerd/containerd.sock, unless another containerd has it
killed=""
kill_left() { echo "  killing leftover $1 $2: $(tr '\0' ' ' < "/proc/$2/cmdline" 2>/dev/null | cut -c1-100)"; kill -KILL "$2" 2>/dev/null; killed="$killed $2"; }
for f in $(grep -las containerd-shim /proc/[0-9]*/cmdline); do
  p=${f#/proc/}; p=${p%/cmdline}
  { tr '\0' ' ' < "$f"; } 2>/dev/null | grep -qE -- "-address ($STATE/|$node1_sock )" && kill_left shim "$p"
done
mntns_inodes=""
for i in $NODE_NUMBERS; do
  node_vars "$i"
  ! node_is_host && nsfs "$NODE_MNTNS" && mntns_inodes="$mntns_inodes $(stat -L -c %i "$NODE_MNTNS")"
done
if [ -n "$mntns_inodes" ]; then
  while read -r ino f; do
    case " $mntns_inodes " in *" $ino "*) p=${f#/proc/}; kill_left "process in a node's mount namespace" "${p%/ns/mnt}" ;; esac
  done < <(stat -L -c '%i %n' /proc/[0-9]*/ns/mnt 2>/dev/null)
fi
for i in $NODE_NUMBERS; do
  node_vars "$i"
  [ "$i" != 1 ] && [ -e "/run/netns/$NODE_NETNS" ] && for p in $(ip netns pids "$NODE_NETNS" 2>/dev/null); do kill_left "process in netns $NODE_NETNS" "$p"; done
done
# the kubelet-made cgroups: /kubepods (the host node's) and pav<suffix>-node<i>
node_cgroups=(/sys/fs/cgroup/*/pav$CLUSTER_SUFFIX-node[0-9]*)
[ -z "$HOST_NODE" ] || node_cgroups+=(/sys/fs/cgroup/*/kubepods)
for f in $(find "${node_cgroups[@]}" -name cgroup.procs 2>/dev/null); do
  for p in $(cat "$f"); do kill_left "container process" "$p"; done
done
for p in $killed; do wait_exited "$p"; done

# mounts_under DIR...: mount points at or below DIR, deepest first
mounts_under() {
  awk -v dirs="$*" 'BEGIN { n = split(dirs, d, " ") }
    { for (i = 1; i <= n; i++) if ($5 == d[i] || index($5, d[i] "/") == 1) { print length($5), $5; break } }' /proc/self/mountinfo |
    sort -rn | cut -d' ' -f2-
}
# unmount_all DIR...: unmount everything under DIR; print what is left
unmount_all() {
  local pass mps m
  for pass in 1 2 3 4 5; do
    mps=$(mounts_under "$@")
    [ -z "$mps" ] && break
    while IFS= read -r m; do
      m=$(printf '%b' "$m")   # mountinfo escapes spaces etc. as octal
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
    done <<< "$mps"
  done
  mounts_under "$@"
}
left=""
for i in $NODE_NUMBERS; do
  node_vars "$i"
  ! node_is_host && nsfs "$NODE_MNTNS" || continue
  step "unmounting everything in $NODE_NAME's mount namespace, then dropping it"
  l=$(nsenter --mount="$NODE_MNTNS" bash -c "$(declare -f mounts_under unmount_all); unmount_all /var/lib $SHIM_DIR")
  [ -n "$l" ] && left="$left$(echo "$l" | sed "s|^|$NODE_NAME: |")"$'\n'
  umount "$NODE_MNTNS" || umount -l "$NODE_MNTNS"
done
MOUNT_ROOTS="$STATE $MNTNS_DIR"
[ -z "$HOST_NODE" ] || MOUNT_ROOTS="$MOUNT_ROOTS $KUBELET_ROOT $SHIM_DIR"
step "unmounting everything under $MOUNT_ROOTS"
l=$(unmount_all $MOUNT_ROOTS)
[ -n "$l" ] && left="$left$l"$'\n'
left=${left%$'\n'}
[ -n "$left" ] && { echo "  mounts left:"; echo "$left" | sed 's/^/    /'; }
rm -rf "${MNTNS_DIR%/mntns}" 2>/dev/null

step "removing the kubelets' cgroups"
for c in /sys/fs/cgroup/*/pav$CLUSTER_SUFFIX-node[0-9]* ${HOST_NODE:+/sys/fs/cgroup/*/kubepods}; do
  [ -d "$c" ] || continue
  find "$c" -depth -type d -delete 2>/dev/null   # rmdir, deepest first
  [ -d "$c" ] && echo "  could not remove $c"
done

for i in $NODE_NUMBERS; do
  node_vars "$i"
  [ "$i" != 1 ] && [ -e "/run/netns/$NODE_NETNS" ] && { step "deleting netns $NODE_NETNS"; ip netns del "$NODE_NETNS"; }
done
if [ -e "$NSPATH" ]; then step "deleting netns $NETNS (bridge $BRIDGE, the nodes' veths)"; ip netns del "$NETNS"; fi
if [ -n "$HOST_NODE" ]; then
  # node 1's CNI cache (the others' is in their /var/lib): results of our network and of
  # containerd's loopback for our sandboxes (left when a pod's network was not torn down)
  rm -rf /var/lib/cni/results/pav-bridge-* 2>/dev/null
  for f in /var/lib/cni/results/cni-loopback-*-lo; do
    [ -e "$f" ] || continue
    id=${f#*/cni-loopback-}; id=${id%-lo}
    for d in "$NODES_DIR/node1/run/containerd" "$STATE/run/containerd"; do
      [ -d "$d/io.containerd.grpc.v1.cri/sandboxes/$id" ] && rm -f "$f"
    done
  done
  rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null          # only if empty
  # node 1's shim sockets left by shims that were killed, and its containerd's sockets if it was:
  # nobody listens on them any more
  if [ -d "$SHIM_DIR" ]; then
    live=$(ss -xlH 2>/dev/null | awk '{print $5}')
    for f in "$SHIM_DIR"/s/* "$node1_sock" "$node1_sock.ttrpc"; do
      [ -S "$f" ] && ! grep -qxF "$f" <<< "$live" && rm -f "$f"
    done
  fi
  rmdir "$SHIM_DIR/s" "$SHIM_DIR/fifo" "$SHIM_DIR" 2>/dev/null   # only if empty
fi
# the kubelets' links to their containers' logs (which live in $LOGS)
for f in /var/log/containers/*.log; do
  [ -L "$f" ] && case $(readlink "$f") in "$LOGS"/*) rm -f "$f" ;; esac
done
rmdir /var/log/containers 2>/dev/null                         # only if empty
if [ -d /run/netns ] && [ -z "$(ls -A /run/netns)" ] && mountpoint -q /run/netns; then umount /run/netns && rmdir /run/netns; fi

# loop devices the cluster's pods attached (loop-block and the soak's and benchmark's Block
# volumes) to files under /var/lib/pav-*: with the nodes stopped nothing uses them. A node's
# path does not say which cluster it is of: the main cluster's down detaches the second's too
# (a loop device still in use is only marked to go when closed).
[ -z "$HOST_NODE" ] || for f in /sys/block/loop*/loop/backing_file; do
  [ -e "$f" ] || continue
  backing=$(cat "$f")
  case $backing in
    /var/lib/pav-*) dev=${f#/sys/block/}; dev=/dev/${dev%%/*}; step "detaching $dev ($backing)"; losetup -d "$dev" ;;
  esac
done

if [ $PURGE = 1 ]; then
  if [ -n "$left" ]; then
    echo "not purging: mounts are left (see above)" >&2; exit 1
  fi
  step "purging $STATE${HOST_NODE:+ and $KUBELET_ROOT}"
  rm -rf --one-file-system "$STATE" ${HOST_NODE:+"$KUBELET_ROOT"}
fi
rc=0
[ -n "$left" ] && rc=1
step "down."
exit $rc
