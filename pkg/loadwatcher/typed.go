package loadwatcher

import (
	"bytes"
	"encoding/json"
	"mime"
	"strconv"
	"strings"

	"github.com/paypal/load-watcher/pkg/watcher"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// acceptsLoad says whether an Accept header asks for Berth's typed form (loadapi.LoadMediaType
// listed with a quality above 0). Clients that do not name it (upstream Trimaran, paypal's
// client, curl) keep getting the upstream document.
func acceptsLoad(header string) bool {
	for _, part := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != loadapi.LoadMediaType {
			continue
		}
		if q, ok := params["q"]; ok {
			if v, err := strconv.ParseFloat(q, 64); err == nil && v == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// LoadOf is Berth's typed form of a built document: the same nodes, freshness and pods, each
// resource read from the served list the way upstream's GetResourceData reads it (the store's
// lists are Berth's own, Latest then AVG then STD per resource, so that is the window average).
func LoadOf(b *Built) loadapi.Load {
	out := loadapi.Load{Timestamp: b.Timestamp, Window: b.Window.Duration, Source: b.Source,
		Nodes: make(map[string]loadapi.NodeLoad, len(b.Nodes))}
	for name, st := range b.Nodes {
		nl := loadapi.NodeLoad{Updated: st.Updated, Stale: st.Stale, PodUIDs: st.PodUIDs, Pods: st.Pods}
		if nm, ok := b.Data.NodeMetricsMap[name]; ok {
			nl.CPU = resourceOf(nm.Metrics, watcher.CPU)
			nl.Memory = resourceOf(nm.Metrics, watcher.Memory)
		}
		out.Nodes[name] = nl
	}
	return out
}

// resourceOf reads one resource of a list: AVG wins, STD is the deviation, Latest stands in for
// AVG only while no AVG was seen; nil when the list has no metric of the type.
func resourceOf(ms []watcher.Metric, typ string) *loadapi.ResourceLoad {
	var r *loadapi.ResourceLoad
	avgSeen := false
	for _, m := range ms {
		if m.Type != typ {
			continue
		}
		if r == nil {
			r = &loadapi.ResourceLoad{}
		}
		switch m.Operator {
		case watcher.Average:
			r.Avg, avgSeen = m.Value, true
		case watcher.Std:
			r.Std = m.Value
		case watcher.Latest, "":
			if !avgSeen {
				r.Avg = m.Value
			}
		}
	}
	return r
}

// encodeLoad encodes the typed form of a built document.
func encodeLoad(b *Built) (*doc, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(LoadOf(b)); err != nil {
		return nil, err
	}
	d := newDoc(buf.Bytes())
	d.contentType = loadapi.LoadMediaType
	d.gen, d.nextFlip = b.Gen, b.NextFlip
	return d, nil
}
