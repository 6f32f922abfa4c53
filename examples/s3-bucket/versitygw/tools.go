//go:build tools

// Package versitygw pins the Versity S3 Gateway, the S3 server of the s3-bucket
// example. It is its own module so that PaV's go.mod does not carry the
// gateway's dependencies; hack/images/examples.sh builds it with
//
//	go build -C examples/s3-bucket/versitygw github.com/versity/versitygw/cmd/versitygw
package versitygw

import _ "github.com/versity/versitygw/cmd/versitygw"
