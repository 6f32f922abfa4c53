#!/bin/bash
# kubelet-root-pool.sh - serve the local cluster's nodes whose kubelet root is not the default
# (label $ALT_ROOT_LABEL, kubelet root $ALT_KUBELET_ROOT; see lib.sh) with PaV installed from
# deployment.yaml, as an administrator of such a mixed cluster would: deployment.yaml's node
# plugin DaemonSet is kept off those nodes, and a copy of it, node-agent-<label value>, with
# that kubelet directory runs on them; the controller gets --pool-kubelet-dir. Run by `make deploy-only` after hack/deploy.sh; does
# nothing on a cluster without such nodes. `make undeploy` removes the copy with namespace pav.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
REPO=$(cd "$HACK_CLUSTER/../.." && pwd)
IMAGE=${IMAGE:-pav:latest}
key=${ALT_ROOT_LABEL%%=*} value=${ALT_ROOT_LABEL#*=}
if [ -z "$(KC get nodes -l "$ALT_ROOT_LABEL" -o name)" ]; then
  exit 0
fi
yq=$(ensure_yq)

# deployment.yaml's node plugin stays off the pool (a strategic merge patch survives re-applies
# of the manifest, which does not set affinity).
KC -n pav patch daemonset node-agent --type=strategic -p "$(cat <<EOF
{"spec":{"template":{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":
  {"nodeSelectorTerms":[{"matchExpressions":[{"key":"$key","operator":"DoesNotExist"}]}]}}}}}}}
EOF
)"

# The controller puts the /pav of the pods it places on the pool's nodes (capacity pods) under
# their kubelet root (added once: re-applying deployment.yaml keeps it, as the patch above).
flag="--pool-kubelet-dir=$ALT_ROOT_LABEL:$ALT_KUBELET_ROOT"
if ! KC -n pav get deployment controller-agent -o jsonpath='{.spec.template.spec.containers[0].args}' | grep -qF -- "\"$flag\""; then
  KC -n pav patch deployment controller-agent --type=json \
    -p "[{\"op\":\"add\",\"path\":\"/spec/template/spec/containers/0/args/-\",\"value\":\"$flag\"}]"
fi

# The pool's copy: same pods but for the kubelet directory (flag, host path, mount path), its own
# name and selector, and the pool's node selector.
name=node-agent-$value
"$yq" "select(.kind == \"DaemonSet\" and .metadata.name == \"node-agent\")
  | .metadata.name = \"$name\"
  | .spec.selector.matchLabels.\"$key\" = \"$value\"
  | .spec.template.metadata.labels.\"$key\" = \"$value\"
  | .spec.template.spec.nodeSelector.\"$key\" = \"$value\"
  | (.spec.template.spec.containers[0].args[] | select(test(\"^--kubelet-dir=\"))) = \"--kubelet-dir=$ALT_KUBELET_ROOT\"
  | (.spec.template.spec.containers[0].volumeMounts[] | select(.name == \"kubelet\")).mountPath = \"$ALT_KUBELET_ROOT\"
  | (.spec.template.spec.volumes[] | select(.name == \"kubelet\")).hostPath.path = \"$ALT_KUBELET_ROOT\"
  | (.spec.template.spec.containers[0].image) = \"$IMAGE\"" "$REPO/deployment.yaml" | KC apply -f -
KC -n pav rollout restart "daemonset/$name"
KC -n pav rollout status daemonset/node-agent --timeout=180s
KC -n pav rollout status "daemonset/$name" --timeout=180s
KC -n pav rollout status deployment/controller-agent --timeout=180s
