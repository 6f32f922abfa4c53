// Stub: marks this directory as its own module root (so the repository's `go build ./...` skips it).
// The real module files, one per supported Kubernetes release, are versions/<version>.mod and .sum,
// used with `go build -modfile` by build.sh and written by gen-gomod.sh.
module pav.local/kbuild

go 1.26.8
