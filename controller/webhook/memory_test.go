package webhook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/albertofaria/pav/templating"
)

// The production memory settings of `pav controller` (cmd/pav/gc.go): GOGC
// 50, GOMEMLIMIT 80% of the chart's 256Mi limit.
const (
	productionGCPercent = 50
	productionLimit     = 256 << 20
	// What a review may add to the peak RSS: per byte of the review (a
	// decoded JSON value costs ~1 KiB through decoding, compiling and
	// checking, and `{}` is two bytes of it), and a constant.
	memoryPerByte   = 256
	memoryPerReview = 2 << 20
	// What the rest of the controller may use beside the webhook (its
	// caches, the leader's work) in a small cluster.
	memoryForTheRest = 64 << 20
)

// worstBodies are the costliest reviews within the bounds, per kind of
// spec, and the refused ones past them.
func worstBodies() map[string][]byte {
	item := func(n int, f func(i int) string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = f(i)
		}
		return strings.Join(items, ",")
	}
	pod := func(spec string) string { return `{"podTemplate":{"spec":` + spec + `}}` }
	staging := func(spec string) string { return `{"provisioningModes":["Static"],"volumeStaging":` + pod(spec) + `}` }
	container := func(i int) string { return fmt.Sprintf(`{"name":"c%d","image":"i"}`, i) }
	// Within the bounds: as many values as allowed, each as costly to decode
	// as can be.
	envs := staging(`{"containers":[` + item(templating.MaxSpecValues/3/256, func(i int) string {
		return fmt.Sprintf(`{"name":"c%d","image":"i","env":[`, i) + item(255, func(j int) string { return fmt.Sprintf(`{"name":"V%d","value":"x"}`, j) }) + `]}`
	}) + `]}`)
	containers := staging(`{"containers":[` + item(templating.MaxPodContainers, func(i int) string {
		return fmt.Sprintf(`{"name":"c%d","image":"i","ports":[`, i) + item(templating.MaxSpecValues/templating.MaxPodContainers/3-3, func(j int) string { return fmt.Sprintf(`{"containerPort":%d}`, j+1) }) + `]}`
	}) + `]}`)
	deep := strings.Repeat(`{"a":`, templating.MaxSpecDepth-6) + `{}` + strings.Repeat(`}`, templating.MaxSpecDepth-6)
	deepJSON := staging(`{"containers":[{"name":"c","image":"i"}],"nodeSelector":{},"affinity":` + deep + `}`)
	deepMany := staging(`{"containers":[{"name":"c","image":"i"}],"x":[` + item(templating.MaxSpecValues/(templating.MaxSpecDepth-5), func(int) string { return deep }) + `]}`)
	keys := staging(`{"containers":[{"name":"c","image":"i"}],"nodeSelector":{` + item(templating.MaxSpecValues/2-10, func(i int) string { return fmt.Sprintf(`"k%d":""`, i) }) + `}}`)
	empties := staging(`{"containers":[{"name":"c","image":"i"}],"x":[` + item(templating.MaxSpecValues-10, func(int) string { return `{}` }) + `]}`)
	str := strings.Repeat("x", templating.MaxSectionBytes-200)
	strs := `{"provisioningModes":["Static"]`
	for _, s := range []string{"volumeStaging", "volumeUnstaging"} {
		strs += `,"` + s + `":` + pod(`{"containers":[{"name":"c","image":"i","args":["`+str+`"]}]}`)
	}
	strs += `}`
	sections := `{"provisioningModes":["Dynamic"],"volumeCreation":{"capacity":"1Gi"}`
	for _, s := range []string{"volumeValidation", "volumeDeletion", "volumeStaging", "volumeUnstaging", "volumeExpansion", "volumeModification", "snapshotCreation", "snapshotDeletion"} {
		sections += `,"` + s + `":` + pod(`{"containers":[`+item(templating.MaxPodContainers, func(i int) string {
			return fmt.Sprintf(`{"name":"c%d","image":"i","env":[`, i) + item(5, func(j int) string { return fmt.Sprintf(`{"name":"V%d","value":"x"}`, j) }) + `]}`
		})+`]}`)
	}
	sections += `}`
	return map[string][]byte{
		"120000-containers": review(staging(`{"containers":[` + item(120000, container) + `]}`)),
		"envs":              review(envs),
		"container-ports":   review(containers),
		"deep":              review(deepJSON),
		"deep-many":         review(deepMany),
		"map-keys":          review(keys),
		"empty-objects":     review(empties),
		"huge-strings":      review(strs),
		"every-section":     review(sections),
	}
}

// The peak heap of a review is proportional to its size: measured in a
// process of its own with the production GOGC and GOMEMLIMIT, each of the
// costliest reviews within the bounds (and past them) raises the peak RSS
// by at most memoryPerByte times its bytes plus memoryPerReview, and four of
// them at once (the handler's slots) with every body it may hold stay
// within the controller's memory limit with room for the rest.
func TestReviewMemoryBound(t *testing.T) {
	if os.Getenv("PAV_WEBHOOK_MEMORY_CHILD") != "" {
		measureChild(t)
		return
	}
	if testing.Short() {
		t.Skip("runs a process per review")
	}
	dir := t.TempDir()
	bodies := worstBodies()
	worst, worstPeak := "", int64(0)
	for name, body := range bodies {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, body, 0o600); err != nil {
			t.Fatal(err)
		}
		peak, answer := measure(t, file, 1)
		t.Logf("%s, %d bytes: peak RSS +%.1f MiB (%.0f bytes per byte); answer %s", name, len(body), float64(peak)/(1<<20), float64(peak)/float64(len(body)), answer)
		if bound := memoryPerByte*int64(len(body)) + memoryPerReview; peak > bound {
			t.Errorf("%s: a review of %d bytes raised the peak RSS by %d bytes, more than %d", name, len(body), peak, bound)
		}
		if peak > worstPeak {
			worst, worstPeak = name, peak
		}
	}
	peak, _ := measure(t, filepath.Join(dir, worst), maxReviews)
	t.Logf("%d reviews %s at once: peak RSS +%.1f MiB", maxReviews, worst, float64(peak)/(1<<20))
	if room := int64(productionLimit/10*8 - memoryForTheRest - bodyBytes); peak > room {
		t.Errorf("%d reviews %s at once raised the peak RSS by %d bytes; with %d bytes of bodies held and %d for the rest of the controller, more than GOMEMLIMIT %d",
			maxReviews, worst, peak, bodyBytes, memoryForTheRest, productionLimit/10*8)
	}
}

// measure runs the handler on file, n reviews at once, in a child process and
// returns the rise of its peak RSS.
func measure(t *testing.T, file string, n int) (int64, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReviewMemoryBound$", "-test.v")
	cmd.Env = append(os.Environ(), "PAV_WEBHOOK_MEMORY_CHILD="+file, fmt.Sprintf("PAV_WEBHOOK_MEMORY_N=%d", n))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, answer, _ := bytes.Cut(out, []byte("answer "))
	answer, _, _ = bytes.Cut(answer, []byte("\n"))
	_, after, ok := bytes.Cut(out, []byte("peak-rise "))
	if !ok {
		t.Fatalf("child printed no peak:\n%s", out)
	}
	line, _, _ := bytes.Cut(after, []byte("\n"))
	v, err := strconv.ParseInt(string(line), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v, string(answer)
}

func measureChild(t *testing.T) {
	debug.SetGCPercent(productionGCPercent)
	debug.SetMemoryLimit(productionLimit / 10 * 8)
	body, err := os.ReadFile(os.Getenv("PAV_WEBHOOK_MEMORY_CHILD"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(os.Getenv("PAV_WEBHOOK_MEMORY_N"))
	h := &Handler{Check: templating.Check}
	serve := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
		return rec
	}
	// A first review loads what every review shares (the Jinja environment,
	// the decoders' caches), then the peak starts from here.
	warm := serve()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	base := peakRSS(t)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { serve() })
	}
	wg.Wait()
	var out struct {
		Response struct {
			Allowed bool
			Status  struct{ Message string }
		}
	}
	_ = json.Unmarshal(warm.Body.Bytes(), &out)
	fmt.Printf("answer %d allowed=%v %.150q\n", warm.Code, out.Response.Allowed, out.Response.Status.Message)
	fmt.Printf("peak-rise %d\n", peakRSS(t)-base)
}

// peakRSS is this process's peak RSS (VmHWM) since it was last reset.
func peakRSS(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
