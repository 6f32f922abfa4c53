// Package describe answers "why is my claim Pending?" and "what is this
// provisioner doing?" in one command (`pav describe`): it gathers, from the
// API server only, what PaV's labels, annotations and Events say about a
// claim or a PavProvisioner and prints it for a person, as kubectl describe
// does. What the caller may not read (another namespace's pods, logs) is
// left out with a note, never an error.
package describe

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/protocol"
)

// Client is what describing reads: the built-in API and PavProvisioners.
type Client interface {
	kubeclient.Interface
	kubeclient.PavInterface
}

// maxEvents bounds the Events shown per object, newest kept.
const maxEvents = 10

// Claim describes PersistentVolumeClaim namespace/name: its state and
// Events, its provisioner's conditions, every PaV pod for it (phase, node,
// /pav/error or why it failed, log tail), the pods using it and the staging
// pod on each of their nodes, and the Events PaV's controller and node
// plugins wrote about it, its PV and pods, with the Warning Events of the
// pods using it (kubelet's FailedMount, where a failed staging shows).
func Claim(ctx context.Context, c Client, namespace, name string, w io.Writer) error {
	pvc, err := c.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	p := &printer{w: w, now: now()}
	p.field("Name", pvc.Name)
	p.field("Namespace", pvc.Namespace)
	p.field("Status", string(pvc.Status.Phase))
	p.field("StorageClass", deref(pvc.Spec.StorageClassName))
	p.field("Volume", pvc.Spec.VolumeName)
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		p.field("Requested", q.String())
	}
	if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
		p.field("Capacity", q.String())
	}
	for _, cond := range pvc.Status.Conditions {
		p.field("Condition", fmt.Sprintf("%s=%s %s", cond.Type, cond.Status, cond.Message))
	}

	p.provisioner(ctx, c, pvc)

	volume := pvc.Spec.VolumeName
	if volume == "" {
		volume = protocol.VolumeName(pvc)
	}
	pods, note := pavPods(ctx, c, namespace,
		labels.Set{protocol.LabelClaimUID: string(pvc.UID)}.String(),
		labels.Set{protocol.LabelVolume: volume}.String())
	p.section("PaV pods")
	p.note(note)
	p.pods(ctx, c, pods)

	clients := p.usedBy(ctx, c, pvc, pods)

	p.section("Events")
	objs := []eventTarget{{namespace: namespace, uid: pvc.UID}}
	if pvc.Spec.VolumeName != "" {
		if pv, err := c.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{}); err == nil {
			objs = append(objs, eventTarget{namespace: metav1.NamespaceDefault, uid: pv.UID})
		}
	}
	for _, pod := range pods {
		objs = append(objs, eventTarget{namespace: pod.Namespace, uid: pod.UID})
	}
	// kubelet reports a failed staging on the client pod (FailedMount);
	// its other Events (scheduled, pulled, started) are not about the claim.
	for _, u := range clients {
		objs = append(objs, eventTarget{namespace: u.Namespace, uid: u.UID, warningsOnly: true})
	}
	p.events(ctx, c, objs)
	return p.err
}

// now is the time ages are counted to (tests fix it).
var now = time.Now

// Provisioner describes PavProvisioner name: its conditions, its volumes
// (PVs of its CSI driver), its stagings (staging pods) and recent failures
// (its pods that failed, with why, and Warning Events about it).
func Provisioner(ctx context.Context, c Client, name string, w io.Writer) error {
	pp, err := c.PavV1alpha1().PavProvisioners().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	p := &printer{w: w, now: now()}
	p.field("Name", pp.Name)
	p.field("Modes", joinModes(pp.Spec.ProvisioningModes))
	p.field("Age", p.age(pp.CreationTimestamp))
	p.section("Conditions")
	p.conditions(pp.Status.Conditions)

	p.section("Volumes")
	pvs, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		p.line(fmt.Sprintf("cannot list PersistentVolumes: %v", err))
	} else {
		t := p.table("NAME", "CLAIM", "CAPACITY", "STATUS", "AGE")
		for _, pv := range pvs.Items {
			if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != pp.Name {
				continue
			}
			claim := "<none>"
			if r := pv.Spec.ClaimRef; r != nil {
				claim = r.Namespace + "/" + r.Name
			}
			q := pv.Spec.Capacity[corev1.ResourceStorage]
			t.row(pv.Name, claim, q.String(), string(pv.Status.Phase), p.age(pv.CreationTimestamp))
		}
		t.flush()
	}

	pods, note := pavPods(ctx, c, metav1.NamespaceAll, labels.Set{protocol.LabelProvisioner: pp.Name}.String())
	p.section("Stagings")
	p.note(note)
	t := p.table("POD", "NODE", "VOLUME", "STATE", "AGE")
	for _, pod := range pods {
		if pod.Labels[protocol.LabelPhase] == string(protocol.PhaseStaging) {
			t.row(pod.Namespace+"/"+pod.Name, orNone(pod.Spec.NodeName), pod.Labels[protocol.LabelVolume], podState(pod), p.age(pod.CreationTimestamp))
		}
	}
	t.flush()

	p.section("Recent failures")
	failed := 0
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodFailed || pod.Annotations[protocol.AnnotationResultError] != "" {
			failed++
			p.line(fmt.Sprintf("%s pod %s/%s on node %s: %s", pod.Labels[protocol.LabelPhase], pod.Namespace, pod.Name, orNone(pod.Spec.NodeName),
				protocol.FailureMessage(pod, pod.Annotations[protocol.AnnotationResultError], nil)))
		}
	}
	if failed == 0 {
		p.line("no failed pod")
	}
	p.section("Events")
	p.events(ctx, c, []eventTarget{{namespace: metav1.NamespaceDefault, uid: pp.UID}})
	return p.err
}

// provisioner prints the section on the claim's provisioner and its
// conditions, when it is a PavProvisioner.
func (p *printer) provisioner(ctx context.Context, c Client, pvc *corev1.PersistentVolumeClaim) {
	prov := provisionerName(ctx, c, pvc)
	p.section("Provisioner")
	switch {
	case prov == "":
		p.line("none known: the claim's StorageClass is missing or names no provisioner")
	default:
		pp, err := c.PavV1alpha1().PavProvisioners().Get(ctx, prov, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			p.line(fmt.Sprintf("%s (not a PavProvisioner, or deleted)", prov))
		case err != nil:
			p.line(fmt.Sprintf("%s: %v", prov, err))
		default:
			p.line(pp.Name)
			p.conditions(pp.Status.Conditions)
		}
	}
}

// usedBy prints the section on the pods using the claim, each with the
// staging pod of its node (among PaV's pods), and returns them.
func (p *printer) usedBy(ctx context.Context, c Client, pvc *corev1.PersistentVolumeClaim, pods []*corev1.Pod) []*corev1.Pod {
	p.section("Used by")
	var clients []*corev1.Pod
	users, err := c.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		p.line(fmt.Sprintf("cannot list pods in %s: %v", pvc.Namespace, err))
	} else {
		n := 0
		for i := range users.Items {
			u := &users.Items[i]
			if usesClaim(u, pvc.Name) {
				n++
				clients = append(clients, u)
				staging := "no staging pod"
				for _, sp := range pods {
					if sp.Labels[protocol.LabelPhase] == string(protocol.PhaseStaging) && sp.Spec.NodeName == u.Spec.NodeName && u.Spec.NodeName != "" {
						staging = "staging pod " + sp.Namespace + "/" + sp.Name + " (" + podState(sp) + ")"
					}
				}
				p.line(fmt.Sprintf("%s on node %s (%s): %s", u.Name, orNone(u.Spec.NodeName), u.Status.Phase, staging))
			}
		}
		if n == 0 {
			p.line("no pod")
		}
	}
	return clients
}

// provisionerName is the provisioner the claim is for, by the controller's
// rule (protocol.ClaimProvisioner); "" if none.
func provisionerName(ctx context.Context, c Client, pvc *corev1.PersistentVolumeClaim) string {
	var class *storagev1.StorageClass
	if n := pvc.Spec.StorageClassName; n != nil && *n != "" {
		if sc, err := c.StorageV1().StorageClasses().Get(ctx, *n, metav1.GetOptions{}); err == nil {
			class = sc
		}
	}
	return protocol.ClaimProvisioner(pvc, class)
}

// pavPods lists PaV's pods matching any of the selectors, in every
// namespace (a provisioner's pods may run outside the claim's), or, if the
// caller may not list those, in namespace; note says what was left out.
func pavPods(ctx context.Context, c Client, namespace string, selectors ...string) (pods []*corev1.Pod, note string) {
	seen := map[types.UID]bool{}
	for _, sel := range selectors {
		l, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil && namespace != metav1.NamespaceAll {
			note = fmt.Sprintf("only pods in namespace %s are shown (listing pods in every namespace: %v)", namespace, err)
			l, err = c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		}
		if err != nil {
			return pods, fmt.Sprintf("cannot list PaV's pods: %v", err)
		}
		for i := range l.Items {
			if pod := &l.Items[i]; !seen[pod.UID] {
				seen[pod.UID] = true
				pods = append(pods, pod)
			}
		}
	}
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return pods[i].Name < pods[j].Name
	})
	return pods, note
}

func usesClaim(pod *corev1.Pod, claim string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
		if v.Ephemeral != nil && pod.Name+"-"+v.Name == claim {
			return true
		}
	}
	return false
}

// podState is a pod's phase, with PaV's own record that it succeeded.
func podState(pod *corev1.Pod) string {
	s := string(pod.Status.Phase)
	if pod.Status.Phase != corev1.PodSucceeded && protocol.Succeeded(pod) {
		s = "Succeeded (reported by the node plugin)"
	}
	if pod.DeletionTimestamp != nil {
		s += ", being deleted"
	}
	return s
}

// eventTarget is an object whose Events are shown: all, or only Warnings.
type eventTarget struct {
	namespace    string
	uid          types.UID
	warningsOnly bool
}

// printer writes a description; the first write error sticks in err.
type printer struct {
	w   io.Writer
	now time.Time
	err error
}

func (p *printer) printf(format string, args ...interface{}) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) field(name, value string) {
	if value != "" {
		p.printf("%-13s %s\n", name+":", terminalSafe(value, "\n"))
	}
}

func (p *printer) section(title string) { p.printf("\n%s:\n", title) }

// line prints an item of a section, a multi-line one indented as a block.
func (p *printer) line(s string) {
	s = terminalSafe(s, "\n")
	indent := "\n    " + s[:len(s)-len(strings.TrimLeft(s, " "))]
	p.printf("  %s\n", strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", indent))
}

func (p *printer) note(s string) {
	if s != "" {
		p.line("(" + s + ")")
	}
}

func (p *printer) age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(p.now.Sub(t.Time))
}

func (p *printer) conditions(conds []metav1.Condition) {
	if len(conds) == 0 {
		p.line("no conditions reported yet")
	}
	for _, c := range conds {
		p.line(fmt.Sprintf("%s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message))
	}
}

// pods prints each pod: phase label, name, node, state, and if it failed or
// wrote /pav/error, why, and the last lines of its containers' logs when
// the caller may read them.
func (p *printer) pods(ctx context.Context, c Client, pods []*corev1.Pod) {
	if len(pods) == 0 {
		p.line("no pod (PaV removes a finished pod once it has read its results: the Events below say how it ended)")
	}
	for _, pod := range pods {
		p.line(fmt.Sprintf("%s pod %s/%s on node %s: %s, %s old", pod.Labels[protocol.LabelPhase], pod.Namespace, pod.Name,
			orNone(pod.Spec.NodeName), podState(pod), p.age(pod.CreationTimestamp)))
		pavError := pod.Annotations[protocol.AnnotationResultError]
		if pavError != "" {
			p.line("  /pav/error: " + strings.TrimSpace(pavError))
		}
		if pod.Status.Phase == corev1.PodFailed && pavError == "" {
			p.line("  failed: " + protocol.FailureMessage(pod, "", nil))
		}
		if pod.Status.Phase == corev1.PodPending {
			for _, cs := range pod.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil && w.Reason != "" {
					p.line(fmt.Sprintf("  container %s waiting: %s %s", cs.Name, w.Reason, w.Message))
				}
			}
			for _, cond := range pod.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
					p.line(fmt.Sprintf("  not scheduled: %s", cond.Message))
				}
			}
		}
		if pod.Status.Phase == corev1.PodPending || pod.Spec.NodeName == "" {
			continue
		}
		for _, ctr := range pod.Spec.Containers {
			tail, err := protocol.LogTail(ctx, c.CoreV1().Pods(pod.Namespace), pod, ctr.Name)
			switch {
			case err != nil:
				p.line(fmt.Sprintf("  log of %s: not readable (%s)", ctr.Name, shortError(err)))
			case strings.TrimSpace(tail) != "":
				p.line(fmt.Sprintf("  log of %s (last lines):\n%s", ctr.Name, tail))
			}
		}
	}
}

// events prints the newest Events about the objects.
func (p *printer) events(ctx context.Context, c Client, objs []eventTarget) {
	var all []corev1.Event
	seen := map[string]bool{}
	for _, o := range objs {
		sel := fields.Set{"involvedObject.uid": string(o.uid)}
		if o.warningsOnly {
			sel["type"] = corev1.EventTypeWarning
		}
		l, err := c.CoreV1().Events(o.namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
		if err != nil {
			p.line(fmt.Sprintf("cannot list Events in %s: %s", o.namespace, shortError(err)))
			continue
		}
		for _, e := range l.Items {
			if e.InvolvedObject.UID != o.uid || (o.warningsOnly && e.Type != corev1.EventTypeWarning) {
				continue // what the selector chose, whatever the server did with it
			}
			if key := e.Namespace + "/" + e.Name; !seen[key] {
				seen[key] = true
				all = append(all, e)
			}
		}
	}
	if len(all) == 0 {
		p.line("no Events (they expire after an hour by default)")
		return
	}
	sort.SliceStable(all, func(i, j int) bool { return eventTime(&all[i]).Before(eventTime(&all[j])) })
	if len(all) > maxEvents {
		all = all[len(all)-maxEvents:]
	}
	t := p.table("AGE", "TYPE", "REASON", "OBJECT", "FROM", "MESSAGE")
	for i := range all {
		e := &all[i]
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		if e.Source.Host != "" {
			from += " on " + e.Source.Host
		}
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Count)
		}
		t.row(p.age(metav1.NewTime(eventTime(e)))+count, e.Type, e.Reason, strings.ToLower(e.InvolvedObject.Kind)+"/"+e.InvolvedObject.Name,
			from, strings.ReplaceAll(strings.TrimSpace(e.Message), "\n", " | "))
	}
	t.flush()
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

type table struct {
	p  *printer
	tw *tabwriter.Writer
	n  int
}

func (p *printer) table(header ...string) *table {
	t := &table{p: p, tw: tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)}
	t.write(header)
	return t
}

func (t *table) write(cells []string) {
	for i, c := range cells {
		cells[i] = terminalSafe(c, "") // a tab or line break would break the columns
	}
	if t.p.err == nil {
		_, t.p.err = fmt.Fprintf(t.tw, "  %s\n", strings.Join(cells, "\t"))
	}
}

func (t *table) row(cells ...string) { t.n++; t.write(cells) }

func (t *table) flush() {
	if t.n == 0 {
		// Drop the header: nothing to head.
		t.tw = tabwriter.NewWriter(io.Discard, 0, 4, 2, ' ', 0)
		t.p.line("none")
		return
	}
	if err := t.tw.Flush(); err != nil && t.p.err == nil {
		t.p.err = err
	}
}

// terminalSafe escapes what a terminal would act on rather than show, but
// the characters in keep: much of what describe prints was written by pods
// (/pav/error, termination messages, logs) or by tenants, and an escape
// sequence in it could rewrite the screen, hide a line or set the terminal's
// title. Control characters (ESC, CR, backspace, C1 controls), Unicode's
// bidirectional overrides and invalid UTF-8 become Go escapes (\x1b,
// \u202e).
func terminalSafe(s, keep string) string {
	safe := func(r rune) bool {
		return (!unicode.IsControl(r) && !unicode.Is(unicode.Bidi_Control, r) && r != utf8.RuneError) || strings.ContainsRune(keep, r)
	}
	if strings.IndexFunc(s, func(r rune) bool { return !safe(r) }) < 0 {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, "\\x%02x", s[0])
		case safe(r):
			b.WriteString(s[:n])
		case r < 0x100:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
		s = s[n:]
	}
	return b.String()
}

func shortError(err error) string {
	if s := apierrors.ReasonForError(err); s != metav1.StatusReasonUnknown {
		return string(s)
	}
	return err.Error()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func joinModes(modes []v1alpha1.ProvisioningMode) string {
	s := make([]string, len(modes))
	for i, m := range modes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}
