package loadaware

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/loadapi"
)

// getLoad reads the real watcher's typed form as Berth's scheduler asks for it (Accept names
// loadapi.LoadMediaType first), with the reader token registered for url.
func getLoad(ctx context.Context, url string) (*loadapi.Load, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/watcher?pods=true", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", loadapi.LoadMediaType+", application/json;q=0.9")
	resp, err := stack.ReaderClient(url).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /watcher (typed): %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != loadapi.LoadMediaType {
		return nil, fmt.Errorf("GET /watcher (typed): Content-Type %q, want %s", ct, loadapi.LoadMediaType)
	}
	var l loadapi.Load
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("GET /watcher (typed): %w", err)
	}
	return &l, nil
}

// sameLoad checks that the typed form and the upstream document give every node the same CPU,
// as TargetLoadPacking reads each (the agents' loads are constant, so two answers a moment apart
// differ by sampling noise at most).
func sameLoad(ctx context.Context, url string, nodes []string) error {
	typed, err := getLoad(ctx, url)
	if err != nil {
		return err
	}
	upstream, err := stack.GetWatcher(ctx, url)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		want, ok := stack.CPU(upstream, n)
		nl, in := typed.Nodes[n]
		switch {
		case !ok || !in || nl.CPU == nil:
			return fmt.Errorf("node %s: upstream CPU found %v, typed %+v (listed %v)", n, ok, nl, in)
		case math.Abs(nl.CPU.Avg-want) > 1:
			return fmt.Errorf("node %s: typed CPU %.2f, upstream %.2f", n, nl.CPU.Avg, want)
		case nl.Stale || nl.Updated == 0 || len(nl.PodUIDs) == 0:
			return fmt.Errorf("node %s: typed %+v, want fresh with its agent's pod listed", n, nl)
		}
	}
	return nil
}

// documents reads berth_loadaware_watcher_documents_total of plugin and form from a scheduler's
// /metrics page.
func documents(page, plugin, form string) float64 {
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "berth_loadaware_watcher_documents_total{") &&
			strings.Contains(l, `plugin="`+plugin+`"`) && strings.Contains(l, `form="`+form+`"`) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return 0
}
