//go:build soak

package soak

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// report renders the run's figures as Markdown: settings, the audit, the
// faults injected and the lifecycle steps' p50/p90 under faults.
func (s *soak) report(cycles []*cycle, a *audit, elapsed time.Duration) string {
	var b strings.Builder
	version := "?"
	if v, err := s.f.Client.Discovery().ServerVersion(); err == nil {
		version = v.GitVersion
	}
	fmt.Fprintf(&b, "# PaV chaos soak\n\n")
	fmt.Fprintf(&b, "Seed %d (replay: `make soak SOAK_SEED=%d SOAK_CYCLES=%d`), %d lifecycles, %d at once, a cluster fault every ~%v, Kubernetes %s, %s.\n\n",
		s.cfg.Seed, s.cfg.Seed, s.cfg.Cycles, s.cfg.Cycles, s.cfg.Parallel, s.cfg.FaultEvery, version, elapsed.Round(time.Second))

	outcomes := map[outcome]int{}
	retries, recovered, recoveredEvents, restored := 0, 0, 0, 0
	for _, c := range cycles {
		outcomes[c.Outcome]++
		if _, ok := c.Steps["restore"]; ok && c.Outcome == completed {
			restored++
		}
		retries += c.Retries
		if c.Recovered {
			recovered++
		}
		if c.Recovered && c.RecoveredEvent {
			recoveredEvents++
		}
	}
	fmt.Fprintf(&b, "## Audit\n\n| | |\n|---|---:|\n")
	fmt.Fprintf(&b, "| lifecycles completed (token written, read back intact, claim deleted) | %d |\n", outcomes[completed])
	fmt.Fprintf(&b, "| of those, with a snapshot taken after the write and restored into a claim that read the token back | %d |\n", restored)
	fmt.Fprintf(&b, "| claims deleted while their creation pod ran, as planned, and cleaned up | %d |\n", outcomes[deletedDuringCreation])
	fmt.Fprintf(&b, "| client pods run again after a fault failed one | %d |\n", retries)
	fmt.Fprintf(&b, "| staging daemons killed under a writing client and recovered in place (same container) | %d |\n", recovered)
	fmt.Fprintf(&b, "| of those, with PaV's VolumeRecovered Event on the client (Events are best effort) | %d |\n", recoveredEvents)
	for _, l := range a.Lines {
		fmt.Fprintf(&b, "| %s | %d |\n", l.Name, l.Count)
	}

	fmt.Fprintf(&b, "\n## Faults injected\n\n| fault | count |\n|---|---:|\n")
	s.mu.Lock()
	for _, k := range slices.Sorted(maps.Keys(s.faults)) {
		fmt.Fprintf(&b, "| %s | %d |\n", k, s.faults[k])
	}
	faultErrors := slices.Clone(s.faultErrors)
	s.mu.Unlock()
	if len(faultErrors) > 0 {
		fmt.Fprintf(&b, "\nFaults that could not be injected (%d):\n\n", len(faultErrors))
		for _, e := range faultErrors {
			fmt.Fprintf(&b, "- %s\n", e)
		}
	}

	fmt.Fprintf(&b, "\n## Lifecycle steps under faults\n\n")
	fmt.Fprintf(&b, "bind: claim created → Bound; write: first writer created → a writer succeeded; release: that writer deleted → gone (unpublish, unstage); snapshot: VolumeSnapshot created → readyToUse; restore: claim restored from it created → a reader of it succeeded; read: first reader created → a reader succeeded; delete: claim deleted → claim and PV gone.\n\n")
	fmt.Fprintf(&b, "| step | samples | p50 | p90 | max |\n|---|---:|---:|---:|---:|\n")
	for _, step := range steps {
		var d []time.Duration
		for _, c := range cycles {
			if v, ok := c.Steps[step]; ok {
				d = append(d, v)
			}
		}
		if len(d) == 0 {
			fmt.Fprintf(&b, "| %s | 0 | | | |\n", step)
			continue
		}
		slices.Sort(d)
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", step, len(d), seconds(framework.NearestRank(d, 0.5)), seconds(framework.NearestRank(d, 0.9)), seconds(d[len(d)-1]))
	}
	return b.String()
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// writeReport writes the report to _output/soak/report.md of the repository.
func writeReport(r string) error {
	path, err := framework.WriteOutput("soak", "report.md", []byte(r))
	if err != nil {
		return err
	}
	fmt.Printf("soak: report written to %s\n", path)
	return nil
}
