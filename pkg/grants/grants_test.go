package grants

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

func ns(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// net is a PodNetwork granted by sel; decided says what the operator decided on its current
// generation ("" none yet, "stale" a decision on an older generation).
func net(name string, sel map[string]string, decided string) berthv1alpha1.PodNetwork {
	pn := berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2},
		Spec: berthv1alpha1.PodNetworkSpec{Bridge: "berth-" + name, CIDR: "192.168.7.0/24", Gateway: "192.168.7.1",
			NamespaceSelector: metav1.LabelSelector{MatchLabels: sel}}}
	c := metav1.Condition{Type: berthv1alpha1.ConditionAccepted, ObservedGeneration: 2, Reason: "x"}
	switch decided {
	case "":
		return pn
	case "stale":
		c.Status, c.ObservedGeneration = metav1.ConditionTrue, 1
	case "accepted":
		c.Status = metav1.ConditionTrue
	case "refused":
		c.Status = metav1.ConditionFalse
	}
	pn.Status.Conditions = []metav1.Condition{c}
	return pn
}

func class(name string, namespaces ...string) berthv1alpha1.InstanceClass {
	return berthv1alpha1.InstanceClass{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3},
		Spec: berthv1alpha1.InstanceClassSpec{Namespaces: namespaces}}
}

func TestCompute(t *testing.T) {
	mtu := int32(1400)
	withMTU := net("mtu", map[string]string{"team": "blue"}, "accepted")
	withMTU.Spec.MTU = &mtu
	withMTU.Spec.Routes = []berthv1alpha1.Route{{Destination: "10.9.0.0/16", Via: "192.168.7.254"}}
	deleting := net("going", nil, "accepted")
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	badSelector := net("bad", nil, "accepted")
	badSelector.Spec.NamespaceSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}

	for _, tc := range []struct {
		name           string
		ns             *corev1.Namespace
		nets           []berthv1alpha1.PodNetwork
		notListed      bool
		classes        []berthv1alpha1.InstanceClass
		wantGranted    bool
		wantNets       []string // name=state
		wantClasses    []string // name/sharedWith
		wantComplete   metav1.ConditionStatus
		wantCompleteIn string
	}{
		{name: "nothing granted", ns: ns("red", map[string]string{"team": "red"}),
			nets:    []berthv1alpha1.PodNetwork{net("blue-net", map[string]string{"team": "blue"}, "accepted")},
			classes: []berthv1alpha1.InstanceClass{class("gold", "blue", "green")}, wantComplete: metav1.ConditionTrue},
		{name: "selected network and listed class, others left out", ns: ns("blue", map[string]string{"team": "blue"}),
			nets: []berthv1alpha1.PodNetwork{net("red-net", map[string]string{"team": "red"}, "accepted"),
				net("blue-net", map[string]string{"team": "blue"}, "accepted")},
			classes:     []berthv1alpha1.InstanceClass{class("gold", "blue", "green"), class("silver", "red")},
			wantGranted: true, wantNets: []string{"blue-net=Accepted"}, wantClasses: []string{"gold/1"},
			wantComplete: metav1.ConditionTrue, wantCompleteIn: "1 PodNetworks and 1 InstanceClasses"},
		{name: "empty selector grants every namespace", ns: ns("any", nil),
			nets: []berthv1alpha1.PodNetwork{net("open", map[string]string{}, "accepted")}, wantGranted: true,
			wantNets: []string{"open=Accepted"}, wantComplete: metav1.ConditionTrue},
		{name: "states: pending, stale decision, refused, deleting; sorted by name", ns: ns("blue", nil),
			nets:        []berthv1alpha1.PodNetwork{net("d-new", nil, ""), net("c-stale", nil, "stale"), net("b-refused", nil, "refused"), deleting},
			wantGranted: true, wantNets: []string{"b-refused=Refused", "c-stale=Pending", "d-new=Pending", "going=Deleting"},
			wantComplete: metav1.ConditionTrue},
		{name: "a selector that does not parse grants nothing", ns: ns("blue", map[string]string{"team": "blue"}),
			nets: []berthv1alpha1.PodNetwork{badSelector}, wantComplete: metav1.ConditionTrue},
		{name: "a class granted to this namespace alone is shared with none", ns: ns("blue", nil),
			classes: []berthv1alpha1.InstanceClass{class("solo", "blue")}, wantGranted: true, wantClasses: []string{"solo/0"},
			wantComplete: metav1.ConditionTrue},
		{name: "networks not listed without the PodConfig controller", ns: ns("blue", map[string]string{"team": "blue"}),
			notListed: true, classes: []berthv1alpha1.InstanceClass{class("gold", "blue", "green", "red")}, wantGranted: true,
			wantClasses: []string{"gold/2"}, wantComplete: metav1.ConditionFalse, wantCompleteIn: "podConfig.enabled=false"},
		{name: "mtu and routes copied", ns: ns("blue", map[string]string{"team": "blue"}),
			nets: []berthv1alpha1.PodNetwork{withMTU}, wantGranted: true, wantNets: []string{"mtu=Accepted"}, wantComplete: metav1.ConditionTrue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Namespace: tc.ns, NetworksListed: !tc.notListed, Classes: tc.classes}
			if !tc.notListed {
				in.Networks = tc.nets
			}
			s, granted := Compute(in)
			if granted != tc.wantGranted {
				t.Errorf("granted = %v, want %v", granted, tc.wantGranted)
			}
			var gotNets, gotClasses []string
			for _, n := range s.Networks {
				gotNets = append(gotNets, n.Name+"="+n.State)
			}
			for _, c := range s.InstanceClasses {
				gotClasses = append(gotClasses, c.Name+"/"+itoa(c.SharedWith))
			}
			if strings.Join(gotNets, ",") != strings.Join(tc.wantNets, ",") {
				t.Errorf("networks = %v, want %v", gotNets, tc.wantNets)
			}
			if strings.Join(gotClasses, ",") != strings.Join(tc.wantClasses, ",") {
				t.Errorf("classes = %v, want %v", gotClasses, tc.wantClasses)
			}
			c := meta.FindStatusCondition(s.Conditions, berthv1alpha1.ConditionComplete)
			if c == nil || c.Status != tc.wantComplete || !strings.Contains(c.Message, tc.wantCompleteIn) {
				t.Errorf("Complete = %+v, want %s containing %q", c, tc.wantComplete, tc.wantCompleteIn)
			}
			if s.OwnClasses != berthv1alpha1.OwnClassesStatement {
				t.Errorf("ownClasses = %q", s.OwnClasses)
			}
			for _, n := range s.Networks {
				if n.Name == "mtu" && (n.MTU == nil || *n.MTU != 1400 || len(n.Routes) != 1 || n.Routes[0].Via != "192.168.7.254" || n.Gateway != "192.168.7.1" || n.CIDR != "192.168.7.0/24") {
					t.Errorf("mtu network = %+v", n)
				}
			}
		})
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// TestComputeTruncates: a list beyond its CRD bound is cut, and Complete says so.
func TestComputeTruncates(t *testing.T) {
	var nets []berthv1alpha1.PodNetwork
	for i := 0; i < berthv1alpha1.MaxGrantedItems+3; i++ {
		nets = append(nets, net(fmt.Sprintf("net-%03d", i), nil, "accepted"))
	}
	s, granted := Compute(Input{Namespace: ns("blue", nil), Networks: nets, NetworksListed: true})
	if !granted || len(s.Networks) != berthv1alpha1.MaxGrantedItems {
		t.Fatalf("granted %v, %d networks, want %d", granted, len(s.Networks), berthv1alpha1.MaxGrantedItems)
	}
	c := meta.FindStatusCondition(s.Conditions, berthv1alpha1.ConditionComplete)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonTruncated || !strings.Contains(c.Message, "259 PodNetworks") {
		t.Fatalf("Complete = %+v", c)
	}
}

func TestClassGranted(t *testing.T) {
	existing := map[string]bool{"blue": true, "green": true}
	for _, tc := range []struct {
		name       string
		namespaces []string
		want       metav1.ConditionStatus
		wantMsg    string
	}{
		{"all exist", []string{"blue", "green"}, metav1.ConditionTrue, "shared by namespaces blue, green"},
		{"one missing", []string{"blue", "teal"}, metav1.ConditionFalse, "namespaces teal do not exist"},
		{"several missing, sorted", []string{"zinc", "blue", "amber"}, metav1.ConditionFalse, "namespaces amber, zinc do not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ic := class("gold", tc.namespaces...)
			c := ClassGranted(&ic, func(n string) bool { return existing[n] })
			if c.Status != tc.want || !strings.Contains(c.Message, tc.wantMsg) || c.ObservedGeneration != 3 || c.Type != berthv1alpha1.ConditionGranted {
				t.Fatalf("condition = %+v, want %s containing %q", c, tc.want, tc.wantMsg)
			}
		})
	}
}
