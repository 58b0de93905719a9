package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/isolation/marker"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

// startIsolationWebhook serves the instance-isolation webhook (the operator's code, in this
// process, on loopback with its own generated certificate) for the given namespaces only, so
// the scenario's pods can be written as users write them: a class label and nothing else.
// stop removes the webhook configuration and its Secret and stops the server.
func startIsolationWebhook(ctx context.Context, env *Env, cfg webhook.Config, namespaces []string) (stop func(), err error) {
	const (
		name   = "berth-demo-isolation"
		secret = "berth-demo-isolation-webhook-tls"
		ns     = "default"
	)
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	// With a real node the API server runs in the cluster's network namespace: its loopback is
	// not this process's, so the port is relayed into it.
	unexpose, err := env.Cluster.ExposeLoopbackPort(port)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	url := "https://" + addr + webhook.Path
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	reinvoke, timeout := admissionregistrationv1.IfNeededReinvocationPolicy, int32(5)
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "instance-isolation.demo.berth.dev", AdmissionReviewVersions: []string{"v1"}, SideEffects: &none,
			FailurePolicy: &fail, ReinvocationPolicy: &reinvoke, TimeoutSeconds: &timeout,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: namespaces}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "classed",
				Expression: fmt.Sprintf("has(object.metadata.labels) && %q in object.metadata.labels", framework.ClassLabel)}},
		}},
	}
	if _, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		unexpose()
		return nil, err
	}
	s, err := webhook.New(webhook.Options{Config: cfg, BindAddress: addr, SecretNamespace: ns, SecretName: secret,
		WebhookConfiguration: name, CertManagement: webhook.CertsByOperator, SyncInterval: time.Minute,
		Certs: webhook.CertOptions{Hosts: []string{"127.0.0.1"}, CAValidity: time.Hour, CertValidity: time.Hour}}, env.Client, logr.Discard(), nil)
	if err != nil {
		unexpose()
		_ = env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Start(sctx); close(done) }()
	stop = func() {
		cancel()
		<-done
		unexpose()
		bg := context.Background()
		_ = env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(bg, name, metav1.DeleteOptions{})
		_ = env.Client.CoreV1().Secrets(ns).Delete(bg, secret, metav1.DeleteOptions{})
	}
	// Ready, and the API server has the injected bundle: a dry-run pod comes back mutated.
	probe := framework.Pod(namespaces[0], "webhook-probe", map[string]string{framework.ClassLabel: "probe"}, framework.PodSpec("", "", ""))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if s.Ready(nil) != nil {
			return false, nil
		}
		got, err := env.Client.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Spec.SchedulerName == cfg.SchedulerName, nil
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("the isolation webhook did not start answering: %w", err)
	}
	return stop, nil
}

// describeMutation says what the webhook added to a pod written with a class label only (the
// API server's DefaultTolerationSeconds adds not-ready/unreachable tolerations of its own).
func describeMutation(p *corev1.Pod, cfg webhook.Config) string {
	s := "schedulerName=" + p.Spec.SchedulerName
	for _, t := range p.Spec.Tolerations {
		if t.Key == cfg.TaintKey {
			s += fmt.Sprintf(", toleration %s=%s:%s", t.Key, t.Value, t.Effect)
		}
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		var terms []string
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			var exprs []string
			for _, e := range term.MatchExpressions {
				if len(e.Values) == 0 {
					exprs = append(exprs, fmt.Sprintf("%s %s", e.Key, e.Operator))
				} else {
					exprs = append(exprs, fmt.Sprintf("%s %s %v", e.Key, e.Operator, e.Values))
				}
			}
			terms = append(terms, "("+strings.Join(exprs, " AND ")+")")
		}
		s += ", node affinity " + strings.Join(terms, " OR ")
	}
	return s
}

// startIsolationAdmission serves the webhook (startIsolationWebhook) and runs the operator's
// marker writer in this process, as the operator does beside its webhook: the one writer of
// each pool node's class marker, which autoscalers read.
func startIsolationAdmission(ctx context.Context, env *Env, cfg webhook.Config, namespaces []string) (stop func(), err error) {
	stopWebhook, err := startIsolationWebhook(ctx, env, cfg, namespaces)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		stopWebhook()
		return nil, err
	}
	if err := berthv1alpha1.AddToScheme(scheme); err != nil {
		stopWebhook()
		return nil, err
	}
	mgr, err := ctrl.NewManager(env.Cluster.RESTConfig, ctrl.Options{Scheme: scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Logger: logr.Discard()})
	if err != nil {
		stopWebhook()
		return nil, err
	}
	if err := marker.Setup(mgr, cfg, 30*time.Second); err != nil {
		stopWebhook()
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(mctx); err != nil {
			fmt.Fprintf(env.Out, "marker writer stopped: %v\n", err)
		}
	}()
	return func() { cancel(); <-done; stopWebhook() }, nil
}
