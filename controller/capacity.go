package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// Event reasons of storage capacity tracking, on PavProvisioners.
const (
	reasonCapacityUnknown = "CapacityUnknown"
)

// capacityFailuresToRemove: after this many failed measurements of an item
// in a row its CSIStorageCapacity object is deleted; until then it keeps
// the last value measured, as external-provisioner does for a failed
// GetCapacity (one slow or failed measurement must not close a segment).
const capacityFailuresToRemove = 3

// capacityItem is one measurement: a StorageClass of the provisioner in one
// topology segment, measured on node (the first Ready, schedulable node of
// the segment by name; the first by name if none is).
type capacityItem struct {
	key     string // protocol.CapacityKey
	class   *storagev1.StorageClass
	segment protocol.Segment
	node    string
}

func capacityObjectName(key string) string { return "pav-" + key }

// capacityItems lists what the provisioner measures: every segment of the
// cluster's nodes (nodes lacking a topology label belong to none) for every
// WaitForFirstConsumer StorageClass naming the provisioner (the scheduler
// reads capacity only for those, and external-provisioner by default
// publishes none for Immediate classes).
func (c *Controller) capacityItems(p *v1alpha1.PavProvisioner) ([]capacityItem, error) {
	nodes, err := c.nodes.List(everything)
	if err != nil {
		return nil, err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	segments := map[string]protocol.Segment{}
	nodeOf := map[string]string{}
	usable := map[string]bool{}
	for _, n := range nodes {
		seg, missing := protocol.NodeSegment(p.Spec.TopologyKeys, n.Labels)
		if missing != "" {
			continue
		}
		k := seg.Key()
		if segments[k] == nil {
			segments[k], nodeOf[k] = seg, n.Name
		}
		if !usable[k] && nodeUsable(n) {
			usable[k], nodeOf[k] = true, n.Name
		}
	}
	classes, err := c.classes.List(everything)
	if err != nil {
		return nil, err
	}
	var items []capacityItem
	for _, sc := range classes {
		if sc.Provisioner != p.Name || sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
			continue
		}
		for k, seg := range segments {
			items = append(items, capacityItem{key: protocol.CapacityKey(sc.Name, seg), class: sc, segment: seg, node: nodeOf[k]})
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })
	return items, nil
}

// capacityRoundDue: whether the provisioner's next round of measurements is
// due. That time is all capacity tracking keeps in memory: losing it (a new
// leader) only measures everything once more at once.
func (c *Controller) capacityRoundDue(name string, now time.Time) bool {
	c.capacityMu.Lock()
	defer c.capacityMu.Unlock()
	due, ok := c.capacityDue[name]
	return !ok || !now.Before(due)
}

func (c *Controller) capacityRoundDone(name string, next time.Time) {
	c.capacityMu.Lock()
	defer c.capacityMu.Unlock()
	c.capacityDue[name] = next
}

// capacityFailed counts a failed measurement of an item and returns how
// many failed in a row; capacityMeasured resets the count.
func (c *Controller) capacityFailed(name, key string) int {
	c.capacityMu.Lock()
	defer c.capacityMu.Unlock()
	if c.capacityFailures[name] == nil {
		c.capacityFailures[name] = map[string]int{}
	}
	c.capacityFailures[name][key]++
	return c.capacityFailures[name][key]
}

func (c *Controller) capacityMeasured(name, key string) {
	c.capacityMu.Lock()
	defer c.capacityMu.Unlock()
	delete(c.capacityFailures[name], key)
}

// forgetCapacityFailures drops the counts of items no longer measured.
func (c *Controller) forgetCapacityFailures(name string, wanted map[string]bool) {
	c.capacityMu.Lock()
	defer c.capacityMu.Unlock()
	for key := range c.capacityFailures[name] {
		if !wanted[key] {
			delete(c.capacityFailures[name], key)
		}
	}
	if len(c.capacityFailures[name]) == 0 {
		delete(c.capacityFailures, name)
	}
}

// refreshCapacity makes the provisioner's next sync measure every segment
// again (a volume was created or deleted).
func (c *Controller) refreshCapacity(name string) {
	c.capacityMu.Lock()
	delete(c.capacityDue, name)
	c.capacityMu.Unlock()
	c.provisionerQueue.Add(name)
}

// syncCapacity publishes the provisioner's CSIStorageCapacity objects, one
// per item, measured by template or by pod at most once per refresh period
// (and again after each creation and deletion). A measurement that fails
// (template error, a pod that fails, writes something that is not a
// quantity, or does not finish within the period) is a Warning Event on the
// provisioner; the item's object keeps its last value until
// capacityFailuresToRemove measurements failed in a row, and is deleted
// then: the scheduler reads a missing object as no capacity, so
// WaitForFirstConsumer claims of the class are kept off the segment until a
// measurement succeeds, rather than sent to a node that may be full. enabled false (no storageCapacity, an invalid
// spec, the provisioner going) removes every object and pod.
func (c *Controller) syncCapacity(ctx context.Context, p *v1alpha1.PavProvisioner, enabled bool) error {
	var pods []*corev1.Pod
	for _, pod := range c.podsBy(indexProvisioner, protocol.LabelValue(p.Name)) {
		if phaseOf(pod) == protocol.PhaseCapacity {
			pods = append(pods, pod)
		}
	}
	objs := map[string]*storagev1.CSIStorageCapacity{}
	list, _ := c.capacityIndexer.ByIndex(indexProvisioner, protocol.LabelValue(p.Name))
	for _, o := range list {
		if csc, ok := o.(*storagev1.CSIStorageCapacity); ok && ownedBy(csc, p) {
			objs[csc.Name] = csc
		}
	}
	var items []capacityItem
	if enabled {
		var err error
		if items, err = c.capacityItems(p); err != nil {
			return err
		}
	}
	wanted := map[string]bool{}
	for _, it := range items {
		wanted[it.key] = true
	}
	c.forgetCapacityFailures(p.Name, wanted)
	byKey, err := c.dropUnwantedCapacity(ctx, pods, objs, wanted)
	if err != nil {
		return err
	}
	if !enabled {
		return nil
	}

	now := time.Now()
	period := p.Spec.StorageCapacity.Period()
	round := c.capacityRoundDue(p.Name, now)
	for _, it := range items {
		obj := objs[capacityObjectName(it.key)]
		if pod := byKey[it.key]; pod != nil {
			if err := c.capacityPodState(ctx, p, it, obj, pod, now, period); err != nil {
				return err
			}
			continue
		}
		if !round {
			continue
		}
		if err := c.measureCapacity(ctx, p, it, obj); err != nil {
			return err
		}
	}
	if round {
		c.capacityRoundDone(p.Name, now.Add(period))
	}
	c.provisionerQueue.AddAfter(p.Name, period)
	return nil
}

// dropUnwantedCapacity deletes the capacity pods and objects of items not
// wanted (and a second pod of an item); byKey is the pod of each wanted
// item that has one.
func (c *Controller) dropUnwantedCapacity(ctx context.Context, pods []*corev1.Pod, objs map[string]*storagev1.CSIStorageCapacity, wanted map[string]bool) (byKey map[string]*corev1.Pod, err error) {
	byKey = map[string]*corev1.Pod{}
	for _, pod := range pods {
		if key := pod.Annotations[protocol.AnnotationCapacityOf]; wanted[key] && byKey[key] == nil {
			byKey[key] = pod
		} else if err := c.deletePod(ctx, pod); err != nil {
			return nil, err
		}
	}
	for name, obj := range objs {
		if !wanted[strings.TrimPrefix(name, "pav-")] {
			if err := c.deleteCapacity(ctx, obj); err != nil {
				return nil, err
			}
		}
	}
	return byKey, nil
}

// measureCapacity starts a round's measurement of one item: evaluates
// spec.storageCapacity, then publishes its capacity or runs its pod.
func (c *Controller) measureCapacity(ctx context.Context, p *v1alpha1.PavProvisioner, it capacityItem, obj *storagev1.CSIStorageCapacity) error {
	cfg, err := c.engine.StorageCapacity(ctx, p, templating.CapacityRequest{Class: it.class, Segment: it.segment, NodeName: it.node})
	switch {
	case err != nil:
		err = c.capacityUnknown(ctx, p, it, obj, fmt.Sprintf("evaluating spec.storageCapacity: %v", err))
	case cfg == nil:
	case cfg.PodTemplate != nil:
		// The pod's /pav goes under the kubelet root of the node it runs
		// on, where that node's plugin collects it.
		node := it.node
		if cfg.PodTemplate.Spec.NodeName != "" {
			node = cfg.PodTemplate.Spec.NodeName
		}
		pod := protocol.CapacityPod(cfg.PodTemplate, p.Name, c.podDirRootOn(node), it.key, it.node)
		squatter, cerr := c.createPod(ctx, pod)
		if squatter != nil {
			c.recorder.Event(p, corev1.EventTypeWarning, reasonPodNameTaken, squatterMessage(squatter, protocol.PhaseCapacity))
		}
		if cerr != nil {
			err = c.capacityUnknown(ctx, p, it, obj, cerr.Error())
		}
	case cfg.Capacity != nil:
		err = c.publishCapacity(ctx, p, it, obj, measurement{free: *cfg.Capacity})
	}
	return err
}

// capacityPodState acts on a capacity pod: its result once it is done, or
// its failure once it ran longer than a refresh period.
func (c *Controller) capacityPodState(ctx context.Context, p *v1alpha1.PavProvisioner, it capacityItem, obj *storagev1.CSIStorageCapacity, pod *corev1.Pod, now time.Time, period time.Duration) error {
	r, done := c.finishedPod(ctx, pod, podWaiter{obj: p, queue: c.provisionerQueue, key: p.Name})
	if !done {
		if age := now.Sub(pod.CreationTimestamp.Time); age < period {
			c.provisionerQueue.AddAfter(p.Name, period-age)
			return nil
		}
		if err := c.capacityUnknown(ctx, p, it, obj, fmt.Sprintf("capacity pod %s/%s did not finish within the refresh period (%v)", pod.Namespace, pod.Name, period)); err != nil {
			return err
		}
		return c.deletePod(ctx, pod)
	}
	var err error
	if m, problem := readMeasurement(pod, r); problem != "" {
		err = c.capacityUnknown(ctx, p, it, obj, problem)
	} else {
		err = c.publishCapacity(ctx, p, it, obj, m)
	}
	if err != nil {
		return err
	}
	return c.deletePod(ctx, pod)
}

// measurement is what a segment's CSIStorageCapacity publishes: its free
// space and, if the provisioner says it, the largest volume it can hold.
type measurement struct {
	free              resource.Quantity
	maximumVolumeSize *resource.Quantity
}

// readMeasurement is a finished capacity pod's /pav/capacity and
// /pav/maximum-volume-size (optional): quantities of at least zero bytes;
// problem says why there is no measurement.
func readMeasurement(pod *corev1.Pod, r podOutcome) (measurement, string) {
	switch {
	case !r.succeeded:
		return measurement{}, fmt.Sprintf("capacity pod %s/%s failed: %s", pod.Namespace, pod.Name, r.message)
	case r.capacity == nil:
		return measurement{}, fmt.Sprintf("capacity pod %s/%s succeeded but wrote no /pav/%s", pod.Namespace, pod.Name, protocol.FileCapacity)
	}
	free, problem := readBytesFile(pod, protocol.FileCapacity, *r.capacity, "free bytes")
	if problem != "" {
		return measurement{}, problem
	}
	m := measurement{free: free}
	if r.maximumVolumeSize != nil {
		max, problem := readBytesFile(pod, protocol.FileMaximumVolumeSize, *r.maximumVolumeSize, "the largest volume's bytes")
		if problem != "" {
			return measurement{}, problem
		}
		m.maximumVolumeSize = &max
	}
	return m, ""
}

// readBytesFile parses the content of a capacity pod's /pav/<file>, which
// holds what.
func readBytesFile(pod *corev1.Pod, file, content, what string) (resource.Quantity, string) {
	text := strings.TrimSpace(content)
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return resource.Quantity{}, fmt.Sprintf("capacity pod %s/%s wrote %q to /pav/%s, which is not a quantity (%s, e.g. 10737418240 or 10Gi)", pod.Namespace, pod.Name, truncate(text, 64), file, what)
	}
	if _, err := templating.Bytes(q); err != nil {
		return resource.Quantity{}, fmt.Sprintf("capacity pod %s/%s wrote /pav/%s: %v", pod.Namespace, pod.Name, file, err)
	}
	return q, ""
}

// capacityUnknown reports a failed measurement and, once
// capacityFailuresToRemove failed in a row, removes the item's object (see
// syncCapacity for why).
func (c *Controller) capacityUnknown(ctx context.Context, p *v1alpha1.PavProvisioner, it capacityItem, obj *storagev1.CSIStorageCapacity, problem string) error {
	failures := c.capacityFailed(p.Name, it.key)
	if obj != nil && failures < capacityFailuresToRemove {
		c.recorder.Eventf(p, corev1.EventTypeWarning, reasonCapacityUnknown,
			"storage capacity of StorageClass %q in topology segment %s unknown: %s; keeping the last value measured (%s) until %d measurements in a row have failed (%d so far)",
			it.class.Name, it.segment.Key(), problem, obj.Capacity, capacityFailuresToRemove, failures)
		return nil
	}
	c.recorder.Eventf(p, corev1.EventTypeWarning, reasonCapacityUnknown,
		"storage capacity of StorageClass %q in topology segment %s unknown: %s; until a measurement succeeds, the scheduler places no WaitForFirstConsumer claim of the class there",
		it.class.Name, it.segment.Key(), problem)
	if obj == nil {
		return nil
	}
	return c.deleteCapacity(ctx, obj)
}

// publishCapacity creates or updates the item's CSIStorageCapacity, shaped
// as external-provisioner's: in PaV's namespace, for the class, with the
// segment as nodeTopology, owned by the provisioner (garbage collection
// removes it with the provisioner).
func (c *Controller) publishCapacity(ctx context.Context, p *v1alpha1.PavProvisioner, it capacityItem, obj *storagev1.CSIStorageCapacity, m measurement) error {
	c.capacityMeasured(p.Name, it.key)
	client := c.kube.StorageV1().CSIStorageCapacities(c.cfg.Namespace)
	free := m.free
	if obj != nil {
		if sameQuantity(obj.Capacity, &free) && sameQuantity(obj.MaximumVolumeSize, m.maximumVolumeSize) {
			return nil
		}
		updated := obj.DeepCopy()
		updated.Capacity = &free
		updated.MaximumVolumeSize = m.maximumVolumeSize
		if _, err := client.Update(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("updating CSIStorageCapacity %s/%s: %w", obj.Namespace, obj.Name, err)
		}
		klog.V(2).InfoS("Updated storage capacity", "provisioner", p.Name, "class", it.class.Name, "segment", it.segment.Key(), "capacity", free.String(), "maximumVolumeSize", m.maximumVolumeSize)
		return nil
	}
	want := &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{
			Name:            capacityObjectName(it.key),
			Namespace:       c.cfg.Namespace,
			Labels:          map[string]string{protocol.LabelProvisioner: protocol.LabelValue(p.Name)},
			OwnerReferences: []metav1.OwnerReference{provisionerOwner(p)},
		},
		StorageClassName:  it.class.Name,
		NodeTopology:      it.segment.LabelSelector(),
		Capacity:          &free,
		MaximumVolumeSize: m.maximumVolumeSize,
	}
	if _, err := client.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CSIStorageCapacity %s/%s: %w", want.Namespace, want.Name, err)
	}
	klog.InfoS("Published storage capacity", "provisioner", p.Name, "class", it.class.Name, "segment", it.segment.Key(), "capacity", free.String())
	return nil
}

func (c *Controller) deleteCapacity(ctx context.Context, obj *storagev1.CSIStorageCapacity) error {
	err := c.kube.StorageV1().CSIStorageCapacities(obj.Namespace).Delete(ctx, obj.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &obj.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting CSIStorageCapacity %s/%s: %w", obj.Namespace, obj.Name, err)
	}
	return nil
}

// provisionerOwner is the owner reference to p that PaV's objects carry.
func provisionerOwner(p *v1alpha1.PavProvisioner) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind, Name: p.Name, UID: p.UID}
}

// onTopologyChange: a Node or StorageClass changed, so the segments or
// classes of provisioners that track capacity may have.
func (c *Controller) onTopologyChange(obj interface{}) {
	only := ""
	if sc, ok := obj.(*storagev1.StorageClass); ok {
		only = sc.Provisioner
	}
	all, err := c.provisioners.List(everything)
	if err != nil {
		return
	}
	for _, p := range all {
		switch {
		case p.Spec.StorageCapacity == nil:
		case only == p.Name:
			// A class of the provisioner came, changed or went: measure it
			// now, not at the next round (the scheduler keeps its
			// WaitForFirstConsumer claims off every node until then).
			c.refreshCapacity(p.Name)
		case only == "":
			c.provisionerQueue.Add(p.Name)
		}
	}
}

// onCapacity: one of PaV's CSIStorageCapacity objects changed or went (its
// provisioner puts it back as measured).
func (c *Controller) onCapacity(obj interface{}) {
	m, err := metaAccessor(obj)
	if err != nil {
		return
	}
	for _, o := range m.GetOwnerReferences() {
		if o.Kind == v1alpha1.Kind {
			c.provisionerQueue.Add(o.Name)
		}
	}
}

// sameQuantity: both absent, or both the same amount.
func sameQuantity(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Cmp(*b) == 0
}
