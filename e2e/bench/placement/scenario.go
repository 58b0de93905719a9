// Package placement measures placement quality on simulated real load: KWOK nodes of a few
// sizes with a base load, pods whose real use is a seeded fraction of their requests, and every
// node's load fed through the real agent → load watcher → scheduler path. The same seeded
// workload (waves of arrivals, some departures) runs once per scheduler configuration, each
// from the same cluster state, and the figures are read back from the running system: node
// utilisation as the load watcher served it, placements from the API server.
package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
)

// NodeSpec is a simulated node: its size and the load it carries without any pod.
type NodeSpec struct {
	Name      string
	MilliCPU  int64
	MemoryMiB int64
	// BaseCPU and BaseMemory are percent of capacity (system daemons, unmanaged work).
	BaseCPU, BaseMemory float64
}

// PodSpec is a simulated pod: what it asks for and what it really uses.
type PodSpec struct {
	Name        string
	ReqMilliCPU int64
	ReqMemMiB   int64
	// LimMilliCPU is the CPU limit; 0 means none (TargetLoadPacking then predicts the request
	// times its multiplier).
	LimMilliCPU int64
	// UseMilliCPU and UseMemMiB are the mean real use.
	UseMilliCPU float64
	UseMemMiB   float64
	// BurstMilliCPU is the standard deviation of the CPU use (0: steady).
	BurstMilliCPU float64
	// Class says how the pod relates use to requests: over (uses less than it asks),
	// right, under (uses more).
	Class string
	// Arrive is the wave that creates the pod; Leave the wave at whose start it is deleted
	// (-1: stays to the end).
	Arrive, Leave int
}

// Scenario is everything a run replays.
type Scenario struct {
	Seed  uint64
	Waves int
	// Shape is one of Shapes; Workloads are the controllers of ShapeWorkloads and ShapeGrowth
	// (Pods then holds their bare pods only).
	Shape     string
	Nodes     []NodeSpec
	Pods      []PodSpec
	Workloads []WorkloadSpec
}

// ScenarioOptions size a generated scenario.
type ScenarioOptions struct {
	Seed        uint64
	Nodes, Pods int
	Waves       int
	// LeaveShare is the share of pods deleted at a later wave (default 0.2).
	LeaveShare float64
	// PodScale multiplies every pod's requests and use (default 1); a large value makes pods
	// bigger than any node (the bad-input case the benchmark must report, not crash on).
	PodScale float64
	// BaseShift adds points to every node's base CPU load (the busy level's system load).
	BaseShift float64
	// Shape is one of Shapes (default ShapeBare).
	Shape string
	// Burst, when positive, replaces the pods by that many identical ones created at once
	// (one wave, none leaving): the case where every pod of a cycle sees the same snapshot.
	Burst int
}

// BurstPod is the burst's pod: a 1-CPU request that uses half of it, steadily.
var BurstPod = PodSpec{ReqMilliCPU: 1000, ReqMemMiB: 1024, UseMilliCPU: 500, UseMemMiB: 512, Class: "over", Leave: -1}

// Node sizes: small, medium and large machines in a 2:2:1 mix.
var nodeSizes = []struct {
	milliCPU, memMiB int64
	weight           int
}{{4000, 16 * 1024, 2}, {8000, 32 * 1024, 2}, {16000, 64 * 1024, 1}}

// CPU requests in millicores with their weights: mostly small services, a few big ones.
var cpuRequests = []struct {
	milli  int64
	weight int
}{{100, 2}, {250, 4}, {500, 3}, {1000, 2}}

// Generate builds a scenario from a seed. Why these shapes (seed 001): requests are set high
// "to be safe", so most pods (70 %) use 10–40 % of what they request, 20 % use 60–90 % and
// 10 % under-request (use 110–150 %, possible because they have no limit or a limit of twice
// the request); 30 % are bursty, with a CPU standard deviation of 20–50 % of their mean use.
// Nodes carry 5–15 % CPU of their own. After the last wave the cluster is about half requested
// and a third used: the low-utilisation regime in which request-based scheduling leaves nodes
// idle. PodScale moves the whole load up or down. The workload shape draws the same pod shapes
// per workload instead of per pod (generateWorkloads).
func Generate(o ScenarioOptions) (*Scenario, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	s := &Scenario{Seed: o.Seed, Waves: o.Waves, Shape: o.Shape}
	s.Nodes = generateNodes(o, rng)
	switch {
	case o.Burst > 0:
		s.Waves, s.Shape = 1, ShapeBare
		for i := range o.Burst {
			p := BurstPod
			p.Name = fmt.Sprintf("pl-pod-%04d", i)
			s.Pods = append(s.Pods, p)
		}
	case o.Shape == ShapeWorkloads || o.Shape == ShapeGrowth:
		generateWorkloads(o, s, rng)
	default:
		for i := range o.Pods {
			p := drawPod(o, rng, i)
			// Arrivals spread evenly over the waves; departures come at a later wave.
			p.Arrive = i * o.Waves / o.Pods
			p.Leave = -1
			if p.Arrive < o.Waves-1 && rng.Float64() < o.LeaveShare {
				p.Leave = p.Arrive + 1 + rng.IntN(o.Waves-1-p.Arrive)
			}
			s.Pods = append(s.Pods, p)
		}
	}
	return s, nil
}

// check validates o and fills its defaults.
func (o *ScenarioOptions) check() error {
	if o.Nodes < 1 || o.Pods < 1 || o.Waves < 1 {
		return fmt.Errorf("scenario: nodes, pods and waves must be positive (got %d, %d, %d)", o.Nodes, o.Pods, o.Waves)
	}
	if o.LeaveShare == 0 {
		o.LeaveShare = 0.2
	}
	if o.LeaveShare < 0 || o.LeaveShare > 1 {
		return fmt.Errorf("scenario: leave share %v outside [0,1]", o.LeaveShare)
	}
	if o.PodScale == 0 {
		o.PodScale = 1
	}
	if o.PodScale < 0 {
		return fmt.Errorf("scenario: pod scale %v is negative", o.PodScale)
	}
	if o.Shape == "" {
		o.Shape = ShapeBare
	}
	if !slices.Contains(Shapes, o.Shape) {
		return fmt.Errorf("scenario: unknown shape %q (%s)", o.Shape, strings.Join(Shapes, ", "))
	}
	return nil
}

// generateNodes draws the node sizes (2:2:1) and base loads.
func generateNodes(o ScenarioOptions, rng *rand.Rand) []NodeSpec {
	totalWeight := 0
	for _, z := range nodeSizes {
		totalWeight += z.weight
	}
	var nodes []NodeSpec
	for i := range o.Nodes {
		pick := rng.IntN(totalWeight)
		size := nodeSizes[len(nodeSizes)-1]
		for _, z := range nodeSizes {
			if pick < z.weight {
				size = z
				break
			}
			pick -= z.weight
		}
		nodes = append(nodes, NodeSpec{
			Name: fmt.Sprintf("pl-node-%03d", i), MilliCPU: size.milliCPU, MemoryMiB: size.memMiB,
			BaseCPU: min(5+10*rng.Float64()+o.BaseShift, 100), BaseMemory: 10 + 20*rng.Float64(),
		})
	}
	return nodes
}

// drawPod draws pod i's requests and use (see Generate for the shares); Arrive and Leave are
// the caller's.
func drawPod(o ScenarioOptions, rng *rand.Rand, i int) PodSpec {
	reqWeight := 0
	for _, r := range cpuRequests {
		reqWeight += r.weight
	}
	pick := rng.IntN(reqWeight)
	req := cpuRequests[len(cpuRequests)-1].milli
	for _, r := range cpuRequests {
		if pick < r.weight {
			req = r.milli
			break
		}
		pick -= r.weight
	}
	req = int64(float64(req) * o.PodScale)
	// Memory: 0.5–2 GiB per requested core, so memory is never the binding constraint
	// and the comparison is about CPU, which the load-aware plugins score.
	memReq := int64(float64(req) / 1000 * (512 + 1536*rng.Float64()))
	p := PodSpec{Name: fmt.Sprintf("pl-pod-%04d", i), ReqMilliCPU: max(req, 1), ReqMemMiB: max(memReq, 1)}
	var frac float64
	switch c := rng.Float64(); {
	case c < 0.7:
		p.Class, frac = "over", 0.1+0.3*rng.Float64()
	case c < 0.9:
		p.Class, frac = "right", 0.6+0.3*rng.Float64()
	default:
		p.Class, frac = "under", 1.1+0.4*rng.Float64()
	}
	if rng.Float64() < 0.3 {
		p.LimMilliCPU = 2 * p.ReqMilliCPU
	}
	p.UseMilliCPU = frac * float64(p.ReqMilliCPU)
	p.UseMemMiB = (0.4 + 0.5*rng.Float64()) * float64(p.ReqMemMiB)
	if rng.Float64() < 0.3 {
		p.BurstMilliCPU = (0.2 + 0.3*rng.Float64()) * p.UseMilliCPU
	}
	return p
}

// Oversized lists pods whose CPU or memory request exceeds every node's capacity: no
// scheduler can place them, and the report says so instead of counting them as a scheduler's
// failure alone.
func (s *Scenario) Oversized() []string {
	var maxCPU, maxMem int64
	for _, n := range s.Nodes {
		maxCPU, maxMem = max(maxCPU, n.MilliCPU), max(maxMem, n.MemoryMiB)
	}
	var out []string
	for _, p := range s.Pods {
		if p.ReqMilliCPU > maxCPU || p.ReqMemMiB > maxMem {
			out = append(out, p.Name)
		}
	}
	for _, w := range s.Workloads {
		if w.ReqMilliCPU > maxCPU || w.ReqMemMiB > maxMem {
			out = append(out, w.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Totals are the scenario's aggregate sizes, for the report header.
type Totals struct {
	MilliCPU, EndReqMilliCPU int64
	EndUseMilliCPU           float64
	BaseMilliCPU             float64
}

// Totals sums capacity, the base load and the requests and mean use of the pods that stay to
// the end.
func (s *Scenario) Totals() Totals {
	var t Totals
	for _, n := range s.Nodes {
		t.MilliCPU += n.MilliCPU
		t.BaseMilliCPU += n.BaseCPU / 100 * float64(n.MilliCPU)
	}
	for _, p := range s.Pods {
		if p.Leave >= 0 {
			continue
		}
		t.EndReqMilliCPU += p.ReqMilliCPU
		t.EndUseMilliCPU += p.UseMilliCPU
	}
	req, use := s.workloadTotals()
	t.EndReqMilliCPU += req
	t.EndUseMilliCPU += use
	return t
}
