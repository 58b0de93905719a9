package podconfig

import (
	"math/big"
	"net/netip"
	"sort"
)

// hasNetworkAddress: the first address of a subnet is its network address (IPv6: the
// subnet-router anycast address) and never a host's, except on point-to-point /31 and /127
// (RFC 3021, RFC 6164) and single-address /32 and /128 networks.
func hasNetworkAddress(p netip.Prefix) bool { return p.Addr().BitLen()-p.Bits() >= 2 }

// hasBroadcast: IPv4 subnets with at least 4 addresses have a broadcast address; IPv6 has none.
func hasBroadcast(p netip.Prefix) bool { return p.Addr().Is4() && p.Bits() <= 30 }

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	host := p.Addr().BitLen() - p.Bits()
	for i := len(b) - 1; i >= 0 && host > 0; i-- {
		n := min(host, 8)
		b[i] |= byte(1<<n - 1)
		host -= n
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Reserved returns the addresses of p no pod may get: the network address, the IPv4
// broadcast address and the gateway (when valid and inside p).
func Reserved(p netip.Prefix, gateway netip.Addr) []netip.Addr {
	p = p.Masked()
	var r []netip.Addr
	if hasNetworkAddress(p) {
		r = append(r, p.Addr())
	}
	if hasBroadcast(p) {
		r = append(r, lastAddr(p))
	}
	if gateway.IsValid() && p.Contains(gateway) && !containsAddr(r, gateway) {
		r = append(r, gateway)
	}
	return r
}

// Usable is the number of addresses of p pods may get (big: an IPv6 /64 has 2^64).
func Usable(p netip.Prefix, gateway netip.Addr) *big.Int {
	total := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
	return total.Sub(total, big.NewInt(int64(len(Reserved(p, gateway)))))
}

// FirstFree returns the lowest address of p that is neither reserved nor in used, and false
// when there is none. It walks the sorted used and reserved addresses, never the range, so it
// costs O(n log n) in the number of used addresses for any prefix length (an IPv6 /64 as much
// as an IPv4 /30).
func FirstFree(p netip.Prefix, gateway netip.Addr, used []netip.Addr) (netip.Addr, bool) {
	p = p.Masked()
	taken := make([]netip.Addr, 0, len(used)+3)
	taken = append(taken, Reserved(p, gateway)...)
	for _, u := range used {
		if p.Contains(u) {
			taken = append(taken, u)
		}
	}
	sort.Slice(taken, func(i, j int) bool { return taken[i].Less(taken[j]) })
	candidate := p.Addr()
	for _, t := range taken {
		if t.Less(candidate) {
			continue // duplicate
		}
		if t != candidate {
			break
		}
		candidate = candidate.Next()
		if !candidate.IsValid() {
			return netip.Addr{}, false // ran off the end of the address space
		}
	}
	if !p.Contains(candidate) {
		return netip.Addr{}, false
	}
	return candidate, true
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}
