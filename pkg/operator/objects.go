package operator

import (
	"fmt"
	"path"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/scheduler/rbac"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

// Labels and annotations the operator puts on what it creates.
const (
	LabelOwnerNamespace = "berth.dev/owner-namespace"
	LabelOwnerName      = "berth.dev/owner-name"
	LabelName           = "app.kubernetes.io/name"
	LabelInstance       = "app.kubernetes.io/instance"
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	// AnnotationConfigHash on the pod template rolls the Deployment when the configuration
	// changes.
	AnnotationConfigHash = "berth.dev/config-hash"
	// Finalizer removes the cluster-scoped RBAC (and the kube-system RoleBinding), which owner
	// references from a namespaced resource cannot garbage collect.
	Finalizer = "berth.dev/cluster-scoped-cleanup"

	ManagerName   = "berth-operator"
	ConfigKey     = "config.yaml"
	configDir     = "/etc/berth"
	SecurePort    = 10259
	containerName = "scheduler"
	tmpVolumeName = "tmp"
	// watcherTokenVolumeName holds the scheduler's token for the load watcher.
	watcherTokenVolumeName = "loadwatcher-token"
	confVolumeName         = "config"
)

// Names of the namespaced objects a SecondaryScheduler owns.
func DeploymentName(ss *berthv1alpha1.SecondaryScheduler) string     { return ss.Name }
func ServiceAccountName(ss *berthv1alpha1.SecondaryScheduler) string { return ss.Name }
func ConfigMapName(ss *berthv1alpha1.SecondaryScheduler) string      { return ss.Name + "-config" }

// RBACPrefix prefixes the RBAC objects' names; namespace and name keep them unique cluster-wide.
func RBACPrefix(ss *berthv1alpha1.SecondaryScheduler) string {
	return fmt.Sprintf("berth:%s:%s", ss.Namespace, ss.Name)
}

// LeaseName is the scheduler's leader-election Lease (in the resource's namespace): the
// resourceName schedconfig.Render writes into the configuration, which is the schedulerName.
func LeaseName(ss *berthv1alpha1.SecondaryScheduler) string { return schedulerName(ss) }

func schedulerName(ss *berthv1alpha1.SecondaryScheduler) string {
	if ss.Spec.SchedulerName == "" {
		return schedconfig.DefaultSchedulerName
	}
	return ss.Spec.SchedulerName
}

// OwnerLabels select everything the operator made for ss, including cluster-scoped objects.
func OwnerLabels(ss *berthv1alpha1.SecondaryScheduler) map[string]string {
	return map[string]string{LabelOwnerNamespace: ss.Namespace, LabelOwnerName: ss.Name, LabelManagedBy: ManagerName}
}

// PodLabels are the labels of the scheduler's pods (the Deployment's selector).
func PodLabels(ss *berthv1alpha1.SecondaryScheduler) map[string]string { return selectorLabels(ss) }

func selectorLabels(ss *berthv1alpha1.SecondaryScheduler) map[string]string {
	return map[string]string{LabelName: "berth-scheduler", LabelInstance: ss.Name}
}

func objectMeta(ss *berthv1alpha1.SecondaryScheduler, name, namespace string, owned bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: OwnerLabels(ss)}
	for k, v := range selectorLabels(ss) {
		m.Labels[k] = v
	}
	if owned {
		m.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: berthv1alpha1.GroupVersion.String(), Kind: "SecondaryScheduler",
			Name: ss.Name, UID: ss.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}
	}
	return m
}

// RBAC is the scheduler's RBAC with the operator's labels; objects in the resource's namespace
// carry an owner reference, the others (cluster-scoped, kube-system) rely on the finalizer.
func RBAC(ss *berthv1alpha1.SecondaryScheduler) rbac.Objects {
	o := rbac.SchedulerRBACNamed(rbac.ServiceAccountSubject(ss.Namespace, ServiceAccountName(ss)),
		RBACPrefix(ss), LeaseName(ss), ss.Namespace)
	o.Each(func(obj metav1.Object) {
		m := objectMeta(ss, obj.GetName(), obj.GetNamespace(), obj.GetNamespace() == ss.Namespace)
		obj.SetLabels(m.Labels)
		obj.SetOwnerReferences(m.OwnerReferences)
	})
	return o
}

// ServiceAccount the scheduler runs as.
func ServiceAccount(ss *berthv1alpha1.SecondaryScheduler) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: objectMeta(ss, ServiceAccountName(ss), ss.Namespace, true)}
}

// ConfigMap holding the rendered configuration.
func ConfigMap(ss *berthv1alpha1.SecondaryScheduler, r *schedconfig.Rendered) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: objectMeta(ss, ConfigMapName(ss), ss.Namespace, true),
		Data: map[string]string{ConfigKey: string(r.YAML)}}
	cm.Annotations = map[string]string{AnnotationConfigHash: r.Hash}
	return cm
}

func verbosity(l berthv1alpha1.LogLevel) int {
	switch l {
	case berthv1alpha1.LogDebug:
		return 4
	case berthv1alpha1.LogTrace:
		return 6
	case berthv1alpha1.LogTraceAll:
		return 8
	}
	return 2
}

func replicas(ss *berthv1alpha1.SecondaryScheduler) int32 {
	if ss.Spec.Replicas == nil || *ss.Spec.Replicas < 1 {
		return 1
	}
	return *ss.Spec.Replicas
}

// Deployment runs berth-scheduler with the rendered configuration. The config hash on the pod
// template makes a configuration change a rollout.
func Deployment(ss *berthv1alpha1.SecondaryScheduler, r *schedconfig.Rendered) *appsv1.Deployment {
	sel := selectorLabels(ss)
	podLabels := map[string]string{}
	for k, v := range sel {
		podLabels[k] = v
	}
	return &appsv1.Deployment{
		ObjectMeta: objectMeta(ss, DeploymentName(ss), ss.Namespace, true),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas(ss)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: map[string]string{AnnotationConfigHash: r.Hash}},
				Spec:       schedulerPodSpec(ss, sel),
			},
		},
	}
}

// schedulerPodSpec is the scheduler pod's spec; sel selects the Deployment's pods.
func schedulerPodSpec(ss *berthv1alpha1.SecondaryScheduler, sel map[string]string) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName: ServiceAccountName(ss),
		PriorityClassName:  ss.Spec.PriorityClassName,
		NodeSelector:       ss.Spec.NodeSelector,
		Tolerations:        ss.Spec.Tolerations,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		// Replicas are active/passive through the Lease; spreading them means a
		// node loss does not take every standby with it.
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchLabels: sel},
					TopologyKey:   corev1.LabelHostname,
				},
			}},
		}},
		Containers: []corev1.Container{schedulerContainer(ss)},
		Volumes:    schedulerVolumes(ss),
	}
}

// schedulerContainer is berth-scheduler's container: the rendered configuration, its secure
// port probed over HTTPS, and nothing it may write but /tmp.
func schedulerContainer(ss *berthv1alpha1.SecondaryScheduler) corev1.Container {
	resources := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}
	if ss.Spec.Resources != nil {
		resources = *ss.Spec.Resources
	}
	return corev1.Container{
		Name:            containerName,
		Image:           ss.Spec.Image,
		ImagePullPolicy: ss.Spec.ImagePullPolicy,
		Args: []string{
			"--config=" + configDir + "/" + ConfigKey,
			fmt.Sprintf("-v=%d", verbosity(ss.Spec.LogLevel)),
		},
		Ports:          []corev1.ContainerPort{{Name: "https", ContainerPort: SecurePort, Protocol: corev1.ProtocolTCP}},
		LivenessProbe:  httpsProbe("/healthz", 15),
		ReadinessProbe: httpsProbe("/readyz", 0),
		Resources:      resources,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: confVolumeName, MountPath: configDir, ReadOnly: true},
			{Name: tmpVolumeName, MountPath: "/tmp"},
			{Name: watcherTokenVolumeName, MountPath: path.Dir(loadapi.TokenFile), ReadOnly: true},
		},
	}
}

// httpsProbe probes urlPath on the scheduler's secure port.
func httpsProbe(urlPath string, initial int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: urlPath, Port: intstr.FromString("https"), Scheme: corev1.URISchemeHTTPS}},
		InitialDelaySeconds: initial, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3,
	}
}

// schedulerVolumes are the configuration, a scratch /tmp and the load watcher's token.
func schedulerVolumes(ss *berthv1alpha1.SecondaryScheduler) []corev1.Volume {
	return []corev1.Volume{
		{Name: confVolumeName, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(ss)}}}},
		{Name: tmpVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		// The token the load-aware plugins show the load watcher: for its
		// audience only, so the API server refuses it and a watcher that
		// leaked it leaks no API access.
		{Name: watcherTokenVolumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: loadapi.TokenAudience, ExpirationSeconds: ptr.To[int64](3600), Path: path.Base(loadapi.TokenFile)}}}}}},
	}
}

// PodDisruptionBudget keeps one scheduler replica through voluntary disruptions (replicas > 1).
func PodDisruptionBudget(ss *berthv1alpha1.SecondaryScheduler) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: objectMeta(ss, DeploymentName(ss), ss.Namespace, true),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: selectorLabels(ss)},
		},
	}
}
