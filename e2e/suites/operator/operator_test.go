// Package operator runs the real berth-operator binary against the local cluster's real API
// server, controller manager and KWOK nodes: the SecondaryScheduler CRD with its CEL rules,
// owned objects, rollouts on configuration changes, refusal of invalid configurations,
// management states, the finalizer's cleanup of cluster-scoped RBAC, and /metrics served over
// HTTPS only to bearer tokens the API server authenticates and authorises (the chart's
// metrics-reader ClusterRole).
package operator

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/operator"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

const (
	ns    = "berth-system"
	image = "berth-scheduler:e2e"
)

type env struct {
	c   *cluster.Cluster
	cl  client.Client
	ctx context.Context
}

func TestOperator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{Logf: t.Logf})
	// KWOK nodes: the scheduler Deployment's pods are bound and "run" there, so the
	// Deployment's status (and the resource's Available condition) comes from the real kcm.
	if err := c.AddNodes(ctx, cluster.NodeSpec{Name: "n1", CPU: "4", Memory: "8Gi"}, cluster.NodeSpec{Name: "n2", CPU: "4", Memory: "8Gi"}); err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	framework.InstallSecondarySchedulerCRDOrFail(ctx, t, c)
	cl := framework.OperatorClient(t, c)
	healthPort, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	metricsPort, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	op, err := framework.StartOperator(ctx, c, framework.OperatorOptions{LeaderElection: true, HealthPort: healthPort,
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", metricsPort)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-operator log tail:\n%s", op.Tail(60))
		}
	})
	e := &env{c: c, cl: cl, ctx: ctx}

	t.Run("serves healthz over plain HTTP", func(t *testing.T) {
		if err := cluster.HTTPCheck(fmt.Sprintf("http://127.0.0.1:%d/healthz", healthPort))(ctx); err != nil {
			t.Error(err)
		}
	})

	t.Run("API server refuses invalid resources with the CRD's message", func(t *testing.T) {
		cases := []struct {
			name    string
			mutate  func(*berthv1alpha1.SecondarySchedulerSpec)
			wantMsg string
		}{
			{"default-scheduler name", func(s *berthv1alpha1.SecondarySchedulerSpec) { s.SchedulerName = "default-scheduler" }, "default-scheduler is the cluster's default scheduler"},
			{"name not DNS-1123", func(s *berthv1alpha1.SecondarySchedulerSpec) { s.SchedulerName = "Berth_Sched" }, "spec.schedulerName"},
			{"both plugins and configMapRef", func(s *berthv1alpha1.SecondarySchedulerSpec) {
				s.ConfigMapRef = &berthv1alpha1.ConfigMapKeyReference{Name: "x"}
			}, "set exactly one of plugins and configMapRef"},
			{"neither plugins nor configMapRef", func(s *berthv1alpha1.SecondarySchedulerSpec) { s.Plugins = nil }, "set exactly one of plugins and configMapRef"},
			{"zero replicas", func(s *berthv1alpha1.SecondarySchedulerSpec) { s.Replicas = ptr.To[int32](0) }, "spec.replicas"},
			{"empty plugin set", func(s *berthv1alpha1.SecondarySchedulerSpec) { s.Plugins = &berthv1alpha1.PluginSet{} }, "spec.plugins"},
			{"usage threshold on gpu", func(s *berthv1alpha1.SecondarySchedulerSpec) {
				s.Plugins.TargetLoadPacking.Args.UsageThresholds = map[corev1.ResourceName]int64{"nvidia.com/gpu": 80}
			}, "keys must be cpu or memory"},
			{"target utilisation over 100", func(s *berthv1alpha1.SecondarySchedulerSpec) {
				s.Plugins.TargetLoadPacking.Args.TargetUtilization = ptr.To[int64](150)
			}, "targetUtilization"},
			{"variance margin over 10", func(s *berthv1alpha1.SecondarySchedulerSpec) {
				s.Plugins.TargetLoadPacking.Args.VarianceMargin = ptr.To[configv1.Decimal]("12")
			}, "varianceMargin must be at most 10"},
			{"variance margin not a decimal", func(s *berthv1alpha1.SecondarySchedulerSpec) {
				s.Plugins.TargetLoadPacking.Args.VarianceMargin = ptr.To[configv1.Decimal]("-1")
			}, "varianceMargin"},
			{"unknown log level", func(s *berthv1alpha1.SecondarySchedulerSpec) { s.LogLevel = "Loud" }, "spec.logLevel"},
			{"unknown management state", func(s *berthv1alpha1.SecondarySchedulerSpec) { s.ManagementState = "Paused" }, "spec.managementState"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ss := newTLP("refused", 40)
				tc.mutate(&ss.Spec)
				err := cl.Create(ctx, ss)
				if err == nil {
					_ = cl.Delete(ctx, ss)
					t.Fatalf("created; want refusal naming %q", tc.wantMsg)
				}
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("error %q; want Invalid containing %q", err, tc.wantMsg)
				}
			})
		}
	})

	ss := newTLP("sched", 40)
	var firstHash string
	t.Run("create: owned objects appear and the scheduler becomes available", func(t *testing.T) {
		if err := cl.Create(ctx, ss); err != nil {
			t.Fatal(err)
		}
		// Its pods "run" on KWOK nodes, where nothing runs: Ready replicas, no leader, so
		// not Available, until a leader holds the Lease.
		e.waitCondition(t, "sched", "Available", metav1.ConditionFalse, operator.ReasonNoLeader, "no replica has taken Lease "+ns+"/"+operator.LeaseName(ss))
		if err := framework.StandInLeader(ctx, c.Client, ns, operator.LeaseName(ss), "sched-stand-in"); err != nil {
			t.Fatal(err)
		}
		got := e.waitStatus(t, "sched", "Available and not Degraded", func(s *berthv1alpha1.SecondaryScheduler) bool {
			return cond(s, "Degraded") == metav1.ConditionFalse && cond(s, "Available") == metav1.ConditionTrue &&
				s.Status.ConfigHash != "" && s.Status.ObservedGeneration == s.Generation && s.Status.ReadyReplicas == 1
		})
		firstHash = got.Status.ConfigHash
		if !contains(got.Finalizers, operator.Finalizer) {
			t.Errorf("finalizers %v lack %s", got.Finalizers, operator.Finalizer)
		}
		d := e.deployment(t, "sched")
		if h := d.Spec.Template.Annotations[operator.AnnotationConfigHash]; h != firstHash {
			t.Errorf("pod template config hash %q, status %q", h, firstHash)
		}
		ctr := d.Spec.Template.Spec.Containers[0]
		if ctr.Image != image || !contains(ctr.Args, "--config=/etc/berth/config.yaml") || d.Spec.Template.Spec.ServiceAccountName != "sched" {
			t.Errorf("deployment container %s args %v sa %s", ctr.Image, ctr.Args, d.Spec.Template.Spec.ServiceAccountName)
		}
		if ctr.SecurityContext == nil || ctr.SecurityContext.AllowPrivilegeEscalation == nil || *ctr.SecurityContext.AllowPrivilegeEscalation {
			t.Errorf("container security context not restricted: %+v", ctr.SecurityContext)
		}
		// The ConfigMap holds exactly what the scheduler will load, and it validates.
		cm := &corev1.ConfigMap{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sched-config"}, cm); err != nil {
			t.Fatal(err)
		}
		if _, err := schedconfig.Validate([]byte(cm.Data["config.yaml"])); err != nil {
			t.Errorf("ConfigMap config does not validate: %v", err)
		}
		if schedconfig.Hash([]byte(cm.Data["config.yaml"])) != firstHash {
			t.Errorf("ConfigMap content hash differs from status.configHash %s", firstHash)
		}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sched"}, &corev1.ServiceAccount{}); err != nil {
			t.Error(err)
		}
		lease := &rbacv1.Role{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "berth:berth-system:sched-leader-election"}, lease); err != nil {
			t.Error(err)
		} else if !strings.Contains(fmt.Sprint(lease.Rules), "berth-e2e") {
			t.Errorf("lease role does not name the scheduler's Lease berth-e2e: %v", lease.Rules)
		}
		crs, crbs, rbs := e.clusterScoped(t, "sched")
		if crs != 1 || crbs != 4 || rbs != 1 {
			t.Errorf("cluster-scoped objects: %d ClusterRoles, %d ClusterRoleBindings, %d kube-system RoleBindings; want 1, 4, 1", crs, crbs, rbs)
		}
	})

	// After the create subtest, so the controller has reconciled and its counters are non-zero.
	t.Run("metrics: HTTPS, only for tokens allowed to get /metrics", func(t *testing.T) {
		e.checkMetrics(t, metricsPort)
	})

	t.Run("args change: new hash and a rollout", func(t *testing.T) {
		before := e.deployment(t, "sched")
		e.updateSpec(t, "sched", func(s *berthv1alpha1.SecondarySchedulerSpec) {
			s.Plugins.TargetLoadPacking.Args.TargetUtilization = ptr.To[int64](70)
		})
		got := e.waitStatus(t, "sched", "new hash rolled out", func(s *berthv1alpha1.SecondaryScheduler) bool {
			return s.Status.ConfigHash != firstHash && s.Status.ObservedGeneration == s.Generation &&
				cond(s, "Progressing") == metav1.ConditionFalse && cond(s, "Available") == metav1.ConditionTrue
		})
		after := e.deployment(t, "sched")
		if after.Generation == before.Generation || after.Spec.Template.Annotations[operator.AnnotationConfigHash] != got.Status.ConfigHash {
			t.Errorf("deployment generation %d→%d, template hash %q, status %q", before.Generation, after.Generation,
				after.Spec.Template.Annotations[operator.AnnotationConfigHash], got.Status.ConfigHash)
		}
		// A new ReplicaSet (new pod-template-hash) carries the new template.
		var rsl appsv1.ReplicaSetList
		if err := cl.List(ctx, &rsl, client.InNamespace(ns), client.MatchingLabels{operator.LabelInstance: "sched"}); err != nil {
			t.Fatal(err)
		}
		hashes := map[string]bool{}
		for _, rs := range rsl.Items {
			hashes[rs.Labels["pod-template-hash"]] = true
		}
		if len(hashes) < 2 {
			t.Errorf("want a second ReplicaSet after the rollout, got pod-template-hashes %v", hashes)
		}
		firstHash = got.Status.ConfigHash
	})

	t.Run("decimal args survive a typed read-modify-write", func(t *testing.T) {
		// why: a typed client re-encodes the whole spec on Update; a decimal written back as a
		// JSON number was refused by the CRD schema (string), so every later Update failed.
		e.updateSpec(t, "sched", func(s *berthv1alpha1.SecondarySchedulerSpec) {
			s.Plugins.LoadVariationRiskBalancing = &berthv1alpha1.LoadVariationRiskBalancingPlugin{Args: configv1.LoadVariationRiskBalancingArgs{
				LoadAwareArgs:      configv1.LoadAwareArgs{WatcherAddress: "http://berth-loadwatcher:2020"},
				SafeVarianceMargin: configv1.NewDecimal("1.5")}}
		})
		e.updateSpec(t, "sched", func(s *berthv1alpha1.SecondarySchedulerSpec) {
			s.Plugins.TargetLoadPacking.Args.TargetUtilization = ptr.To[int64](65)
		})
		got := e.waitStatus(t, "sched", "the decimal arg rendered and rolled out", func(s *berthv1alpha1.SecondaryScheduler) bool {
			return s.Status.ConfigHash != firstHash && s.Status.ObservedGeneration == s.Generation &&
				cond(s, "Degraded") == metav1.ConditionFalse && cond(s, "Available") == metav1.ConditionTrue
		})
		if m := got.Spec.Plugins.LoadVariationRiskBalancing.Args.SafeVarianceMargin; m == nil || *m != "1.5" {
			t.Errorf("safeVarianceMargin read back as %v, want 1.5", m)
		}
		cm := &corev1.ConfigMap{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sched-config"}, cm); err != nil {
			t.Fatal(err)
		}
		if _, err := schedconfig.Validate([]byte(cm.Data["config.yaml"])); err != nil || !strings.Contains(cm.Data["config.yaml"], `safeVarianceMargin: "1.5"`) {
			t.Errorf("rendered config (%v):\n%s", err, cm.Data["config.yaml"])
		}
		firstHash = got.Status.ConfigHash
	})

	t.Run("invalid args: Degraded names the field, running scheduler untouched", func(t *testing.T) {
		before := e.deployment(t, "sched")
		cmBefore := &corev1.ConfigMap{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sched-config"}, cmBefore); err != nil {
			t.Fatal(err)
		}
		// Passes the CRD (a non-empty string) but not the plugin's own validation.
		e.updateSpec(t, "sched", func(s *berthv1alpha1.SecondarySchedulerSpec) {
			s.Plugins.TargetLoadPacking.Args.WatcherAddress = "berth-loadwatcher:2020"
		})
		got := e.waitStatus(t, "sched", "Degraded", func(s *berthv1alpha1.SecondaryScheduler) bool {
			return s.Status.ObservedGeneration == s.Generation && cond(s, "Degraded") == metav1.ConditionTrue
		})
		c := meta.FindStatusCondition(got.Status.Conditions, "Degraded")
		if c.Reason != operator.ReasonInvalidConfiguration || !strings.Contains(c.Message, "spec.plugins.targetLoadPacking.args") ||
			!strings.Contains(c.Message, "watcherAddress") {
			t.Errorf("Degraded %s: %q; want InvalidConfiguration naming spec.plugins.targetLoadPacking.args watcherAddress", c.Reason, c.Message)
		}
		if got.Status.ConfigHash != firstHash {
			t.Errorf("configHash moved to %s while the configuration is invalid", got.Status.ConfigHash)
		}
		after := e.deployment(t, "sched")
		if after.Generation != before.Generation || after.Spec.Template.Annotations[operator.AnnotationConfigHash] != firstHash {
			t.Errorf("deployment changed: generation %d→%d, template hash %s (want %s)", before.Generation, after.Generation,
				after.Spec.Template.Annotations[operator.AnnotationConfigHash], firstHash)
		}
		cmAfter := &corev1.ConfigMap{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sched-config"}, cmAfter); err != nil {
			t.Fatal(err)
		}
		if cmAfter.Data["config.yaml"] != cmBefore.Data["config.yaml"] {
			t.Errorf("ConfigMap changed although the configuration is invalid")
		}
		if cond(got, "Available") != metav1.ConditionTrue {
			t.Errorf("the running scheduler should still be Available: %v", got.Status.Conditions)
		}
		// Fixing the field clears Degraded.
		e.updateSpec(t, "sched", func(s *berthv1alpha1.SecondarySchedulerSpec) {
			s.Plugins.TargetLoadPacking.Args.WatcherAddress = "http://berth-loadwatcher:2020"
		})
		e.waitStatus(t, "sched", "recovered", func(s *berthv1alpha1.SecondaryScheduler) bool {
			return s.Status.ObservedGeneration == s.Generation && cond(s, "Degraded") == metav1.ConditionFalse
		})
	})

	t.Run("raw ConfigMap: missing, not a KubeSchedulerConfiguration, then valid", func(t *testing.T) {
		raw := &berthv1alpha1.SecondaryScheduler{
			ObjectMeta: metav1.ObjectMeta{Name: "raw", Namespace: ns},
			Spec: berthv1alpha1.SecondarySchedulerSpec{SchedulerName: "berth-raw", Image: image,
				ConfigMapRef: &berthv1alpha1.ConfigMapKeyReference{Name: "raw-input"}},
		}
		if err := cl.Create(ctx, raw); err != nil {
			t.Fatal(err)
		}
		e.waitCondition(t, "raw", "Degraded", metav1.ConditionTrue, operator.ReasonConfigMapMissing, "raw-input")
		// Created after the resource: the operator must notice (OSSO only watched updates).
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "raw-input", Namespace: ns},
			Data: map[string]string{"config.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: oops\n"}}
		if err := cl.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		e.waitCondition(t, "raw", "Degraded", metav1.ConditionTrue, operator.ReasonInvalidConfiguration, "ConfigMap berth-system/raw-input key config.yaml: not a KubeSchedulerConfiguration")
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "raw"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			t.Errorf("a Deployment exists for an invalid configuration: %v", err)
		}
		e.setConfigMap(t, "raw-input", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: berth-raw\n  plugins:\n    multiPoint:\n      enabled:\n      - name: SySched\n")
		e.waitCondition(t, "raw", "Degraded", metav1.ConditionFalse, operator.ReasonAsExpected, "")
		d := e.deployment(t, "raw")
		// A later broken edit of the ConfigMap leaves that Deployment alone.
		e.setConfigMap(t, "raw-input", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: berth-raw\n  plugins:\n    score:\n      enabled:\n      - name: NoSuchPlugin\n")
		e.waitCondition(t, "raw", "Degraded", metav1.ConditionTrue, operator.ReasonInvalidConfiguration, "NoSuchPlugin")
		if after := e.deployment(t, "raw"); after.Generation != d.Generation {
			t.Errorf("deployment rolled (generation %d→%d) for an invalid ConfigMap", d.Generation, after.Generation)
		}
		// Pointing at the ConfigMap the operator renders into is refused, and nothing of the
		// user's is overwritten.
		e.updateSpec(t, "raw", func(s *berthv1alpha1.SecondarySchedulerSpec) {
			s.ConfigMapRef = &berthv1alpha1.ConfigMapKeyReference{Name: "raw-config"}
		})
		e.waitCondition(t, "raw", "Degraded", metav1.ConditionTrue, operator.ReasonInvalidConfiguration, "spec.configMapRef.name")
		if after := e.deployment(t, "raw"); after.Generation != d.Generation {
			t.Errorf("deployment rolled (generation %d→%d) for a self-referencing configMapRef", d.Generation, after.Generation)
		}
	})

	t.Run("Unmanaged: hands off, manual edits persist", func(t *testing.T) {
		e.updateSpec(t, "sched", func(s *berthv1alpha1.SecondarySchedulerSpec) { s.ManagementState = berthv1alpha1.Unmanaged })
		e.waitCondition(t, "sched", "Progressing", metav1.ConditionFalse, operator.ReasonUnmanaged, "")
		d := &appsv1.Deployment{}
		e.update(t, "sched", d, func() { d.Spec.Replicas = ptr.To[int32](2) })
		// A spec change the operator would roll out if it managed the scheduler; once the
		// status reports this generation, the operator has seen it and must have done nothing.
		e.updateSpec(t, "sched", func(s *berthv1alpha1.SecondarySchedulerSpec) {
			s.Plugins.TargetLoadPacking.Args.TargetUtilization = ptr.To[int64](20)
		})
		got := e.waitStatus(t, "sched", "observed", func(s *berthv1alpha1.SecondaryScheduler) bool {
			return s.Status.ObservedGeneration == s.Generation
		})
		after := e.deployment(t, "sched")
		if *after.Spec.Replicas != 2 || after.Spec.Template.Annotations[operator.AnnotationConfigHash] != firstHash || got.Status.ConfigHash != firstHash {
			t.Errorf("operator touched an Unmanaged scheduler: replicas %d, template hash %s, status hash %s, want 2, %s",
				*after.Spec.Replicas, after.Spec.Template.Annotations[operator.AnnotationConfigHash], got.Status.ConfigHash, firstHash)
		}
	})

	t.Run("Removed: owned objects deleted, resource kept", func(t *testing.T) {
		e.updateSpec(t, "sched", func(s *berthv1alpha1.SecondarySchedulerSpec) { s.ManagementState = berthv1alpha1.Removed })
		e.waitCondition(t, "sched", "Available", metav1.ConditionFalse, operator.ReasonRemoved, "")
		e.waitGone(t, "deployment, config, service account and RBAC of sched", func() (bool, error) {
			for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.ServiceAccount{}} {
				if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sched"}, o); !apierrors.IsNotFound(err) {
					return false, nil
				}
			}
			if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sched-config"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
			crs, crbs, rbs := e.clusterScoped(t, "sched")
			return crs+crbs+rbs == 0, nil
		})
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sched"}, &berthv1alpha1.SecondaryScheduler{}); err != nil {
			t.Errorf("the resource itself should stay: %v", err)
		}
	})

	t.Run("delete: finalizer removes cluster-scoped RBAC", func(t *testing.T) {
		if crs, crbs, rbs := e.clusterScoped(t, "raw"); crs+crbs+rbs == 0 {
			t.Fatal("precondition: raw has no cluster-scoped objects")
		}
		for _, name := range []string{"raw", "sched"} {
			if err := cl.Delete(ctx, &berthv1alpha1.SecondaryScheduler{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
				t.Fatal(err)
			}
		}
		e.waitGone(t, "resources and their cluster-scoped RBAC", func() (bool, error) {
			for _, name := range []string{"raw", "sched"} {
				if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &berthv1alpha1.SecondaryScheduler{}); !apierrors.IsNotFound(err) {
					return false, nil
				}
				if crs, crbs, rbs := e.clusterScoped(t, name); crs+crbs+rbs > 0 {
					return false, nil
				}
			}
			return true, nil
		})
	})
}

func newTLP(name string, target int64) *berthv1alpha1.SecondaryScheduler {
	return &berthv1alpha1.SecondaryScheduler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: berthv1alpha1.SecondarySchedulerSpec{
			SchedulerName: "berth-e2e",
			Image:         image,
			// Its pods "run" on simulated nodes.
			Tolerations: []corev1.Toleration{cluster.SimulatedToleration},
			Plugins: &berthv1alpha1.PluginSet{TargetLoadPacking: &berthv1alpha1.TargetLoadPackingPlugin{
				Weight: berthv1alpha1.Weight{Weight: ptr.To[int32](2)},
				Args: configv1.TargetLoadPackingArgs{
					LoadAwareArgs:     configv1.LoadAwareArgs{WatcherAddress: "http://berth-loadwatcher:2020"},
					TargetUtilization: ptr.To(target),
				},
			}},
		},
	}
}

func cond(s *berthv1alpha1.SecondaryScheduler, t string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(s.Status.Conditions, t); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}

func (e *env) waitStatus(t *testing.T, name, what string, ok func(*berthv1alpha1.SecondaryScheduler) bool) *berthv1alpha1.SecondaryScheduler {
	t.Helper()
	var last *berthv1alpha1.SecondaryScheduler
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s := &berthv1alpha1.SecondaryScheduler{}
		if err := e.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
			return false, nil
		}
		last = s
		return ok(s), nil
	})
	if err != nil {
		var st any
		if last != nil {
			st = last.Status
		}
		t.Fatalf("%s: waiting for %s: %v; last status %+v", name, what, err, st)
	}
	return last
}

func (e *env) waitCondition(t *testing.T, name, typ string, status metav1.ConditionStatus, reason, msgPart string) {
	t.Helper()
	e.waitStatus(t, name, fmt.Sprintf("%s=%s reason %s message containing %q", typ, status, reason, msgPart), func(s *berthv1alpha1.SecondaryScheduler) bool {
		c := meta.FindStatusCondition(s.Status.Conditions, typ)
		return s.Status.ObservedGeneration == s.Generation && c != nil && c.Status == status && c.Reason == reason && strings.Contains(c.Message, msgPart)
	})
}

func (e *env) waitGone(t *testing.T, what string, gone func() (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) { return gone() }); err != nil {
		t.Fatalf("%s still there: %v", what, err)
	}
}

func (e *env) updateSpec(t *testing.T, name string, mutate func(*berthv1alpha1.SecondarySchedulerSpec)) {
	t.Helper()
	s := &berthv1alpha1.SecondaryScheduler{}
	e.update(t, name, s, func() { mutate(&s.Spec) })
}

func (e *env) setConfigMap(t *testing.T, name, config string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	e.update(t, name, cm, func() { cm.Data = map[string]string{"config.yaml": config} })
}

// update reads obj fresh, mutates it and writes it, again on a conflict: the operator and the
// controller-manager write status, finalizers and annotations meanwhile.
func (e *env) update(t *testing.T, name string, obj client.Object, mutate func()) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := e.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
			return false, err
		}
		mutate()
		if err := e.cl.Update(ctx, obj); apierrors.IsConflict(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := e.cl.Get(e.ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// clusterScoped counts the objects owner references cannot collect for one resource.
func (e *env) clusterScoped(t *testing.T, name string) (crs, crbs, kubeSystemRBs int) {
	t.Helper()
	sel := client.MatchingLabels{operator.LabelOwnerNamespace: ns, operator.LabelOwnerName: name}
	var a rbacv1.ClusterRoleList
	var b rbacv1.ClusterRoleBindingList
	var c rbacv1.RoleBindingList
	for _, l := range []client.ObjectList{&a, &b} {
		if err := e.cl.List(e.ctx, l, sel); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.cl.List(e.ctx, &c, sel, client.InNamespace("kube-system")); err != nil {
		t.Fatal(err)
	}
	return len(a.Items), len(b.Items), len(c.Items)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkMetrics proves /metrics is HTTPS behind the API server's TokenReview and
// SubjectAccessReview: the chart's own <release>-metrics-reader ClusterRole is what admits
// the scraper's ServiceAccount token.
func (e *env) checkMetrics(t *testing.T, port int) {
	t.Helper()
	ctx, cs := e.ctx, e.c.Client
	// The chart's ClusterRole, not a hand-written copy: if the chart's rule is wrong, the
	// scraper below gets 403.
	r, err := chart.Render("berth", ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	reader := &rbacv1.ClusterRole{}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == "berth-metrics-reader" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, reader); err != nil {
				t.Fatal(err)
			}
		}
	}
	if reader.Name == "" {
		t.Fatal("the chart renders no ClusterRole berth-metrics-reader")
	}
	reader.Name = "e2e-metrics-reader"
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), reader.Name, metav1.DeleteOptions{})
	})
	token := map[string]string{}
	for _, sa := range []string{"metrics-scraper", "metrics-nobody"} {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		token[sa] = tr.Status.Token
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "metrics-scraper"}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	// Why: the operator's authorizer caches a denial for 30s; ask the API server first so the
	// scraper's first request already sees the binding.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  "system:serviceaccount:" + ns + ":metrics-scraper",
			Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("the API server never allowed the scraper to get /metrics: %v", err)
	}
	admin, err := framework.AdminCertificate(e.c)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	cases := []struct {
		name       string
		url        string
		token      string
		clientCert *tls.Certificate
		wantStatus int
	}{
		// Go's TLS server answers a plain HTTP request with 400 and no metrics.
		{name: "plain HTTP", url: fmt.Sprintf("http://127.0.0.1:%d/metrics", port), wantStatus: http.StatusBadRequest},
		{name: "anonymous", url: url, wantStatus: http.StatusUnauthorized},
		// controller-runtime v0.25.2's filter reports a token the TokenReview rejects as an
		// authentication error (500 "Authentication failed"), not 401: refused either way.
		{name: "token the API server does not accept", url: url, token: "not-a-token", wantStatus: http.StatusInternalServerError},
		// controller-runtime's filter authenticates bearer tokens only (TokenReview); even a
		// system:masters client certificate is anonymous to it.
		{name: "admin client certificate, no token", url: url, clientCert: &admin, wantStatus: http.StatusUnauthorized},
		{name: "ServiceAccount not bound to metrics-reader", url: url, token: token["metrics-nobody"], wantStatus: http.StatusForbidden},
		{name: "ServiceAccount bound to metrics-reader", url: url, token: token["metrics-scraper"], wantStatus: http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Why InsecureSkipVerify: the operator generates its self-signed serving
			// certificate in memory at start, so there is no CA to pin; what is checked is
			// that the connection is TLS and who gets through.
			tlsCfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // self-signed, see above
			if tc.clientCert != nil {
				tlsCfg.Certificates = []tls.Certificate{*tc.clientCert}
			}
			hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %.300s", resp.StatusCode, tc.wantStatus, body)
			}
			reconciles := reconcileTotal(string(body))
			if tc.wantStatus != http.StatusOK {
				if reconciles >= 0 {
					t.Errorf("refused request still got metrics: %.300s", body)
				}
				return
			}
			if resp.TLS == nil {
				t.Error("metrics served without TLS")
			}
			if reconciles <= 0 {
				t.Errorf("controller_runtime_reconcile_total sums to %v after the operator reconciled; body %.500s", reconciles, body)
			}
		})
	}
}

// reconcileTotal sums controller_runtime_reconcile_total over its series (-1: no such series).
func reconcileTotal(exposition string) float64 {
	sum, found := 0.0, false
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, "controller_runtime_reconcile_total{") {
			continue
		}
		fields := strings.Fields(line)
		var v float64
		if _, err := fmt.Sscan(fields[len(fields)-1], &v); err == nil {
			sum, found = sum+v, true
		}
	}
	if !found {
		return -1
	}
	return sum
}
