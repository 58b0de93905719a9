package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

const (
	release    = "berth"
	relNS      = "berth-system"
	mwcName    = "berth-instance-isolation"
	hookName   = "instance-isolation.berth.dev"
	secretName = "berth-isolation-webhook-tls"
	fixedClass = mwcName + "-fixed-class"
	opUser     = "berth-operator-e2e"
	nsA, nsB   = "adm-a", "adm-b"
	// Short lifetimes so the suite sees serving-certificate and CA renewals: the serving
	// certificate renews every ~13 s, the CA with 20 s left.
	caValidity   = 60 * time.Second
	certValidity = 20 * time.Second
)

// The chart's values for this suite: mode berth, the plugin on, failurePolicy Fail. The
// suite's berth-scheduler runs as user berth-scheduler, not the chart's ServiceAccount, so it is
// named a pool binder (else its bindings to pool nodes are refused, as anyone else's).
const values = `
scheduler: {plugins: {instanceIsolation: {enabled: true}}}
isolation: {enabled: true, mode: berth, failurePolicy: Fail, extraPoolBinders: [berth-scheduler]}
`

var poolTaint = corev1.Taint{Key: "ipp", Value: "true", Effect: corev1.TaintEffectNoSchedule}

func poolNode(name string) cluster.NodeSpec {
	return cluster.NodeSpec{Name: name, CPU: "8", Memory: "16Gi",
		Labels: map[string]string{"ipp": "true", "topology.kubernetes.io/zone": "z1"}, Taints: []corev1.Taint{poolTaint}}
}

func toTyped(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

type env struct {
	c        *cluster.Cluster
	hookAddr string
	// metricsAddr is the operator's plain-HTTP /metrics on loopback.
	metricsAddr string
	op          *cluster.Process
}

// TestAdmission: one cluster, one operator (stopped near the end), every admission proof in
// order; see each step's name.
func TestAdmission(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	// One control plane for every step. Pods here go to berth-scheduler or stay unscheduled:
	// the stock scheduler is not needed (the controller-manager is: namespaces' default
	// ServiceAccounts, KWOK nodes' taints, the DaemonSet's pods).
	c := framework.StartCluster(ctx, t, cluster.Config{WithoutDefaultScheduler: true, WithoutBerthCRDs: true})
	e := &env{c: c}
	for _, ns := range []string{relNS, nsA, nsB} {
		if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
			t.Fatal(err)
		}
	}
	var v map[string]any
	if err := yamlUnmarshal(values, &v); err != nil {
		t.Fatal(err)
	}
	r, err := chart.Render(release, relNS, v)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	installCRDs(ctx, t, c, r)
	grantOperatorRBAC(ctx, t, c, objs)

	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	e.hookAddr = fmt.Sprintf("127.0.0.1:%d", port)
	var secret corev1.Secret
	for _, o := range objs {
		switch o.GetKind() {
		case "Secret":
			toTyped(t, o, &secret)
		case "MutatingWebhookConfiguration":
			var m admissionregistrationv1.MutatingWebhookConfiguration
			toTyped(t, o, &m)
			// why: the API server runs outside any pod network here; the operator listens on
			// loopback, so the chart's Service reference becomes a URL to it.
			url := "https://" + e.hookAddr + webhook.Path
			for i := range m.Webhooks {
				m.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
			}
			if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &m, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			createPolicy(ctx, t, c.Client, o, nil)
		}
	}
	if err := c.AddNodes(ctx, poolNode("pool-1")); err != nil {
		t.Fatal(err)
	}
	profiles, err := framework.InstanceIsolationProfiles("berth-scheduler", "", 10, configv1.InstanceIsolationArgs{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Config: framework.SchedulerConfig(profiles)}); err != nil {
		t.Fatal(err)
	}
	// The Secret as a stopped operator left it long ago: its serving certificate expired 5 s
	// ago; its CA (60 s lifetime) has 35 s left, so it is renewed ~15 s into the run. Written
	// right before the operator starts so the CA is not yet due when it does.
	seeded, _, err := webhook.Ensure(nil, webhook.CertOptions{Hosts: []string{"127.0.0.1"}, CAValidity: caValidity, CertValidity: certValidity},
		time.Now().Add(-25*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = seeded
	if _, err := c.Client.CoreV1().Secrets(relNS).Create(ctx, &secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startOperator(ctx, t, objs)

	t.Run("policy type-checks on the API server", func(t *testing.T) {
		if err := framework.WaitPoliciesTypeChecked(ctx, c.Client, mwcName, fixedClass, mwcName+"-pool-access", mwcName+"-node-name", mwcName+"-binding"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("expired serving certificate replaced at start", func(t *testing.T) {
		sec, err := c.Client.CoreV1().Secrets(relNS).Get(ctx, secretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := webhook.Load(sec.Data, time.Now())
		if err != nil {
			t.Fatalf("Secret still unusable: %v", err)
		}
		if bytes.Equal(sec.Data[webhook.KeyCert], seeded[webhook.KeyCert]) {
			t.Fatal("the expired serving certificate is still in the Secret")
		}
		if log := readFile(e.op.LogPath); !strings.Contains(log, "serving certificate expired at") {
			t.Errorf("operator log does not say why it reissued: %s", e.op.Tail(20))
		}
		t.Logf("serving certificate %s valid until %s", m.Leaf.Leaf.SerialNumber.Text(16), m.Leaf.Leaf.NotAfter.Format(time.RFC3339))
	})

	var classA *corev1.Pod
	t.Run("API server calls the webhook over TLS; the pod's own tolerations and affinity survive", func(t *testing.T) {
		p := userPod(nsA, "a-1", map[string]string{"ipp-class": "a"})
		got, err := c.Client.CoreV1().Pods(nsA).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		classA = got
		checkMutated(t, p, got)
		// Unclassed pods never reach the webhook (matchConditions) and stay as written.
		plain, err := c.Client.CoreV1().Pods(nsA).Create(ctx, framework.Pod(nsA, "plain", nil, framework.PodSpec("", "10m", "16Mi")), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if plain.Spec.SchedulerName != corev1.DefaultSchedulerName || plain.Spec.Affinity != nil {
			t.Errorf("unclassed pod changed: %s %+v", plain.Spec.SchedulerName, plain.Spec.Affinity)
		}
		if _, err := framework.WaitPods(ctx, c.Client, nsA, "ipp-class=a", 1, 30*time.Second, framework.Bound); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a pod's class is fixed: relabelling it (spec or status) is refused, other labels change", func(t *testing.T) {
		if classA == nil {
			// why: fail, not skip: a skipped step must never look like a passed one.
			t.Fatal("the earlier step did not create class a's pod (see its failure)")
		}
		for _, tc := range []struct {
			name, pod, sub, patch, msg string
		}{
			{"into another class", "a-1", "", `{"metadata":{"labels":{"ipp-class":"b"}}}`, `ipp-class: "a" -> "b"`},
			{"out of any class", "a-1", "", `{"metadata":{"labels":{"ipp-class":null}}}`, `ipp-class: "a" -> ""`},
			{"second key, other class", "a-1", "", `{"metadata":{"labels":{"berth.dev/instance-class":"b"}}}`, `berth.dev/instance-class: "" -> "b"`},
			{"through pods/status", "a-1", "status", `{"metadata":{"labels":{"ipp-class":"b"}}}`, `ipp-class: "a" -> "b"`},
			{"an unclassed pod into a class", "plain", "", `{"metadata":{"labels":{"ipp-class":"a"}}}`, `ipp-class: "" -> "a"`},
			{"another label", "a-1", "", `{"metadata":{"labels":{"tier":"web"}}}`, ""},
		} {
			var subs []string
			if tc.sub != "" {
				subs = append(subs, tc.sub)
			}
			// why: a new binding takes effect a moment after it is created. Wait for it with
			// dry runs (admission policies judge those too): a real patch sent before the
			// policy is active would relabel the pod and spoil every later step.
			if tc.msg != "" {
				_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
					_, derr := c.Client.CoreV1().Pods(nsA).Patch(ctx, tc.pod, types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, subs...)
					return derr != nil, nil
				})
			}
			_, err := c.Client.CoreV1().Pods(nsA).Patch(ctx, tc.pod, types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{}, subs...)
			switch {
			case tc.msg == "" && err != nil:
				t.Errorf("%s: %v", tc.name, err)
			case tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "instance class of a pod is fixed at creation")):
				t.Errorf("%s: %v, want the policy's refusal containing %q", tc.name, err, tc.msg)
			}
		}
		got, err := c.Client.CoreV1().Pods(nsA).Get(ctx, "a-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Labels["ipp-class"] != "a" || got.Labels["berth.dev/instance-class"] != "" || got.Labels["tier"] != "web" {
			t.Errorf("labels after the refusals: %v", got.Labels)
		}
	})

	t.Run("a classed pod naming its node is refused by the webhook", func(t *testing.T) {
		p := handWritten(nsA, "pinned", map[string]string{"ipp-class": "z"})
		p.Spec.NodeName = "pool-1"
		_, err := c.Client.CoreV1().Pods(nsA).Create(ctx, p, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), `denied the request: instance isolation: pod of instance class z sets spec.nodeName "pool-1", which bypasses the scheduler`) {
			t.Fatalf("%v, want the webhook's refusal", err)
		}
	})

	t.Run("dry run is answered, mutated, and leaves nothing", func(t *testing.T) {
		p := userPod(nsA, "dry", map[string]string{"berth.dev/instance-class": "a"})
		got, err := c.Client.CoreV1().Pods(nsA).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		checkMutated(t, p, got)
		if _, err := c.Client.CoreV1().Pods(nsA).Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("dry-run pod exists: %v", err)
		}
	})

	t.Run("bad classes are refused with the reason", func(t *testing.T) {
		for _, tc := range []struct {
			labels map[string]string
			msg    string
		}{
			{map[string]string{"ipp-class": "a", "berth.dev/instance-class": "b"}, "conflicting instance classes: ipp-class=a, berth.dev/instance-class=b"},
			{map[string]string{"ipp-class": "bad value!"}, `instance class ipp-class="bad value!" is not a valid label value`},
		} {
			_, err := c.Client.CoreV1().Pods(nsA).Create(ctx, userPod(nsA, "bad", tc.labels), metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%v: %v, want a refusal containing %q", tc.labels, err, tc.msg)
			}
		}
	})

	t.Run("unknown AdmissionReview version and oversized body get HTTP errors from the real server", func(t *testing.T) {
		client := e.trustingClient(ctx, t)
		for _, tc := range []struct {
			body []byte
			code int
			msg  string
		}{
			{[]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`), 400, "speaks AdmissionReview admission.k8s.io/v1 only"},
			{append([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{"x":"`), bytes.Repeat([]byte("x"), 5<<20)...), 413, "exceeds"},
		} {
			resp, err := client.Post("https://"+e.hookAddr+webhook.Path, "application/json", bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.msg) {
				t.Errorf("HTTP %d %q, want %d containing %q", resp.StatusCode, b, tc.code, tc.msg)
			}
		}
	})

	t.Run("the operator's /metrics counts the answers above by outcome", func(t *testing.T) {
		resp, err := http.Get("http://" + e.metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// why: lower bounds, since the API server may retry a call; each outcome was produced
		// above: patched (the TLS and dry-run pods), refused (two bad classes, the named node),
		// bad_request (v1beta1, oversized).
		for outcome, least := range map[string]float64{"patched": 2, "refused": 3, "bad_request": 2} {
			series := `berth_isolation_webhook_requests_total{mode="berth",outcome="` + outcome + `"}`
			v, ok := metricValue(string(body), series)
			if !ok || v < least {
				t.Errorf("%s = %v (found %v), want >= %v", series, v, ok, least)
			}
		}
	})

	t.Run("certificates rotate under load and every request is still accepted", func(t *testing.T) {
		serials, issuers := map[string]bool{}, map[string]bool{}
		maxCAs, failures, requests := 0, 0, 0
		var firstErr error
		// why: 35 s covers the first serving certificate's renewal (~13 s), the CA's (~15 s) and
		// the renewed certificate's (~28 s) with room for a slow machine.
		end := time.Now().Add(35 * time.Second)
		for i := 0; time.Now().Before(end); i++ {
			leaf, err := servedCert(e.hookAddr)
			if err == nil {
				serials[leaf.SerialNumber.Text(16)] = true
				issuers[leaf.Issuer.CommonName] = true
			}
			p := userPod(nsA, fmt.Sprintf("load-%d", i), map[string]string{"ipp-class": "a"})
			got, err := c.Client.CoreV1().Pods(nsA).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			requests++
			if err != nil || got.Spec.SchedulerName != "berth-scheduler" {
				failures++
				if firstErr == nil {
					firstErr = fmt.Errorf("request %d at %s: %v (scheduler %q)", i, time.Now().Format(time.RFC3339Nano), err, schedulerOf(got))
				}
			}
			if m, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwcName, metav1.GetOptions{}); err == nil {
				if n := countCerts(m.Webhooks[0].ClientConfig.CABundle); n > maxCAs {
					maxCAs = n
				}
			}
			time.Sleep(150 * time.Millisecond)
		}
		t.Logf("%d requests, %d serving certificates, %d CAs, bundle up to %d CAs", requests, len(serials), len(issuers), maxCAs)
		if failures > 0 {
			t.Errorf("%d of %d requests failed across rotations; first: %v\noperator log:\n%s", failures, requests, firstErr, e.op.Tail(30))
		}
		if len(serials) < 3 || len(issuers) < 2 || maxCAs != 2 {
			t.Errorf("rotation not exercised: %d serving certificates (want >= 3), %d CAs (want >= 2), bundle max %d (want 2)", len(serials), len(issuers), maxCAs)
		}
	})

	// From here on no webhook answers.
	c.StopComponent(e.op)

	t.Run("webhook down + Fail: classed pods refused with a clear message, others unaffected", func(t *testing.T) {
		_, err := c.Client.CoreV1().Pods(nsA).Create(ctx, userPod(nsA, "down", map[string]string{"ipp-class": "a"}), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), `failed calling webhook "`+hookName+`"`) {
			t.Fatalf("created or unclear: %v", err)
		}
		t.Logf("refusal: %v", err)
		if _, err := c.Client.CoreV1().Pods(nsA).Create(ctx, framework.Pod(nsA, "plain-down", nil, framework.PodSpec("", "10m", "16Mi")), metav1.CreateOptions{}); err != nil {
			t.Errorf("unclassed pod refused while the webhook is down: %v", err)
		}
		// The release namespace is exempt: the operator's own recovery is never blocked.
		if _, err := c.Client.CoreV1().Pods(relNS).Create(ctx, framework.Pod(relNS, "recovery", map[string]string{"ipp-class": "a"}, framework.PodSpec("", "10m", "16Mi")), metav1.CreateOptions{}); err != nil {
			t.Errorf("classed pod in the release namespace refused: %v", err)
		}
	})

	m, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwcName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ignore := admissionregistrationv1.Ignore
	// why every webhook: the binding webhook too, so the binding policy is what answers below.
	for i := range m.Webhooks {
		m.Webhooks[i].FailurePolicy = &ignore
	}
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("webhook down + Ignore: the policy refuses classed pods without the constraint", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			pod  *corev1.Pod
			msg  string
		}{
			{"as written by a user", framework.Pod(nsB, "bare", map[string]string{"ipp-class": "b"}, framework.PodSpec("", "10m", "16Mi")),
				"pod of instance class b must name spec.schedulerName"},
			{"berth scheduler, no pool", framework.Pod(nsB, "nopool", map[string]string{"ipp-class": "b"}, framework.PodSpec("berth-scheduler", "10m", "16Mi")),
				"must require the node pool ipp=true"},
			{"conflicting", handWritten(nsB, "conflict", map[string]string{"ipp-class": "b", "berth.dev/instance-class": "c"}),
				"conflicting instance classes: ipp-class=b, berth.dev/instance-class=c"},
			{"constraint carried, node named", func() *corev1.Pod {
				p := handWritten(nsB, "pinned", map[string]string{"ipp-class": "b"})
				p.Spec.NodeName = "pool-1"
				return p
			}(), `pod of instance class b sets spec.nodeName "pool-1", which bypasses the scheduler`},
			{"unclassed, pool node named", func() *corev1.Pod {
				p := framework.Pod(nsB, "squat", nil, framework.PodSpec("", "10m", "16Mi"))
				p.Spec.NodeName = "pool-1"
				return p
			}(), "spec.nodeName: names node pool-1, an isolation pool node (label ipp=true); pool nodes belong to instance classes"},
		} {
			// why: the API server sees the Ignore policy a moment after the update; until then
			// the call fails as under Fail, which is not what is tested here.
			var err error
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err = c.Client.CoreV1().Pods(nsB).Create(ctx, tc.pod, metav1.CreateOptions{})
				return err == nil || !strings.Contains(err.Error(), "failed calling webhook"), nil
			})
			if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
				t.Errorf("%s: %v, want the policy's refusal containing %q", tc.name, err, tc.msg)
			}
		}
		// A Binding created directly by someone who is no class's scheduler (the suite's admin):
		// the binding policy, evaluated per pool node, refuses it.
		stray, err := c.Client.CoreV1().Pods(nsB).Create(ctx, framework.Pod(nsB, "stray", nil, framework.PodSpec("nobody", "10m", "16Mi")), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: stray.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "pool-1"}}
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			err = c.Client.CoreV1().Pods(nsB).Bind(ctx, b, metav1.CreateOptions{})
			return err == nil || !strings.Contains(err.Error(), "failed calling webhook"), nil
		})
		if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+mwcName+"-binding'") ||
			!strings.Contains(err.Error(), "target.name: binding pod "+nsB+"/stray to node pool-1, an isolation pool node (label ipp=true)") {
			t.Errorf("direct binding to pool-1: %v, want the binding policy's refusal", err)
		}
	})

	t.Run("webhook down + Ignore: a pod with the constraint is created and InstanceIsolation still keeps it off class a's node", func(t *testing.T) {
		if classA == nil || classA.Spec.SchedulerName != "berth-scheduler" {
			t.Fatal("the earlier step did not create class a's pod with schedulerName berth-scheduler (see its failure)")
		}
		b := handWritten(nsB, "b-1", map[string]string{"ipp-class": "b"})
		var got *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			got, err = c.Client.CoreV1().Pods(nsB).Create(ctx, b, metav1.CreateOptions{})
			if err != nil && strings.Contains(err.Error(), "failed calling webhook") {
				return false, nil
			}
			return true, err
		})
		if err != nil {
			t.Fatalf("not created with Ignore: %v", err)
		}
		ev, err := framework.WaitSchedulingEvent(ctx, c.Client, got, "FailedScheduling", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ev.Note, "node holds instance class a") {
			t.Fatalf("FailedScheduling %q, want the class a conflict named", ev.Note)
		}
		if err := c.AddNodes(ctx, poolNode("pool-2")); err != nil {
			t.Fatal(err)
		}
		pods, err := framework.WaitPods(ctx, c.Client, nsB, "ipp-class=b", 1, 30*time.Second, framework.Bound)
		if err != nil {
			t.Fatal(err)
		}
		if pods[0].Spec.NodeName != "pool-2" {
			t.Fatalf("class b pod on %s, want pool-2 (pool-1 holds class a)", pods[0].Spec.NodeName)
		}
	})

	t.Run("mode both's policy accepts exactly what the webhook writes", func(t *testing.T) {
		var v map[string]any
		if err := yamlUnmarshal(`
scheduler: {plugins: {instanceIsolation: {enabled: true, isolatedProfileName: berth-scheduler-isolated}}}
isolation: {enabled: true, mode: both}`, &v); err != nil {
			t.Fatal(err)
		}
		r, err := chart.Render("both", relNS, v)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := chart.Objects(r.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		const nsC = "adm-c"
		if err := framework.EnsureNamespace(ctx, c.Client, nsC); err != nil {
			t.Fatal(err)
		}
		// Berth mode's policy is bound cluster-wide above; its constraints are a subset of
		// both's for pods naming the main profile, so the pods below meet it too.
		for _, o := range objs {
			createPolicy(ctx, t, c.Client, o, func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsC}}}
			})
		}
		withTerm := handWritten(nsC, "c-term", map[string]string{"ipp-class": "c"})
		hookCfg := webhook.Defaults()
		withTerm.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: hookCfg.ClassTerms("c", []string{nsC})}
		oneKey := withTerm.DeepCopy()
		oneKey.Name = "c-onekey"
		oneKey.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = []corev1.PodAffinityTerm{webhook.ClassTerm("ipp-class", "c")}
		// IPP's own term (bare NotIn) is not the constraint: cluster-wide it matches node daemons.
		bare := withTerm.DeepCopy()
		bare.Name = "c-bare"
		bare.Spec.Affinity.PodAntiAffinity = framework.IPPAntiAffinity("c").PodAntiAffinity
		narrow := withTerm.DeepCopy()
		narrow.Name = "c-narrow"
		// A term limited to some namespaces isolates less than the cluster-wide one.
		narrow.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].NamespaceSelector =
			&metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
		// What the webhook of mode both writes into a user's ReplicaSet pod (class terms, spread
		// term and label, main profile since the pod has a term of its own), patched here the way
		// the API server patches.
		hookBoth := webhook.Defaults()
		hookBoth.Mode, hookBoth.IsolatedSchedulerName = webhook.ModeBoth, "berth-scheduler-isolated"
		fromHook := userPod(nsC, "c-hook", map[string]string{"berth.dev/instance-class": "c"})
		fromHook.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "4f1c2e7a-5b3d-4c1e-9a2f-6d8e0b1c3a57", Controller: ptrTo(true)}}
		fromHook = mutateLocally(t, hookBoth, fromHook)
		if fromHook.Spec.SchedulerName != "berth-scheduler" || len(fromHook.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 5 {
			t.Fatalf("webhook output not as expected: %s %+v", fromHook.Spec.SchedulerName, fromHook.Spec.Affinity.PodAntiAffinity)
		}
		for _, tc := range []struct {
			pod *corev1.Pod
			msg string
		}{
			{fromHook, ""},
			{handWritten(nsC, "c-noterm", map[string]string{"ipp-class": "c"}), "must carry, per class label key, the required pod anti-affinity term {<key> Exists, <key> NotIn [c]"},
			{narrow, "missing for ipp-class; "},
			{oneKey, "missing for berth.dev/instance-class; "},
			{bare, "missing for ipp-class, berth.dev/instance-class; "},
			{withTerm, ""},
		} {
			var err error
			// why: a new binding takes effect a moment after it is created.
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err = c.Client.CoreV1().Pods(nsC).Create(ctx, tc.pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return (err != nil) == (tc.msg != ""), nil
			})
			if tc.msg == "" && err != nil || tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)) {
				t.Errorf("%s: %v, want %q", tc.pod.Name, err, tc.msg)
			}
		}
	})

	t.Run("the class terms do not match node daemons: a DaemonSet on a free pool node blocks no class, IPP's bare term would", func(t *testing.T) {
		const nsD = "adm-d"
		if err := framework.EnsureNamespace(ctx, c.Client, nsD); err != nil {
			t.Fatal(err)
		}
		if err := c.AddNodes(ctx, poolNode("pool-3")); err != nil {
			t.Fatal(err)
		}
		// A real DaemonSet (the controller-manager makes its pods), unclassed like kube-proxy,
		// scheduled by berth-scheduler (no default scheduler here). It tolerates every taint, so
		// it lives where kube-proxy does: outside an exempt namespace the policy refuses such
		// pods (issue 20 item 5).
		spec := framework.PodSpec("berth-scheduler", "10m", "16Mi")
		spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "node-daemon", Namespace: metav1.NamespaceSystem},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "node-daemon"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "node-daemon"}}, Spec: spec}}}
		if _, err := c.Client.AppsV1().DaemonSets(ds.Namespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			pods, err := c.Client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=node-daemon", FieldSelector: "spec.nodeName=pool-3"})
			return err == nil && len(pods.Items) == 1, nil
		})
		if err != nil {
			t.Fatalf("no DaemonSet pod bound on pool-3: %v", err)
		}
		// pool-1 holds class a, pool-2 class b: pool-3 (daemon only) is the one node for d and e.
		// Both go to berth-scheduler's main profile, where InterPodAffinity evaluates the terms.
		bare := handWritten(nsD, "e-bare", map[string]string{"ipp-class": "e"})
		bare.Spec.Affinity.PodAntiAffinity = framework.IPPAntiAffinity("e").PodAntiAffinity
		// why: the berth-mode policy bound cluster-wide accepts both (it asks for no term).
		gotBare, err := c.Client.CoreV1().Pods(nsD).Create(ctx, bare, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := framework.WaitSchedulingEvent(ctx, c.Client, gotBare, "FailedScheduling", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("IPP's bare term: %s", ev.Note)
		if !strings.Contains(ev.Note, "anti-affinity") {
			t.Errorf("IPP's bare term on pool-3: FailedScheduling %q, want the anti-affinity rule named (control: the daemon is what blocks it)", ev.Note)
		}
		if err := c.Client.CoreV1().Pods(nsD).Delete(ctx, "e-bare", metav1.DeleteOptions{GracePeriodSeconds: ptrInt64(0)}); err != nil {
			t.Fatal(err)
		}
		d := handWritten(nsD, "d-1", map[string]string{"berth.dev/instance-class": "d"})
		hookCfg := webhook.Defaults()
		d.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: hookCfg.ClassTerms("d", []string{nsD})}
		if _, err := c.Client.CoreV1().Pods(nsD).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods, err := framework.WaitPods(ctx, c.Client, nsD, "berth.dev/instance-class=d", 1, 30*time.Second, framework.Bound)
		if err != nil {
			t.Fatal(err)
		}
		if pods[0].Spec.NodeName != "pool-3" {
			t.Fatalf("class d pod on %s, want pool-3 beside the daemon only", pods[0].Spec.NodeName)
		}
	})
}

func ptrInt64(v int64) *int64 { return &v }

// metricValue reads one series of a Prometheus text exposition.
func metricValue(exposition, series string) (float64, bool) {
	for _, line := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

func ptrTo[T any](v T) *T { return &v }

// createPolicy creates o when it is a ValidatingAdmissionPolicy or a binding of one (bind, when
// set, edits the binding first); any other kind is left out.
func createPolicy(ctx context.Context, t *testing.T, cs kubernetes.Interface, o *unstructured.Unstructured, bind func(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)) {
	t.Helper()
	var err error
	switch o.GetKind() {
	case "ValidatingAdmissionPolicy":
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		toTyped(t, o, &p)
		_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{})
	case "ValidatingAdmissionPolicyBinding":
		var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
		toTyped(t, o, &b)
		if bind != nil {
			bind(&b)
		}
		_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// mutateLocally runs the webhook's decision for p under cfg and applies its JSON patch.
func mutateLocally(t *testing.T, cfg webhook.Config, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	res, err := cfg.Mutate(p)
	if err != nil {
		t.Fatal(err)
	}
	return framework.PatchedPod(t, p, res.Patch)
}

// userPod is a classed pod as a user writes it, with tolerations and affinity of its own
// that the webhook must keep.
func userPod(ns, name string, labels map[string]string) *corev1.Pod {
	spec := framework.PodSpec("", "10m", "16Mi")
	spec.Tolerations = append([]corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, spec.Tolerations...)
	spec.Affinity = &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}},
		}}}},
		PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10,
			PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "noisy"}}, TopologyKey: corev1.LabelHostname}}}},
	}
	return framework.Pod(ns, name, labels, spec)
}

// handWritten is a classed pod carrying berth mode's constraint itself.
func handWritten(ns, name string, labels map[string]string) *corev1.Pod {
	spec := framework.PodSpec("berth-scheduler", "10m", "16Mi")
	spec.Tolerations = append([]corev1.Toleration{{Key: "ipp", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}, spec.Tolerations...)
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "ipp", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}}}}}
	return framework.Pod(ns, name, labels, spec)
}

// checkMutated: berth mode's constraint added, the user's own entries kept in place.
func checkMutated(t *testing.T, sent, got *corev1.Pod) {
	t.Helper()
	if got.Spec.SchedulerName != "berth-scheduler" {
		t.Errorf("schedulerName %q, want berth-scheduler", got.Spec.SchedulerName)
	}
	if len(got.Spec.Tolerations) < 2 || got.Spec.Tolerations[0].Key != sent.Spec.Tolerations[0].Key {
		t.Errorf("tolerations %+v: the user's first, then the pool's", got.Spec.Tolerations)
	}
	hasPoolTol := false
	for _, tol := range got.Spec.Tolerations {
		hasPoolTol = hasPoolTol || (tol.Key == "ipp" && tol.Value == "true" && tol.Effect == corev1.TaintEffectNoSchedule)
	}
	if !hasPoolTol {
		t.Errorf("no pool toleration: %+v", got.Spec.Tolerations)
	}
	terms := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	// why: with the autoscaler marker (chart default) the user's term comes twice: with the
	// class's marker, then with none (pkg/isolation/webhook/README.md, "The autoscaler's view").
	want := []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpDoesNotExist}
	if len(terms) != 2 {
		t.Errorf("node selector terms %+v: want the user's zone requirement ANDed with the pool, with and without the marker", terms)
	}
	for i, term := range terms {
		if i >= len(want) || len(term.MatchExpressions) != 3 || term.MatchExpressions[0].Key != "topology.kubernetes.io/zone" || term.MatchExpressions[1].Key != "ipp" ||
			term.MatchExpressions[2].Key != classmarker.Key || term.MatchExpressions[2].Operator != want[i] {
			t.Errorf("node selector term %d %+v: want the user's zone requirement ANDed with the pool and the marker %s", i, term, want[min(i, 1)])
		}
	}
	if a := got.Spec.Affinity.PodAntiAffinity; a == nil || len(a.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("the user's preferred anti-affinity is gone: %+v", a)
	}
}

func schedulerOf(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	return p.Spec.SchedulerName
}

// servedCert is the certificate the webhook presents now (read, not verified).
func servedCert(addr string) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&netDialer, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func countCerts(pemBytes []byte) int {
	return bytes.Count(pemBytes, []byte("-----BEGIN CERTIFICATE-----"))
}

// trustingClient trusts the CA bundle the operator injected, as the API server does.
func (e *env) trustingClient(ctx context.Context, t *testing.T) *http.Client {
	t.Helper()
	m, err := e.c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwcName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.Webhooks[0].ClientConfig.CABundle) {
		t.Fatal("no CA bundle injected")
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}}
}

// startOperator runs bin/berth-operator with the chart's --isolation-* arguments (bind
// address, certificate hosts and lifetimes adapted to loopback and a short run) as a user
// holding exactly the chart's operator RBAC.
func (e *env) startOperator(ctx context.Context, t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	args, err := framework.ChartIsolationArgs(objs, "berth-operator", map[string]string{
		"--isolation-webhook-bind-address":  e.hookAddr,
		"--isolation-webhook-cert-hosts":    "127.0.0.1",
		"--isolation-webhook-ca-validity":   caValidity.String(),
		"--isolation-webhook-cert-validity": certValidity.String(),
		"--isolation-webhook-sync-interval": "1s",
	})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := e.c.WriteKubeconfig("berth-operator-e2e", cluster.Identity{User: opUser})
	if err != nil {
		t.Fatal(err)
	}
	mport, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	e.metricsAddr = fmt.Sprintf("127.0.0.1:%d", mport)
	// readyz includes the webhook's check: a valid certificate loaded and the port open.
	e.op, err = framework.StartOperator(ctx, e.c, framework.OperatorOptions{Kubeconfig: kc, MetricsAddr: e.metricsAddr,
		Args: append([]string{"--metrics-secure=false"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	op := e.op
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-operator log tail:\n%s", op.Tail(40))
		}
	})
}

// grantOperatorRBAC binds the chart's operator roles (cluster-wide, release namespace,
// webhook) to the operator's test user instead of its ServiceAccount.
func grantOperatorRBAC(ctx context.Context, t *testing.T, c *cluster.Cluster, objs []*unstructured.Unstructured) {
	t.Helper()
	rb := c.Client.RbacV1()
	bound := 0
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			toTyped(t, o, &r)
			if _, err := rb.ClusterRoles().Create(ctx, &r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case "Role":
			var r rbacv1.Role
			toTyped(t, o, &r)
			if _, err := rb.Roles(r.Namespace).Create(ctx, &r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	user := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: opUser}}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			toTyped(t, o, &b)
			if !operatorSubject(b.Subjects) {
				continue
			}
			b.Subjects = user
			if _, err := rb.ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			bound++
		case "RoleBinding":
			var b rbacv1.RoleBinding
			toTyped(t, o, &b)
			if !operatorSubject(b.Subjects) {
				continue
			}
			b.Subjects = user
			if _, err := rb.RoleBindings(b.Namespace).Create(ctx, &b, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			bound++
		}
	}
	if bound < 4 {
		t.Fatalf("bound %d of the chart's operator bindings, want the cluster-wide, namespace, kube-system and webhook ones", bound)
	}
}

func operatorSubject(subs []rbacv1.Subject) bool {
	for _, s := range subs {
		if s.Kind == rbacv1.ServiceAccountKind && s.Name == "berth-operator" && s.Namespace == relNS {
			return true
		}
	}
	return false
}

// installCRDs creates the chart's CRDs (the operator watches SecondarySchedulers).
func installCRDs(ctx context.Context, t *testing.T, c *cluster.Cluster, r *chart.Rendered) {
	t.Helper()
	var list []*apiextensionsv1.CustomResourceDefinition
	for _, f := range r.CRDs {
		objs, err := chart.Objects(string(f.File.Data))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			toTyped(t, o, crd)
			list = append(list, crd)
		}
	}
	if err := cluster.InstallCRDs(ctx, c.RESTConfig, list...); err != nil {
		t.Fatal(err)
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func yamlUnmarshal(s string, v any) error { return yaml.Unmarshal([]byte(s), v) }

var netDialer = net.Dialer{Timeout: 5 * time.Second}
