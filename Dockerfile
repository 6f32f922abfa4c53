# The PaV image, with the same contents as `make images` builds without Docker
# (hack/images/build.sh pav): a static /pav on busybox (PaV's node plugin runs
# mount, umount and sh). `make image` builds it. Not tested on the development
# machine, which has no Docker engine.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
# PaV's fork of gonja, which go.mod's replace directive points to.
COPY third_party/gonja third_party/gonja
RUN go mod download
COPY . .
# The context has no .git (.dockerignore): `make image` passes the version, commit and
# dirty flag as hack/version.sh's -ldflags.
ARG VERSION_LDFLAGS="-X main.version=dev"
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${VERSION_LDFLAGS}" -o /pav ./cmd/pav

FROM busybox:1.36
COPY --from=build /pav /pav
LABEL org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/pav"]
