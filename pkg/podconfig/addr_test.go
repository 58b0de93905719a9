package podconfig

import (
	"net/netip"
	"testing"
)

func TestFirstFree(t *testing.T) {
	a := netip.MustParseAddr
	cases := []struct {
		name    string
		cidr    string
		gateway string
		used    []string
		want    string // empty: exhausted
		usable  string
	}{
		{"v4 /24 skips network and gateway", "192.168.0.0/24", "192.168.0.1", nil, "192.168.0.2", "253"},
		{"v4 fills holes first", "192.168.0.0/24", "", []string{"192.168.0.1", "192.168.0.3"}, "192.168.0.2", "254"},
		{"v4 /30 with gateway has one address", "10.9.0.0/30", "10.9.0.1", nil, "10.9.0.2", "1"},
		{"v4 /30 exhausted", "10.9.0.0/30", "10.9.0.1", []string{"10.9.0.2"}, "", "1"},
		{"v4 broadcast never given", "10.9.0.0/29", "", []string{"10.9.0.1", "10.9.0.2", "10.9.0.3", "10.9.0.4", "10.9.0.5", "10.9.0.6"}, "", "6"},
		{"v4 /31 point-to-point", "10.9.0.0/31", "", []string{"10.9.0.0"}, "10.9.0.1", "2"},
		{"v4 /32", "10.9.0.7/32", "", nil, "10.9.0.7", "1"},
		{"v6 /120", "fd00:1::/120", "fd00:1::1", []string{"fd00:1::2"}, "fd00:1::3", "254"},
		{"v6 /64 huge range is not enumerated", "fd00:2::/64", "", []string{"fd00:2::1", "fd00:2::2"}, "fd00:2::3", "18446744073709551615"},
		{"used outside the network ignored", "192.168.0.0/24", "", []string{"10.0.0.1"}, "192.168.0.1", "254"},
		{"last addresses of the v6 space", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126", "", []string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, "", "3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := netip.MustParsePrefix(tc.cidr)
			var gw netip.Addr
			if tc.gateway != "" {
				gw = a(tc.gateway)
			}
			var used []netip.Addr
			for _, u := range tc.used {
				used = append(used, a(u))
			}
			got, ok := FirstFree(p, gw, used)
			if tc.want == "" {
				if ok {
					t.Fatalf("got %s, want exhausted", got)
				}
			} else if !ok || got != a(tc.want) {
				t.Fatalf("got %s (ok=%v), want %s", got, ok, tc.want)
			}
			if u := Usable(p, gw).String(); u != tc.usable {
				t.Fatalf("Usable = %s, want %s", u, tc.usable)
			}
		})
	}
}

func BenchmarkFirstFreeV6(b *testing.B) {
	p := netip.MustParsePrefix("fd00::/64")
	used := make([]netip.Addr, 0, 4096)
	x := p.Addr().Next()
	for range 4096 {
		used = append(used, x)
		x = x.Next()
	}
	b.ResetTimer()
	for b.Loop() {
		if _, ok := FirstFree(p, netip.Addr{}, used); !ok {
			b.Fatal("exhausted")
		}
	}
}
