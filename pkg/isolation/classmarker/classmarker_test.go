package classmarker

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestMarkerValue(t *testing.T) {
	long := strings.Repeat("a", 63)
	ns50 := strings.Repeat("n", 50)
	for _, tc := range []struct {
		name, effective, want string
		hashed                bool
	}{
		{name: "owned", effective: NamespaceClass("red", "gold"), want: "red_gold"},
		{name: "owned value with underscore and dots", effective: NamespaceClass("red", "a_b.c"), want: "red_a_b.c"},
		{name: "owned at 63", effective: NamespaceClass(ns50, strings.Repeat("v", 12)), want: ns50 + "_" + strings.Repeat("v", 12)},
		{name: "owned over 63", effective: NamespaceClass(ns50, strings.Repeat("v", 13)), hashed: true},
		{name: "shared", effective: SharedClass("gold"), want: "gold"},
		{name: "shared 63", effective: SharedClass(long), want: long},
		{name: "shared with underscore", effective: SharedClass("a_b"), hashed: true},
		{name: "not an effective class", effective: "gold", hashed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MarkerValue(tc.effective)
			if tc.hashed {
				if !strings.HasPrefix(got, "H_") || len(got) != 42 {
					t.Fatalf("MarkerValue(%q) = %q, want H_ and 40 hex digits", tc.effective, got)
				}
			} else if got != tc.want {
				t.Fatalf("MarkerValue(%q) = %q, want %q", tc.effective, got, tc.want)
			}
			if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 {
				t.Fatalf("MarkerValue(%q) = %q is not a label value: %v", tc.effective, got, msgs)
			}
			if back, ok := EffectiveFromMarker(got); ok != !tc.hashed || (ok && back != tc.effective) {
				t.Fatalf("EffectiveFromMarker(%q) = %q, %v; want %q, %v", got, back, ok, tc.effective, !tc.hashed)
			}
		})
	}
}

// TestMarkerValueCollisions: effective classes that look alike must never share a marker, or
// two tenants' pods could share a node an autoscaler made for one of them.
func TestMarkerValueCollisions(t *testing.T) {
	ns50 := strings.Repeat("n", 50)
	for _, pair := range [][2]string{
		// "red_gold" read as owned red/gold versus a shared class named like it (needs "_": hashed).
		{NamespaceClass("red", "gold"), SharedClass("red_gold")},
		// split at the first "_": red/a_b is not red_a/b (a namespace has no "_").
		{NamespaceClass("red", "a_b"), NamespaceClass("red-a", "b")},
		// a shared value equal to a namespace-owned one of another namespace.
		{SharedClass("gold"), NamespaceClass("gold", "gold")},
		{SharedClass("gold"), NamespaceClass("red", "gold")},
		// the same value owned by two namespaces.
		{NamespaceClass("red", "gold"), NamespaceClass("blue", "gold")},
		// two long classes both hashed.
		{NamespaceClass(ns50, strings.Repeat("v", 13)), NamespaceClass(ns50, strings.Repeat("v", 14))},
		// a shared value that looks like a hashed marker.
		{SharedClass("H"), NamespaceClass("h", "x")},
	} {
		a, b := MarkerValue(pair[0]), MarkerValue(pair[1])
		if a == b {
			t.Errorf("MarkerValue(%q) = MarkerValue(%q) = %q", pair[0], pair[1], a)
		}
	}
	// A shared value can never be read as "H_…": it would contain "_" and be hashed itself.
	if v := MarkerValue(SharedClass("H_" + strings.Repeat("0", 40))); v == "H_"+strings.Repeat("0", 40) {
		t.Errorf("shared class spelled like a hash kept its spelling %q", v)
	}
}

func TestEffective(t *testing.T) {
	if got := Effective("red", "gold", false); got != "red/gold" {
		t.Errorf("owned: %q", got)
	}
	if got := Effective("red", "gold", true); got != "gold (shared)" {
		t.Errorf("shared: %q", got)
	}
}
