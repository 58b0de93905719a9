package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// rebalancerEventPrefix starts the reasons of the Events Berth's rebalancer records on the pods it
// moves (pkg/rebalancer: RebalancerMoved, RebalancerWouldMove, RebalancerPDBRefused, ...).
const rebalancerEventPrefix = "Rebalancer"

// writeMoves prints why the rebalancer moved (or tried to move) the pod, from its Events: the
// pod is gone after a move and the scheduler's record only says where it was placed. Not being
// allowed to read Events, or there being none, prints nothing: the placement record still answers.
func writeMoves(ctx context.Context, c kubernetes.Interface, ns, name string, w io.Writer) {
	sel := fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": name}.AsSelector().String()
	list, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return
	}
	var evs []corev1.Event
	for _, e := range list.Items {
		if strings.HasPrefix(e.Reason, rebalancerEventPrefix) {
			evs = append(evs, e)
		}
	}
	sort.Slice(evs, func(i, j int) bool { return eventTime(&evs[i]).Time.Before(eventTime(&evs[j]).Time) })
	for _, e := range evs {
		fmt.Fprintf(w, "rebalancer: %s %s: %s\n", eventTime(&e).UTC().Format("2006-01-02T15:04:05Z"), e.Reason, e.Message)
	}
}

func eventTime(e *corev1.Event) metav1.Time {
	switch {
	case !e.EventTime.IsZero():
		return metav1.NewTime(e.EventTime.Time)
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	}
	return e.CreationTimestamp
}
