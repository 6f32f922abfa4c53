package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/protocol"
)

func TestCountStagings(t *testing.T) {
	staging := func(revision string, deleting bool) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{protocol.LabelPhase: string(protocol.PhaseStaging)},
			Annotations: map[string]string{protocol.AnnotationStagingRevision: revision},
		}}
		if deleting {
			pod.DeletionTimestamp = &metav1.Time{}
		}
		return pod
	}
	creation := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{protocol.LabelPhase: string(protocol.PhaseCreation)}}}
	pods := []*corev1.Pod{staging("new", false), staging("old", false), staging("", false), staging("old", true), creation}
	if s, o := countStagings(pods, "new"); s != 3 || o != 2 {
		t.Errorf("countStagings = %d stagings, %d outdated; want 3, 2", s, o)
	}
}
