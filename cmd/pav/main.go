// Command pav is PaV's single binary: controller, node plugin and authoring tools.
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println(version)
		return
	}
	fmt.Fprintln(os.Stderr, "usage: pav {controller|node|render|validate|version}")
	os.Exit(2)
}
