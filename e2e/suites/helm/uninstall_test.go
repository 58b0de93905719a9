package helm

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// livePodConfig is the one place of the suite that writes PodConfig and PodNetwork specs (the
// PodConfig API is still changing): in namespace ns (created) it creates PodNetwork
// helm-net-<n> (bridge berth-helm<n>, 192.168.16<n>.0/24, granted to every namespace), PodConfig
// name attaching one interface to it, and a pause pod on the real node that the PodConfig
// selects, and waits until the pod's attachment is Configured. It returns the host ends of the
// pod's links (status.pods[].hostPeer) and the PodNetwork's name (cluster-scoped: the caller
// removes it).
func livePodConfig(ctx context.Context, t *testing.T, c *cluster.Cluster, cl client.Client, ns, name string, n int) (hostPeers []string, network string) {
	t.Helper()
	network = fmt.Sprintf("helm-net-%d", n)
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	pn := &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: network}, Spec: berthv1alpha1.PodNetworkSpec{
		Bridge: fmt.Sprintf("berth-helm%d", n), CIDR: fmt.Sprintf("192.168.16%d.0/24", n), Gateway: fmt.Sprintf("192.168.16%d.1", n),
		NamespaceSelector: metav1.LabelSelector{}}}
	if err := cl.Create(ctx, pn); err != nil {
		t.Fatal(err)
	}
	pc := &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: berthv1alpha1.PodConfigSpec{
		NetworkAttachments: []berthv1alpha1.NetworkAttachment{{Name: "net1", Network: network}}}}
	if err := cl.Create(ctx, pc); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-pod", Labels: map[string]string{berthv1alpha1.PodConfigLabel: name}},
		Spec: corev1.PodSpec{
			NodeName: realNode, TerminationGracePeriodSeconds: ptr[int64](1), AutomountServiceAccountToken: ptr(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "pause", Image: cluster.PauseImage, ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		}}
	if err := cl.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &berthv1alpha1.PodConfig{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pc), got); err != nil {
			last = err.Error()
			return false, nil
		}
		hostPeers = hostPeers[:0]
		ok := len(got.Status.Pods) == 1
		for _, e := range got.Status.Pods {
			ok = ok && e.State == berthv1alpha1.AttachmentConfigured && e.HostPeer != ""
			hostPeers = append(hostPeers, e.HostPeer)
		}
		last = fmt.Sprintf("phase %s, conditions %+v, entries %+v", got.Status.Phase, got.Status.Conditions, got.Status.Pods)
		return ok, nil
	})
	if err != nil {
		t.Fatalf("PodConfig %s/%s never Configured on %s: %s", ns, name, realNode, last)
	}
	return hostPeers, network
}
