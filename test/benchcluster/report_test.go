//go:build benchcluster

package benchcluster

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// The systems compared, the columns of the table.
const (
	floor     = "floor"
	csiAnchor = "csi"
	pav       = "pav"
)

var columns = []struct{ system, title string }{
	{floor, "floor (plain pod)"},
	{csiAnchor, "CSI anchor (external-provisioner v5.3.0 + minimal driver)"},
	{pav, "PaV"},
}

// stat summarises samples in milliseconds: p50 and p90 by nearest rank.
type stat struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
}

func stats(v []float64) stat {
	if len(v) == 0 {
		return stat{}
	}
	s := slices.Sorted(slices.Values(v))
	return stat{N: len(s), P50: framework.NearestRank(s, 0.5), P90: framework.NearestRank(s, 0.9)}
}

type latencyRow struct {
	Metric string          `json:"metric"`
	Values map[string]stat `json:"values"` // by system
}

type step struct {
	Step string `json:"step"`
	stat
}

type memRow struct {
	System  string `json:"system"`
	Process string `json:"process"`
	State   string `json:"state"`
	memory
}

// report is what a run found; _output/bench/cluster.json holds it as JSON.
type report struct {
	Date       time.Time `json:"date"`
	Commit     string    `json:"commit"`
	PavImage   string    `json:"pav_image_id"`
	Kubernetes string    `json:"kubernetes"`
	Nodes      int       `json:"nodes"`
	CPUs       int       `json:"cpus"`
	Settings   settings  `json:"settings"`
	ClientNode string    `json:"client_node"`

	Latency []latencyRow `json:"latency"`
	// Breakdown of a client pod's start on a PaV volume, by staging pod
	// kind: offsets from the client's creation, then the spans that matter.
	Breakdown map[string][]step `json:"breakdown"`
	Burst     []burstResult     `json:"burst"`
	Memory    []memRow          `json:"memory"`
	// Staging for many clients of one claim on one node, shared or not.
	Staging []footprint `json:"staging"`
}

func (b *bench) newReport() *report {
	r := &report{Date: time.Now().UTC(), CPUs: runtime.NumCPU(), Settings: b.cfg, ClientNode: b.node, Breakdown: map[string][]step{}}
	if root, err := framework.RepoRoot(); err == nil {
		if out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output(); err == nil {
			r.Commit = strings.TrimSpace(string(out))
		}
	}
	if v, err := b.f.Client.Discovery().ServerVersion(); err == nil {
		r.Kubernetes = v.GitVersion
	}
	if nodes, err := b.f.Client.CoreV1().Nodes().List(b.f.Ctx, metav1.ListOptions{}); err == nil {
		r.Nodes = len(nodes.Items)
	}
	if p, err := b.nodePlugin(); err == nil && len(p.Status.ContainerStatuses) > 0 {
		r.PavImage = p.Status.ContainerStatuses[0].ImageID
	}
	return r
}

// row records a metric's samples for a system.
func (r *report) row(metric, system string, samples []float64) {
	i := slices.IndexFunc(r.Latency, func(l latencyRow) bool { return l.Metric == metric })
	if i < 0 {
		r.Latency = append(r.Latency, latencyRow{Metric: metric, Values: map[string]stat{}})
		i = len(r.Latency) - 1
	}
	r.Latency[i].Values[system] = stats(samples)
}

// breakdown records the milestones of client starts on PaV volumes.
// published maps "<namespace>/<staging pod>" to when its NodePublishVolume
// returned; a sample whose line is missing only lacks those steps.
func (r *report) breakdown(kind string, samples []clientSample, published map[string]time.Time) {
	signal := stepExited
	if kind == "long-running" {
		signal = stepReadyFile
	}
	type span struct {
		name     string
		from, to func(s clientSample) time.Time
	}
	created := func(s clientSample) time.Time { return s.created }
	pub := func(s clientSample) time.Time { return published[s.namespace+"/"+s.staging] }
	spans := []span{
		{stepStagingCreated, created, func(s clientSample) time.Time { return s.stagingAdded }},
		{signal, created, func(s clientSample) time.Time { return s.signal }},
		{stepStagingDone, created, func(s clientSample) time.Time { return s.stagingEnd }},
		{stepPublished, created, pub},
		{stepClientReady, created, func(s clientSample) time.Time { return s.ready }},
		{signal + " → staging pod `Succeeded` seen", func(s clientSample) time.Time { return s.signal }, func(s clientSample) time.Time { return s.stagingEnd }},
		{signal + " → NodePublishVolume returned", func(s clientSample) time.Time { return s.signal }, pub},
		{"NodePublishVolume returned → client pod Ready seen", pub, func(s clientSample) time.Time { return s.ready }},
	}
	for _, sp := range spans {
		var v []float64
		for _, s := range samples {
			if from, to := sp.from(s), sp.to(s); !from.IsZero() && !to.IsZero() {
				v = append(v, since(from, to))
			}
		}
		if len(v) > 0 {
			r.Breakdown[kind] = append(r.Breakdown[kind], step{Step: sp.name, stat: stats(v)})
		}
	}
}

// ms renders milliseconds: "48 ms", "1.23 s".
func ms(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	if v >= 10 {
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.1f ms", v)
}

func (s stat) String() string {
	if s.N == 0 {
		return "–"
	}
	return ms(s.P50) + " / " + ms(s.P90)
}

// markdown renders the report as docs/benchmarks.md shows it.
func (r *report) markdown() string {
	var w strings.Builder
	fmt.Fprintf(&w, "Cluster benchmark (`make bench-cluster`), %s, commit %s, Kubernetes %s, %d nodes, %d CPUs; clients on %s. Latencies: p50 / p90 of %d samples each, one at a time.\n\n",
		r.Date.Format("2006-01-02 15:04 UTC"), r.Commit, r.Kubernetes, r.Nodes, r.CPUs, r.ClientNode, r.Settings.Samples)
	r.latencyTable(&w)
	if r.Settings.Anchor {
		w.WriteString("\nCSI anchor: no staging pod (its client rows are one series, shown twice); external-provisioner with PaV's client rate limits (200 API requests/s, burst 400) instead of its defaults (5, burst 10).\n")
	}

	r.breakdownTable(&w)
	if len(r.Staging) > 0 {
		w.WriteString("\nStaging for many client pods of one claim on one node (a gocryptfs daemon per staging pod); memory of the staging pods, MiB, as below:\n\n")
		w.WriteString("| provisioner | clients | staging pods | staging pods' memory |\n|---|---:|---:|---|\n")
		for _, f := range r.Staging {
			fmt.Fprintf(&w, "| %s | %d | %d | %.1f / %.1f (%.1f) |\n", f.Provisioner, f.Clients, f.StagingPods, f.WorkingSet, f.VmRSS, f.RssFile)
		}
	}

	r.memoryTable(&w)
	return w.String()
}

// latencyTable writes the latencies of each system, and its burst.
func (r *report) latencyTable(w *strings.Builder) {
	w.WriteString("| metric |")
	for _, c := range columns {
		w.WriteString(" " + c.title + " |")
	}
	w.WriteString("\n|---|" + strings.Repeat("---|", len(columns)) + "\n")
	for _, l := range r.Latency {
		if !slices.ContainsFunc(slices.Collect(maps.Values(l.Values)), func(s stat) bool { return s.N > 0 }) {
			continue // e.g. a creation pod seen Succeeded: PaV may delete it before
		}
		w.WriteString("| " + l.Metric + " |")
		for _, c := range columns {
			w.WriteString(" " + l.Values[c.system].String() + " |")
		}
		w.WriteString("\n")
	}
	if len(r.Burst) > 0 {
		fmt.Fprintf(w, "| burst of %d claims: PVs created / claims bound / PVs deleted per s |", r.Settings.Burst)
		for _, c := range columns {
			cell := "–"
			for _, bu := range r.Burst {
				if bu.System == c.system {
					cell = fmt.Sprintf("%.1f / %.1f / %.1f", bu.Created, bu.Bound, bu.Deleted)
				}
			}
			w.WriteString(" " + cell + " |")
		}
		w.WriteString("\n")
	}
}

// breakdownTable writes a client pod's start, milestone by milestone.
func (r *report) breakdownTable(w *strings.Builder) {
	kinds := []string{"run-to-completion", "long-running"}
	w.WriteString("\nA client pod's start on a PaV volume, by staging pod (p50 / p90; milestones are offsets from the client's creation):\n\n")
	w.WriteString("| milestone | " + strings.Join(kinds, " staging pod | ") + " staging pod |\n|---|---|---|\n")
	var steps []string
	for _, k := range kinds {
		for _, s := range r.Breakdown[k] {
			if !slices.Contains(steps, s.Step) {
				steps = append(steps, s.Step)
			}
		}
	}
	for _, name := range steps {
		w.WriteString("| " + name + " |")
		for _, k := range kinds {
			cell := "–"
			for _, s := range r.Breakdown[k] {
				if s.Step == name {
					cell = s.stat.String()
				}
			}
			w.WriteString(" " + cell + " |")
		}
		w.WriteString("\n")
	}
}

// memoryTable writes the memory of each process in each state.
func (r *report) memoryTable(w *strings.Builder) {
	var states []string
	for _, m := range r.Memory {
		if !slices.Contains(states, m.State) {
			states = append(states, m.State)
		}
	}
	w.WriteString("\nMemory, MiB, working set (kubelet's: cgroup usage minus inactive files) / VmRSS (of which mapped files: the binary's pages, page cache each process sharing it counts again):\n\n")
	w.WriteString("| process | " + strings.Join(states, " | ") + " |\n|---|" + strings.Repeat("---|", len(states)) + "\n")
	for _, sys := range []string{pav, csiAnchor} {
		r.memoryRows(w, sys, states)
	}
}

// memoryRows writes the rows of one system's processes, and their total.
func (r *report) memoryRows(w *strings.Builder, sys string, states []string) {
	var procs []string
	for _, m := range r.Memory {
		if m.System == sys && !slices.Contains(procs, m.Process) {
			procs = append(procs, m.Process)
		}
	}
	if len(procs) == 0 {
		return
	}
	total := map[string]memory{}
	for _, p := range procs {
		w.WriteString("| " + p + " |")
		for _, st := range states {
			cell := "–"
			for _, m := range r.Memory {
				if m.System == sys && m.Process == p && m.State == st {
					cell = fmt.Sprintf("%.1f / %.1f (%.1f)", m.WorkingSet, m.VmRSS, m.RssFile)
					t := total[st]
					t.WorkingSet += m.WorkingSet
					t.VmRSS += m.VmRSS
					t.RssFile += m.RssFile
					total[st] = t
				}
			}
			w.WriteString(" " + cell + " |")
		}
		w.WriteString("\n")
	}
	if len(procs) > 1 {
		name := map[string]string{pav: "PaV", csiAnchor: "CSI anchor"}[sys]
		w.WriteString("| **" + name + ", total** |")
		for _, st := range states {
			if t, ok := total[st]; ok {
				fmt.Fprintf(w, " **%.1f / %.1f (%.1f)** |", t.WorkingSet, t.VmRSS, t.RssFile)
			} else {
				w.WriteString(" – |")
			}
		}
		w.WriteString("\n")
	}
}

// Markers around the cluster benchmark's tables in docs/benchmarks.md, which
// write replaces with the run's.
const (
	docTablesBegin = "<!-- make bench-cluster: tables begin -->"
	docTablesEnd   = "<!-- make bench-cluster: tables end -->"
)

// write saves the report as _output/bench/cluster.json, its tables as
// _output/bench/cluster.md, and puts the tables into docs/benchmarks.md.
func (r *report) write(table string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"cluster.json": append(b, '\n'), "cluster.md": []byte(table)} {
		path, err := framework.WriteOutput("bench", name, data)
		if err != nil {
			return err
		}
		fmt.Printf("wrote %s\n", path)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	doc := filepath.Join(root, "docs", "benchmarks.md")
	text, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	before, rest, ok1 := strings.Cut(string(text), docTablesBegin)
	_, after, ok2 := strings.Cut(rest, docTablesEnd)
	if !ok1 || !ok2 {
		return fmt.Errorf("%s lacks the markers %q and %q", doc, docTablesBegin, docTablesEnd)
	}
	if err := os.WriteFile(doc, []byte(before+docTablesBegin+"\n\n"+table+"\n"+docTablesEnd+after), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", doc, err)
	}
	fmt.Printf("updated %s\n", doc)
	return nil
}
