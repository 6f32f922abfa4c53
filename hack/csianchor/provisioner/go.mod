// Stub: its own module root, so the repository's `go build ./...` skips it; build.sh builds
// with -modfile=provisioner.mod.
module pav.local/csianchor/provisioner

go 1.24.0
