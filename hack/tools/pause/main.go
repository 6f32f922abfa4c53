// Command pause is the pod sandbox process of the local cluster's pause image
// (registry.k8s.io/pause cannot be pulled here): it sleeps, reaps zombies and
// exits 0 on SIGINT/SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		os.Stdout.WriteString("pav local pause 3.10\n")
		return
	}
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range ch {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
