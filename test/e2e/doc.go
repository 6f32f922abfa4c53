// Package e2e holds PaV's end-to-end tests (build tag e2e). They run against the
// local cluster (`make cluster-up images cluster-load`), inside its network
// namespace: `make e2e`. See test/e2e/framework.
package e2e
