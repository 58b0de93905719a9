package decisionrecord

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
)

// The store's size and its evictions are what the dashboard shows to size the capacity arg.
func TestStoreMetrics(t *testing.T) {
	s := newStore(3, 3, time.Now)
	before, err := testutil.GetCounterMetricValue(evictedRecords)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		s.begin(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint("u", i))}}, "prof", nil)
	}
	stored, err := testutil.GetGaugeMetricValue(storedRecords)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := testutil.GetCounterMetricValue(evictedRecords)
	if stored != 3 || after-before != 2 {
		t.Fatalf("stored %v, evicted %v; want 3 stored and 2 evicted", stored, after-before)
	}
}
