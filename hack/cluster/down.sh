#!/bin/bash
# down.sh [--purge] - stop the local cluster and leave nothing behind: no process, container,
# mount (under /var/lib/pav-cluster, /var/lib/kubelet, /run/containerd), kubepods cgroup or netns.
#   --purge   also wipe the cluster's state (/var/lib/pav-cluster, /var/lib/kubelet).
#             The cached Kubernetes binary in $PAV_CACHE is always kept.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
PURGE=0
for a in "$@"; do case $a in --purge) PURGE=1 ;; *) echo "usage: $0 [--purge]" >&2; exit 2 ;; esac; done
[ "$(id -u)" = 0 ] || { echo "cluster-down must run as root" >&2; exit 1; }

saved_pid() { [ -f "$PIDS/$1.pid" ] && cat "$PIDS/$1.pid"; }
stop() { # name [grace seconds]
  local n=$1 g=${2:-15} p i
  p=$(saved_pid "$n") || return 0
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p" 2>/dev/null
    for i in $(seq $((g * 10))); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then echo "  $n did not stop in ${g}s: SIGKILL"; kill -KILL "$p" 2>/dev/null; sleep 0.3; fi
    echo "  stopped $n ($p)"
  fi
  rm -f "$PIDS/$n.pid"
}
ctrd() { ctr --address "$SOCK" "$@"; }

step "stopping kubelet"; stop kubelet 20
if [ -S "$SOCK" ] && ctrd version >/dev/null 2>&1; then
  step "removing pod sandboxes and containers"
  [ -x "$KUBE_DIR/crilite" ] && [ -e "$NSPATH" ] && timeout 120 nsenter --net="$NSPATH" "$KUBE_DIR/crilite" -r "unix://$SOCK" rmp-all | sed 's/^/  /'
  for ns in $(ctrd namespaces ls -q); do
    for t in $(ctrd -n "$ns" tasks ls -q 2>/dev/null); do
      ctrd -n "$ns" tasks kill -a -s SIGKILL "$t" >/dev/null 2>&1; sleep 0.2
      ctrd -n "$ns" tasks delete -f "$t" >/dev/null 2>&1
    done
    for c in $(ctrd -n "$ns" containers ls -q 2>/dev/null); do ctrd -n "$ns" containers rm "$c" >/dev/null 2>&1; done
  done
fi
step "stopping control plane and containerd"
stop kube-proxy; stop kube-scheduler; stop kube-controller-manager; stop kube-apiserver 30; stop etcd 30; stop containerd 30

# Leftovers: shims of *our* containerd (identified by our socket path) and any process still in
# a kubelet-made cgroup.
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  if tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q "containerd-shim.*-address $SOCK"; then
    echo "  killing leftover shim $p"; kill -KILL "$p" 2>/dev/null
  fi
done
for f in $(find /sys/fs/cgroup/*/kubepods -name cgroup.procs 2>/dev/null); do
  for p in $(cat "$f"); do echo "  killing leftover container process $p"; kill -KILL "$p" 2>/dev/null; done
done
sleep 0.3

# mounts_under DIR...: mount points at or below DIR, deepest first
mounts_under() {
  awk -v dirs="$*" 'BEGIN { n = split(dirs, d, " ") }
    { for (i = 1; i <= n; i++) if ($5 == d[i] || index($5, d[i] "/") == 1) { print length($5), $5; break } }' /proc/self/mountinfo |
    sort -rn | cut -d' ' -f2-
}
MOUNT_ROOTS="$STATE $KUBELET_ROOT $SHIM_DIR"
step "unmounting everything under $MOUNT_ROOTS"
for pass in 1 2 3 4 5; do
  mps=$(mounts_under $MOUNT_ROOTS)
  [ -z "$mps" ] && break
  while IFS= read -r m; do
    m=$(printf '%b' "$m")   # mountinfo escapes spaces etc. as octal
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
  done <<< "$mps"
done
left=$(mounts_under $MOUNT_ROOTS)
[ -n "$left" ] && { echo "  mounts left:"; echo "$left" | sed 's/^/    /'; }

step "removing kubepods cgroups"
for h in /sys/fs/cgroup/*/; do
  [ -d "$h/kubepods" ] && find "$h/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null
  [ -d "$h/kubepods" ] && echo "  could not remove ${h}kubepods"
done

if [ -e "$NSPATH" ]; then step "deleting netns $NETNS"; ip netns del "$NETNS"; fi
rm -rf /var/lib/cni/results/pav-bridge-* 2>/dev/null
rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null          # only if empty
rmdir "$SHIM_DIR/s" "$SHIM_DIR/fifo" "$SHIM_DIR" 2>/dev/null   # only if empty
if [ -d /run/netns ] && [ -z "$(ls -A /run/netns)" ] && mountpoint -q /run/netns; then umount /run/netns && rmdir /run/netns; fi

if [ $PURGE = 1 ]; then
  if [ -n "$left" ]; then
    echo "not purging: mounts are left (see above)" >&2; exit 1
  fi
  step "purging $STATE and $KUBELET_ROOT"
  rm -rf --one-file-system "$STATE" "$KUBELET_ROOT"
fi
rc=0
[ -n "$left" ] && rc=1
step "down."
exit $rc
