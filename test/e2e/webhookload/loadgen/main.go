// Command pav-webhook-load sends hostile AdmissionReviews to PaV's admission
// webhook, as any pod could: concurrent requests of up to the webhook's body
// limit, with templates that are expensive to compile and bodies that are
// not JSON, literal specs past the bounds (120,000 containers, deep
// structures, many environment variables), and bodies dribbled a byte at a
// time (-slow). It is built into the test image (hack/images/build.sh) and run
// by test/e2e/webhookload.
//
// It prints "load: in flight" once every worker has sent its first request
// (written it, or had its connection refused), then, when done, one line "load: summary " followed by a JSON
// object: per kind of payload, how many requests ended how (HTTP status and
// whether the review was allowed, or the class of error).
package main

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The webhook's limits the payloads go up to: the body (1.5 MiB) and one
// template (256 KiB).
const (
	maxBody     = 1536 << 10
	maxTemplate = 256 << 10
)

func main() {
	url := flag.String("url", "", "the webhook's URL")
	workers := flag.Int("concurrency", 50, "requests in flight at once")
	duration := flag.Duration("duration", time.Minute, "how long to keep sending")
	count := flag.Int("count", 0, "requests per worker (0: until -duration)")
	timeout := flag.Duration("timeout", 40*time.Second, "per request")
	slow := flag.Int("slow", 0, "of the workers, how many dribble their bodies (a byte per 100 ms)")
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "-url is required")
		os.Exit(2)
	}
	kinds := payloads()
	for _, k := range kinds {
		fmt.Printf("load: payload %s: %d bytes\n", k.name, len(k.body))
	}

	// A new connection per request: the Service spreads connections over
	// the replicas, and each handshake is work for the server too.
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // an attacker does not care who answers
		DisableKeepAlives: true,
	}}
	var (
		mu       sync.Mutex
		outcomes = map[string]map[string]int{} // kind -> outcome -> count
		written  atomic.Int64
		once     sync.Once
	)
	sent := func() {
		if written.Add(1) == int64(*workers) {
			once.Do(func() { fmt.Println("load: in flight") })
		}
	}
	deadline := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; (*count == 0 || n < *count) && (*count > 0 || time.Now().Before(deadline)); n++ {
				k := kinds[(w+n)%len(kinds)]
				var body io.Reader = bytes.NewReader(k.body)
				if w < *slow {
					k.name = "slow"
					body = &dribble{r: body}
				}
				out := send(client, sent, *url, body)
				mu.Lock()
				if outcomes[k.name] == nil {
					outcomes[k.name] = map[string]int{}
				}
				outcomes[k.name][out]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	summary, _ := json.Marshal(outcomes)
	fmt.Printf("load: summary %s\n", summary)
}

// send posts one body and says how it ended; sent is called once the
// request is written or its connection failed.
func send(client *http.Client, sent func(), url string, body io.Reader) string {
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		return "error: " + err.Error()
	}
	var once sync.Once
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(sent) },
	}))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	once.Do(sent)
	if err != nil {
		return classify(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Sprintf("%d, then %s", resp.StatusCode, classify(err))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprint(resp.StatusCode)
	}
	var review struct {
		Response struct {
			Allowed bool `json:"allowed"`
		} `json:"response"`
	}
	if json.Unmarshal(answer, &review) != nil {
		return "200 not a review"
	}
	if review.Response.Allowed {
		return "200 allowed"
	}
	return "200 denied"
}

// classify names an error by its class, so the summary stays short.
func classify(err error) string {
	s := err.Error()
	for _, c := range []struct{ match, class string }{
		{"certificate required", "tls: certificate required"},
		{"tls:", "tls: other"},
		{"Client.Timeout", "timeout"},
		{"connection refused", "connection refused"},
		{"connection reset", "connection reset"},
		{"broken pipe", "broken pipe"},
		{"use of closed network connection", "connection closed"},
		{"EOF", "EOF"},
	} {
		if strings.Contains(s, c.match) {
			return c.class
		}
	}
	if len(s) > 60 { // the cause is at the end
		s = "..." + s[len(s)-60:]
	}
	return "error: " + s
}

// dribble reads r a byte per 100 ms, as a client that sends its body
// slowly (the request is chunked: its length is not known up front).
type dribble struct{ r io.Reader }

func (d *dribble) Read(p []byte) (int, error) {
	time.Sleep(100 * time.Millisecond)
	return d.r.Read(p[:min(len(p), 1)])
}

type payload struct {
	name string
	body []byte
}

// payloads are the hostile bodies, each at most maxBody.
func payloads() []payload {
	// repeat fills a template of at most maxTemplate bytes: head, unit as
	// many times as fit, tail.
	repeat := func(head, unit, tail string) string {
		return head + strings.Repeat(unit, (maxTemplate-len(head)-len(tail))/len(unit)) + tail
	}
	nest := func(open, close string) string {
		n := (maxTemplate) / (len(open) + len(close))
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	garbage := make([]byte, maxBody)
	_, _ = rand.Read(garbage)
	return []payload{
		// compile memory: a left-deep sum per template
		{"sum", review(fill(repeat("{{ 1", "+1", " }}")))},
		// compile time: a left-deep concatenation per template
		{"concat", review(fill(repeat("{{ 'a'", " ~ 'a'", " }}")))},
		// the nesting check: filtered block sets, nested
		{"set-nesting", review(fill(nest("{% set x|trim('=') %}", "{% endset %}")))},
		// render time and memory, in case anything renders at admission
		{"render", review([]string{
			"{{ ('x '*2000000)|wordwrap(65536) }}",
			strings.Repeat("{% set s = ('x'*4000000)|upper %}", 1000),
		})},
		{"garbage", garbage},
		{"deep-json", []byte(strings.Repeat("[", maxBody))},
		// literal specs, no template: past the body limit, and within it
		// past the bounds on containers, depth and environment
		{"120000-containers", literal(items(120000, func(i int) string { return fmt.Sprintf(`{"name":"c%d","image":"i"}`, i) }))},
		{"40000-containers", literal(items(40000, func(i int) string { return fmt.Sprintf(`{"name":"c%d","image":"i"}`, i) }))},
		{"deep-literal", literal(`{"name":"c","image":"i","x":` + strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat(`}`, 5000) + `}`)},
		{"env", literal(`{"name":"c","image":"i","env":[` + items(30000, func(i int) string { return fmt.Sprintf(`{"name":"V%d","value":"x"}`, i) }) + `]}`)},
	}
}

// items joins n items.
func items(n int, item func(i int) string) string {
	out := make([]string, n)
	for i := range out {
		out[i] = item(i)
	}
	return strings.Join(out, ",")
}

// literal is a CREATE AdmissionReview of a PavProvisioner whose staging pod
// template has the containers given (JSON list items) and no template; it
// may be larger than maxBody.
func literal(containers string) []byte {
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"00000000-0000-0000-0000-000000000000",` +
		`"kind":{"group":"pav.albertofaria.github.io","version":"v1alpha1","kind":"PavProvisioner"},"operation":"CREATE","name":"hostile",` +
		`"object":{"apiVersion":"pav.albertofaria.github.io/v1alpha1","kind":"PavProvisioner","metadata":{"name":"hostile"},` +
		`"spec":{"provisioningModes":["Static"],"volumeStaging":{"podTemplate":{"spec":{"containers":[` + containers + `]}}}}}}}`)
}

// fill repeats tpl as many times as a review holds.
func fill(tpl string) []string {
	var out []string
	for size := 0; size+len(tpl)+64 < maxBody-4096; size += len(tpl) + 64 {
		out = append(out, tpl)
	}
	return out
}

// review is a CREATE AdmissionReview of a PavProvisioner whose staging pod
// template carries templates as annotations (every string under spec is a
// template).
func review(templates []string) []byte {
	annotations := map[string]string{}
	for i, t := range templates {
		annotations[fmt.Sprintf("a%d", i)] = t
	}
	r := map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid":       "00000000-0000-0000-0000-000000000000",
			"kind":      map[string]string{"group": "pav.albertofaria.github.io", "version": "v1alpha1", "kind": "PavProvisioner"},
			"resource":  map[string]string{"group": "pav.albertofaria.github.io", "version": "v1alpha1", "resource": "pavprovisioners"},
			"operation": "CREATE",
			"name":      "hostile",
			"userInfo":  map[string]any{"username": "system:serviceaccount:kube-system:anyone"},
			"object": map[string]any{
				"apiVersion": "pav.albertofaria.github.io/v1alpha1", "kind": "PavProvisioner",
				"metadata": map[string]any{"name": "hostile"},
				"spec": map[string]any{
					"provisioningModes": []string{"Dynamic"},
					"volumeCreation":    map[string]any{"capacity": "1Gi"},
					"volumeStaging": map[string]any{"podTemplate": map[string]any{
						"metadata": map[string]any{"annotations": annotations},
						"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}},
					}},
				},
			},
		},
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	if len(b) > maxBody {
		panic(fmt.Sprintf("review of %d bytes: more than the body limit", len(b)))
	}
	return b
}
