package podnet

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestVethVerdict: only a marked veth pair whose ends point at each other is kept; an unmarked
// host link or a foreign pod interface is refused, never replaced; a marked host peer without
// its pod end is recreated.
func TestVethVerdict(t *testing.T) {
	a := Attachment{HostPeer: "bh-1", Interface: "net1"}
	veth := func(index, parent int, group uint32) netlink.Link {
		return &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Index: index, ParentIndex: parent, Group: group}}
	}
	dummy := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: 7, Group: LinkGroup}}
	for _, tc := range []struct {
		name     string
		peer, in netlink.Link
		ours     bool
		conflict bool
	}{
		{name: "nothing yet: create"},
		{name: "our pair", peer: veth(10, 3, LinkGroup), in: veth(3, 10, 0), ours: true},
		{name: "unmarked host link", peer: veth(10, 3, 0), in: veth(3, 10, 0), conflict: true},
		{name: "unmarked host link alone", peer: veth(10, 0, 0), conflict: true},
		{name: "pod interface of another", in: veth(3, 10, 0), conflict: true},
		{name: "marked peer pointing elsewhere", peer: veth(10, 4, LinkGroup), in: veth(3, 10, 0), conflict: true},
		{name: "marked peer, pod end not a veth", peer: veth(10, 7, LinkGroup), in: dummy, conflict: true},
		{name: "marked stale peer alone: recreate", peer: veth(10, 3, LinkGroup)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, err := vethVerdict(a, tc.peer, tc.in)
			var ce *ConflictError
			if ours != tc.ours || errors.As(err, &ce) != tc.conflict || (err != nil && !tc.conflict) {
				t.Errorf("vethVerdict = %v, %v; want ours %v, conflict %v", ours, err, tc.ours, tc.conflict)
			}
		})
	}
}
