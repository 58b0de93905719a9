package framework

import "testing"

func TestMetricValue(t *testing.T) {
	page := `# HELP berth_x_total x
# TYPE berth_x_total counter
berth_x_total{reason="a"} 2
berth_x_total{reason="b"} 3.5
berth_x_total_more 100
berth_y 7
berth_z NaNish
`
	for _, tc := range []struct {
		name string
		want float64
		ok   bool
	}{
		{"berth_x_total", 5.5, true},
		{"berth_y", 7, true},
		{"berth_x", 0, false},
		{"berth_z", 0, false},
		{"absent", 0, false},
	} {
		if got, ok := MetricValue(page, tc.name); got != tc.want || ok != tc.ok {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
