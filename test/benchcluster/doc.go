// Package benchcluster is PaV's side-by-side cluster benchmark (build tag
// benchcluster; `make bench-cluster`): on the local cluster with PaV
// installed, it measures a plain pod (the floor), PaV and a CSI anchor
// (external-provisioner v5.3.0 with a minimal CSI driver, hack/csianchor) one
// after the other in one run, prints a Markdown table and writes
// _output/bench/cluster.json. Nothing is asserted: it fails only when the
// cluster cannot do what it measures.
package benchcluster
