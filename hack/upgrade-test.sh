#!/usr/bin/env bash
# upgrade-test.sh PREVIOUS VERSION - upgrade PaV from release PREVIOUS to release VERSION with a
# volume in use, then roll back, as docs/upgrade.md tells an admin to (`make test-release`; both
# releases pushed to the local cluster's registry, PREVIOUS from hack/previous-release.sh; the
# caller holds the cluster lock):
#   1. PREVIOUS installed with its own chart from oci:// (its image by tag and digest: its chart
#      has no image.digest); a provisioner whose volume is a directory of its staging pod (one
#      staging per volume and node, shared by the node's clients), a claim,
#      and a writer pod appending a counter line to a file in the volume five times a second;
#   2. the upgrade: VERSION's CRD applied server-side, then `helm upgrade` to VERSION's chart;
#      PaV runs VERSION; a reader pod on the writer's node (joining the staging the old node plugin
#      made) sees the writer's file;
#   3. the rollback: `helm rollback` to PREVIOUS (the CRD stays VERSION's); PaV runs PREVIOUS; a
#      reader again; the claim deleted, its PV goes (the old controller deleted the volume).
# After each step the writer has never restarted, and its file is every counter from 1, none
# missing or repeated, still growing: the volume was neither lost nor swapped under the client.
set -euo pipefail
PREVIOUS=${1:?usage: upgrade-test.sh PREVIOUS VERSION}
VERSION=${2:?usage: upgrade-test.sh PREVIOUS VERSION}
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
. hack/cluster/lib.sh   # REGISTRY, REGISTRY_CA, node_vars, cluster_nodes
REL=_output/release/$VERSION
PREV_REL=$(hack/previous-release.sh "$PREVIOUS")
. hack/release-lib.sh   # k, helm, say, pushed_image, pool_values, forget_images, check_pulled, check_version, uninstall
IMAGE=$(pushed_image "$REL" pav)
PREV_IMAGE=$(pushed_image "$PREV_REL" pav)
EXAMPLE_IMAGE=$(pushed_image "$REL" busybox)
NS=pav-upgrade
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# writer_ok WHEN: the writer has not restarted and its file holds 1..N, N growing; prints N.
writer_ok() {
  local restarts n m
  restarts=$(k -n "$NS" get pod writer -o jsonpath='{.status.containerStatuses[0].restartCount}')
  [ "$(k -n "$NS" get pod writer -o jsonpath='{.status.phase}')" = Running ] && [ "$restarts" = 0 ] ||
    { echo "$1: the writer is not running as it was (restarts: $restarts)" >&2; k -n "$NS" describe pod writer >&2; exit 1; }
  n=$(counters writer)
  for _ in $(seq 50); do   # it writes five lines a second: wait for the next ones
    m=$(counters writer)
    (( m > n )) && { echo "  $1: the writer's file is 1..$m, still growing"; return; }
    sleep 0.2
  done
  echo "$1: the writer's file stopped growing at $n" >&2; exit 1
}
# counters POD: the number of lines of POD's /data/log, after checking they are 1, 2, 3, ...
counters() {
  k -n "$NS" exec "$1" -- cat /data/log > "$WORK/log"
  awk 'NR != $0 { printf "line %d is \"%s\": counters were lost or repeated\n", NR, $0 > "/dev/stderr"; bad = 1; exit 1 }
       END { if (!bad) print NR }' "$WORK/log"
}
# reader WHEN: a pod on the writer's node that mounts the same claim, joining the writer's shared
# staging through the node plugin running now, and finds the writer's counters in it.
reader() {
  local n
  k -n "$NS" delete pod reader --ignore-not-found --wait=true >/dev/null
  k -n "$NS" apply -f - <<EOF >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: reader}
spec:
  nodeName: $(k -n "$NS" get pod writer -o jsonpath='{.spec.nodeName}')
  terminationGracePeriodSeconds: 0
  containers:
    - {name: reader, image: $EXAMPLE_IMAGE, command: [sleep, "3600"], volumeMounts: [{name: data, mountPath: /data}]}
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
EOF
  k -n "$NS" wait --for=condition=Ready pod/reader --timeout=180s >/dev/null
  n=$(counters reader)
  (( n > 0 )) || { echo "$1: the reader finds no counters" >&2; exit 1; }
  echo "  $1: a reader on the writer's node sees counters 1..$n"
  k -n "$NS" delete pod reader --wait=true >/dev/null
}
rollout() {
  k -n pav rollout status deployment/controller-agent --timeout=180s
  k -n pav rollout status daemonset/node-agent --timeout=180s
}

say "removing the installed PaV"
uninstall
forget_images

say "installing the previous release $PREVIOUS from oci://$REGISTRY/charts/pav (image $PREV_IMAGE)"
{ printf 'image: {repository: %s, tag: "%s@%s"}\n' "${PREV_IMAGE%@*}" "$PREVIOUS" "${PREV_IMAGE#*@}"; pool_values; } > "$WORK/previous.yaml"
helm install pav "oci://$REGISTRY/charts/pav" --version "${PREVIOUS#v}" --ca-file "$REGISTRY_CA" \
  -n pav --create-namespace -f "$WORK/previous.yaml" --wait --timeout=5m >/dev/null
check_pulled "$PREV_IMAGE"
check_version "$PREVIOUS"

say "a volume in use: provisioner upgrade-scratch, claim $NS/data, pod writer appending to it"
k apply -f - <<EOF
apiVersion: pav.albertofaria.github.io/v1alpha1
kind: PavProvisioner
metadata: {name: upgrade-scratch}
spec:
  provisioningModes: [Dynamic]
  volumeCreation: {capacity: "{{ requestedMinCapacity }}"}
  volumeStaging:
    shared: true  # one staging per volume and node: the reader joins the writer's
    podTemplate:
      spec:
        restartPolicy: Never
        containers: [{name: stage, image: $EXAMPLE_IMAGE, command: [mkdir, /pav/volume]}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: upgrade-scratch}
provisioner: upgrade-scratch
EOF
k create namespace "$NS" --dry-run=client -o yaml | k apply -f - >/dev/null
k -n "$NS" apply -f - <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  storageClassName: upgrade-scratch
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer}
spec:
  terminationGracePeriodSeconds: 0
  containers:
    - name: writer
      image: $EXAMPLE_IMAGE
      command: [sh, -c, 'i=0; while :; do i=\$((i+1)); echo \$i >> /data/log; sleep 0.2; done']
      volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
EOF
k -n "$NS" wait --for=condition=Ready pod/writer --timeout=180s
PV=$(k -n "$NS" get pvc data -o jsonpath='{.spec.volumeName}')
writer_ok "on $PREVIOUS"

say "upgrading to $VERSION: its CRD, then helm upgrade (image $IMAGE)"
k apply --server-side --force-conflicts -f "$REL/pavprovisioners.crd.yaml"
{ printf 'image: {repository: %s, digest: "%s"}\n' "${IMAGE%@*}" "${IMAGE#*@}"; pool_values; } > "$WORK/upgrade.yaml"
helm upgrade pav "oci://$REGISTRY/charts/pav" --version "${VERSION#v}" --ca-file "$REGISTRY_CA" \
  -n pav --reset-values -f "$WORK/upgrade.yaml" --wait --timeout=5m >/dev/null
rollout
check_pulled "$IMAGE"
check_version "$VERSION"
writer_ok "after the upgrade"
reader "after the upgrade"

say "rolling back to $PREVIOUS: helm rollback (the CRD stays $VERSION's)"
helm rollback pav 1 -n pav --wait --timeout=5m
rollout
check_version "$PREVIOUS"
writer_ok "after the rollback"
reader "after the rollback"

say "deleting the claim: $PREVIOUS deletes its volume"
k -n "$NS" delete pod writer --wait=true
k -n "$NS" delete pvc data --wait=true
k wait --for=delete "pv/$PV" --timeout=180s
k delete namespace "$NS" --wait=true
k delete storageclass upgrade-scratch
k delete pavprovisioner upgrade-scratch --wait=true --timeout=120s
helm history pav -n pav
say "upgraded $PREVIOUS -> $VERSION and rolled back with a writing client, nothing lost, in ${SECONDS}s"
uninstall
