package framework

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/berth-sched/berth/api/crds"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
)

// NodeImagesGVR is the NodeImages resource.
var NodeImagesGVR = berthv1alpha1.GroupVersion.WithResource("nodeimages")

// InstallNodeImagesCRD installs the generated NodeImages CRD unless it exists, and waits until
// the API serves it.
func InstallNodeImagesCRD(ctx context.Context, cfg *rest.Config) error {
	crd, err := crds.Load(crds.NodeImagesFile)
	if err != nil {
		return err
	}
	return cluster.InstallCRDs(ctx, cfg, crd)
}

// NodeImage is one image a test or the demo puts in a node's inventory.
type NodeImage struct {
	Tags    []string // normalised, e.g. docker.io/library/busybox:latest
	Digests []string // normalised, e.g. docker.io/library/busybox@sha256:…
	Size    int64
}

// WriteNodeImages creates or replaces node's NodeImages object with images, as the node
// agent would publish it.
func WriteNodeImages(ctx context.Context, dyn dynamic.Interface, node string, images ...NodeImage) error {
	var list []any
	var total int64
	for i, im := range images {
		m := map[string]any{"id": fmt.Sprintf("sha256:%064x", i+1), "sizeBytes": im.Size}
		if len(im.Tags) > 0 {
			m["tags"] = toAny(im.Tags)
		}
		if len(im.Digests) > 0 {
			m["digests"] = toAny(im.Digests)
		}
		list = append(list, m)
		total += im.Size
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": berthv1alpha1.GroupVersion.String(), "kind": "NodeImages",
		"metadata": map[string]any{"name": node},
		"spec":     map[string]any{"nodeName": node, "images": list},
	}}
	ri := dyn.Resource(NodeImagesGVR)
	cur, err := ri.Get(ctx, node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur, err = ri.Create(ctx, obj, metav1.CreateOptions{})
	case err == nil:
		obj.SetResourceVersion(cur.GetResourceVersion())
		cur, err = ri.Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("NodeImages %s: %w", node, err)
	}
	cur.Object["status"] = map[string]any{
		"observedTime": time.Now().UTC().Format(time.RFC3339), "imageCount": int64(len(images)),
		"totalSizeBytes": total, "totalSize": strconv.FormatInt(total, 10),
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Listed", "message": "written by the test as the agent would",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
	}
	if _, err := ri.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("NodeImages %s status: %w", node, err)
	}
	return nil
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// NodeImageLocalityProfile is a profile entry running NodeImageLocality with weight (the
// in-tree ImageLocality disabled). onlyScore disables every other score plugin, as seed 004's
// configuration does for ImageLocality, so image locality alone ranks feasible nodes.
func NodeImageLocalityProfile(schedulerName string, weight int, onlyScore bool, args string) string {
	score := fmt.Sprintf("      enabled:\n      - name: NodeImageLocality\n        weight: %d\n", weight)
	if onlyScore {
		score = "      disabled:\n      - name: '*'\n" + score
	} else {
		score = "      disabled:\n      - name: ImageLocality\n" + score
	}
	if args == "" {
		args = "{}"
	}
	return "- schedulerName: " + schedulerName + `
  plugins:
    preScore:
      enabled:
      - name: NodeImageLocality
    score:
` + score + `    reserve:
      enabled:
      - name: NodeImageLocality
  pluginConfig:
  - name: NodeImageLocality
    args: ` + args + "\n"
}
