package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// Image inventory of the NodeImageLocality throughput run: every node holds imagesPerNode of a
// catalogue of imageCatalogue images (a different window per node), and each pod runs one
// catalogue image, so Score has real work: the pod's image is on a quarter of the nodes.
const (
	imageCatalogue = 200
	imagesPerNode  = 50
)

func benchImage(i int) string {
	return fmt.Sprintf("registry.bench/team/app-%03d:v1", i%imageCatalogue)
}

func init() {
	RegisterProfile(func() Profile {
		return Profile{
			Name:     "berth-scheduler + NodeImageLocality",
			Binary:   cluster.BerthScheduler,
			Profiles: framework.NodeImageLocalityProfile(SchedulerName, 1, false, "{}"),
			Setup: func(ctx context.Context, c *cluster.Cluster) error {
				if err := grantPluginReads(ctx, c, "bench-imagelocality"); err != nil {
					return err
				}
				if err := framework.InstallNodeImagesCRD(ctx, c.RESTConfig); err != nil {
					return err
				}
				dyn, err := dynamic.NewForConfig(c.RESTConfig)
				if err != nil {
					return err
				}
				nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
				if err != nil {
					return err
				}
				return parallel(ctx, 16, len(nodes.Items), func(i int) error {
					imgs := make([]framework.NodeImage, imagesPerNode)
					for j := range imgs {
						imgs[j] = framework.NodeImage{Tags: []string{benchImage(i*7 + j)}, Size: int64(50+(i*7+j)%imageCatalogue*10) << 20}
					}
					return framework.WriteNodeImages(ctx, dyn, nodes.Items[i].Name, imgs...)
				})
			},
			PodMutator: func(p *corev1.Pod) {
				i, err := strconv.Atoi(strings.TrimPrefix(p.Name, "pod-"))
				if err != nil {
					panic(fmt.Sprintf("bench pod name %q has no index", p.Name))
				}
				p.Spec.Containers[0].Image = benchImage(i)
			},
		}
	})
}
