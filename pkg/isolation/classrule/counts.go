package classrule

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// Counts is what one node holds (or, in a scheduling cycle's delta, what nominated or
// preemption-removed pods add or take away): non-exempt pods by class, unclassed pods, classed
// pods by controller, and every pod including exempt ones (Pods; an index's guard against the
// scheduler's snapshot). The zero value is empty and ready to use.
type Counts struct {
	classes   map[string]int
	unclassed int
	owners    map[types.UID]int
	pods      int
	// sole is the class when the node holds exactly one, soleMsg the refusal naming it; both
	// are rewritten only when the set of classes changes, so the common refusal (a node of one
	// other class) ranges no map and builds no string.
	sole, soleMsg string
}

// AddPod counts one pod (n = 1) or discounts it (n = -1).
func (c *Counts) AddPod(pc *PodClass, n int) {
	c.pods += n
	if !pc.Exempt {
		c.Add(pc.Classes, pc.Owner, n)
	}
}

// Add counts (n = 1) or discounts (n = -1) a non-exempt pod of classes and controller owner
// without touching the pod total.
func (c *Counts) Add(classes []string, owner types.UID, n int) {
	if len(classes) == 0 {
		c.unclassed += n
		return
	}
	if c.classes == nil {
		c.classes = map[string]int{}
	}
	keys := len(c.classes)
	changed := false
	for _, cl := range classes {
		before := c.classes[cl]
		c.classes[cl] += n
		if c.classes[cl] == 0 {
			delete(c.classes, cl)
		}
		changed = changed || (before == 0) != (c.classes[cl] == 0)
	}
	if changed || keys != len(c.classes) {
		c.sole, c.soleMsg = "", ""
		if len(c.classes) == 1 {
			for cl := range c.classes {
				c.sole, c.soleMsg = cl, refusalMsg(cl)
			}
		}
	}
	if owner != "" {
		if c.owners == nil {
			c.owners = map[types.UID]int{}
		}
		c.owners[owner] += n
		if c.owners[owner] == 0 {
			delete(c.owners, owner)
		}
	}
}

// Empty says whether c counts nothing at all.
func (c *Counts) Empty() bool {
	return c.pods == 0 && c.unclassed == 0 && len(c.classes) == 0 && len(c.owners) == 0
}

// Pods is the number of pods counted, exempt ones included.
func (c *Counts) Pods() int { return c.pods }

// Classed says whether c holds a classed pod.
func (c *Counts) Classed() bool { return len(c.classes) > 0 }

// Class is the number of pods of class cl.
func (c *Counts) Class(cl string) int { return c.classes[cl] }

// Sole is the class when c holds exactly one, "" otherwise.
func (c *Counts) Sole() string { return c.sole }

// Clone is a deep copy of c (nil for nil).
func (c *Counts) Clone() *Counts {
	if c == nil {
		return nil
	}
	out := &Counts{unclassed: c.unclassed, pods: c.pods, sole: c.sole, soleMsg: c.soleMsg}
	if c.classes != nil {
		out.classes = make(map[string]int, len(c.classes))
		for k, v := range c.classes {
			out.classes[k] = v
		}
	}
	if c.owners != nil {
		out.owners = make(map[types.UID]int, len(c.owners))
		for k, v := range c.owners {
			out.owners[k] = v
		}
	}
	return out
}

// Summary is a node's counts, for tests and diagnostics. Pods counts every pod, exempt ones
// included.
type Summary struct {
	Classes   map[string]int
	Unclassed int
	Owners    map[types.UID]int
	Pods      int
}

// Summary copies c.
func (c *Counts) Summary() Summary {
	cc := c.Clone()
	return Summary{Classes: cc.classes, Unclassed: cc.unclassed, Owners: cc.owners, Pods: cc.pods}
}

// View is a node's counts plus a cycle's delta; both may be nil.
type View struct{ Base, Delta *Counts }

func (v View) class(cl string) int {
	n := 0
	if v.Base != nil {
		n += v.Base.classes[cl]
	}
	if v.Delta != nil {
		n += v.Delta.classes[cl]
	}
	return n
}

func (v View) unclassed() int {
	n := 0
	if v.Base != nil {
		n += v.Base.unclassed
	}
	if v.Delta != nil {
		n += v.Delta.unclassed
	}
	return n
}

func (v View) owner(uid types.UID) int {
	n := 0
	if v.Base != nil {
		n += v.Base.owners[uid]
	}
	if v.Delta != nil {
		n += v.Delta.owners[uid]
	}
	return n
}

// OtherClass is the smallest class present other than mine ("": none). The loop is over the
// classes on the node (one, while isolation holds), never over its pods.
func (v View) OtherClass(mine string) string {
	if v.Delta == nil {
		// why: nearly every Filter sees a node without a cycle delta and with at most one
		// class; ranging over a map costs more than the rest of the verdict.
		if v.Base == nil || len(v.Base.classes) == 0 {
			return ""
		}
		if len(v.Base.classes) == 1 {
			if v.Base.sole == mine {
				return ""
			}
			return v.Base.sole
		}
	}
	best := ""
	consider := func(m map[string]int) {
		for cl := range m {
			if cl != mine && v.class(cl) > 0 && (best == "" || cl < best) {
				best = cl
			}
		}
	}
	if v.Base != nil {
		consider(v.Base.classes)
	}
	if v.Delta != nil {
		consider(v.Delta.classes)
	}
	return best
}

// Verdict is "" when pc may run on a node with view v, else the reason it may not.
func Verdict(v View, pc *PodClass, strict, spread bool) string {
	mine := pc.Class()
	if mine == "" {
		if strict {
			if other := v.OtherClass(""); other != "" {
				return fmt.Sprintf("node holds instance class %s (strict: pods without a class stay off classed nodes)", other)
			}
		}
		return ""
	}
	if other := v.OtherClass(mine); other != "" {
		if v.Delta == nil && other == v.Base.sole {
			return v.Base.soleMsg
		}
		return refusalMsg(other)
	}
	if strict {
		if n := v.unclassed(); n > 0 {
			return fmt.Sprintf("node holds %d pod(s) without an instance class (strict)", n)
		}
	}
	if spread && pc.Owner != "" && v.owner(pc.Owner) > 0 {
		return fmt.Sprintf("node already holds a replica of %s (spreadReplicas)", pc.OwnerRef)
	}
	return ""
}

func refusalMsg(other string) string { return "node holds instance class " + other }
