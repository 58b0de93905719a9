package operator

import "testing"

// The zero Options must be the secure /metrics: a caller that forgets the flag gets
// authentication and authorization, never plain HTTP.
func TestMetricsOptions(t *testing.T) {
	cases := []struct {
		name       string
		o          Options
		wantSecure bool
	}{
		{"zero value is secure", Options{MetricsAddr: ":8080"}, true},
		{"insecure for local debugging", Options{MetricsAddr: ":8080", MetricsInsecure: true}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := metricsOptions(tc.o)
			if got.BindAddress != tc.o.MetricsAddr {
				t.Errorf("bind address %q, want %q", got.BindAddress, tc.o.MetricsAddr)
			}
			if got.SecureServing != tc.wantSecure || (got.FilterProvider != nil) != tc.wantSecure {
				t.Errorf("SecureServing %v, filter set %v; want both %v", got.SecureServing, got.FilterProvider != nil, tc.wantSecure)
			}
		})
	}
}
