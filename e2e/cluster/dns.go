package cluster

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// CoreDNSImage is the tag of the cluster DNS image `make images` builds from tools/coredns
// (e2e/images.CoreDNSRef, which this package does not import).
const CoreDNSImage = "localhost/berth/coredns:v1.15.0"

// corefile serves cluster.local on an unprivileged port (the image runs as uid 65532; the
// Service maps 53 to it) from the API and nothing else: no forward plugin, so a name
// outside the cluster is answered NXDOMAIN here and never reaches the machine's resolver.
const corefile = `.:1053 {
    errors
    health {
        lameduck 1s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
    loadbalance
}
`

// dnsObjects are the cluster DNS as kubeadm lays it out: CoreDNS in kube-system behind the
// kube-dns Service at ClusterDNSIP, which the kubelet gives pods as their nameserver.
func dnsObjects(node string) (*corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *corev1.ConfigMap, *appsv1.Deployment, *corev1.Service) {
	const ns, name = "kube-system", "coredns"
	labels := map[string]string{"k8s-app": "kube-dns"}
	meta := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
	sa := &corev1.ServiceAccount{ObjectMeta: meta}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}}
	cm := &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"Corefile": corefile}}
	dep := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			ServiceAccountName: name,
			// Its own lookups (none: no forward plugin) must not loop back to itself.
			DNSPolicy:         corev1.DNSDefault,
			PriorityClassName: "system-cluster-critical",
			// The real node: a simulated node runs nothing.
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Tolerations:  []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "coredns", Image: CoreDNSImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-conf", "/etc/coredns/Corefile"},
				Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 1053, Protocol: corev1.ProtocolUDP},
					{Name: "dns-tcp", ContainerPort: 1053, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					RunAsNonRoot: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}},
		}},
	}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-dns", Labels: labels}, Spec: corev1.ServiceSpec{
		ClusterIP: ClusterDNSIP, Selector: labels,
		Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(1053)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(1053)}},
	}}
	return sa, cr, crb, cm, dep, svc
}

// startClusterDNS creates CoreDNS and waits until it answers its readiness probe, so that the
// first pod that resolves a Service name finds it.
func (c *Cluster) startClusterDNS(ctx context.Context) error {
	sa, cr, crb, cm, dep, svc := dnsObjects(c.realNode().NodeName)
	cs, opts := c.Client, metav1.CreateOptions{}
	steps := []func() error{
		func() error { _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, opts); return err },
		func() error { _, err := cs.RbacV1().ClusterRoles().Create(ctx, cr, opts); return err },
		func() error { _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, opts); return err },
		func() error { _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, opts); return err },
		func() error { _, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, opts); return err },
		func() error { _, err := cs.AppsV1().Deployments(dep.Namespace).Create(ctx, dep, opts); return err },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return &ComponentError{Component: "coredns", Err: err}
		}
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, c.cfg.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(dep.Namespace).Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d/%d ready", d.Status.ReadyReplicas, *d.Spec.Replicas)
		return d.Status.ReadyReplicas == *d.Spec.Replicas, nil
	})
	if err != nil {
		return &ComponentError{Component: "coredns", Err: fmt.Errorf("CoreDNS not ready after %s (%s): is %s in the node's images (make images)?", c.cfg.ReadyTimeout, last, CoreDNSImage)}
	}
	return nil
}
