// Package helm installs charts/berth with the Helm Go SDK into the local cluster with a real
// node (containerd + kubelet, Berth's images imported from bin/images): the operator, the
// scheduler it creates, the load watcher and the agent run as real pods; a workload is bound by
// berth-scheduler; an upgrade rolls the scheduler; an uninstall leaves nothing of Berth behind.
// It needs root and `make tools images`.
package helm

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/operator"
)

const (
	realNode = "berth-real"
	release  = "berth"
	ns       = "berth-system"
	crName   = "berth-scheduler"
)

// values pins every Berth pod to the real node and uses the imported images only.
func values(tlpWeight int) map[string]any {
	pin := map[string]any{"kubernetes.io/hostname": realNode}
	img := func(repo string) map[string]any {
		return map[string]any{"repository": repo, "tag": "dev", "pullPolicy": "Never"}
	}
	return map[string]any{
		"operator": map[string]any{"nodeSelector": pin, "image": img("localhost/berth/berth-operator"), "logLevel": "debug"},
		"scheduler": map[string]any{"nodeSelector": pin, "image": img("localhost/berth/berth-scheduler"),
			"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "32Mi"}},
			"plugins": map[string]any{"targetLoadPacking": map[string]any{"weight": tlpWeight},
				"instanceIsolation": map[string]any{"enabled": true}},
			"loadAware": map[string]any{"refreshIntervalSeconds": 2}},
		// The chart's default watcher URL, by Service name: the cluster runs CoreDNS.
		"loadWatcher": map[string]any{"nodeSelector": pin, "image": img("localhost/berth/berth-loadwatcher")},
		"agent":       map[string]any{"nodeSelector": pin, "image": img("localhost/berth/berth-agent"), "reportInterval": "2s"},
		// The operator serves the webhook; the API server calls it through the chart's Service.
		"isolation": map[string]any{"enabled": true, "mode": "berth"},
	}
}

func TestHelmInstallUpgradeUninstall(t *testing.T) {
	framework.NeedRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Config{
		RealNode: &cluster.RealNodeConfig{NodeName: realNode, ClusterDNS: true},
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	rn := c.RealNode()
	if err := c.AddNodes(ctx, cluster.NodeSpec{Name: "kwok-1", CPU: "4", Memory: "8Gi"}); err != nil {
		t.Fatal(err)
	}
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := chart.Config(c.Kubeconfig, ns, func(f string, a ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, c)
		}
	})
	t.Logf("cluster with real node up after %s", time.Since(start).Round(time.Second))

	t.Run("helm install: every component Ready on the real node", func(t *testing.T) {
		rel, err := chart.Install(ctx, cfg, release, ns, values(1), 3*time.Minute)
		if err != nil {
			t.Fatalf("helm install: %v", err)
		}
		if rel.Info.Status != "deployed" {
			t.Fatalf("release status %s", rel.Info.Status)
		}
		ss := waitCR(ctx, t, cl, "Available", func(ss *berthv1alpha1.SecondaryScheduler) bool {
			return meta.IsStatusConditionTrue(ss.Status.Conditions, berthv1alpha1.ConditionAvailable) && ss.Status.ConfigHash != ""
		})
		t.Logf("SecondaryScheduler available with config %s after %s", ss.Status.ConfigHash, time.Since(start).Round(time.Second))
		for _, sel := range []string{
			"app.kubernetes.io/name=berth-operator", "app.kubernetes.io/name=berth-loadwatcher",
			"app.kubernetes.io/name=berth-agent", "app.kubernetes.io/name=berth-scheduler,app.kubernetes.io/instance=" + crName,
		} {
			pods, err := framework.WaitPods(ctx, c.Client, ns, sel, 1, 2*time.Minute, ready)
			if err != nil {
				t.Fatalf("%s: %v", sel, err)
			}
			for _, p := range pods {
				if p.Spec.NodeName != realNode {
					t.Errorf("pod %s on %s, want %s", p.Name, p.Spec.NodeName, realNode)
				}
			}
		}
	})

	var watcherAddr string
	t.Run("the agent's reports reach the load watcher (Service name through cluster DNS, projected token, TokenReview)", func(t *testing.T) {
		// The agent pushes to the Service by its name, which CoreDNS resolves; the test reads
		// the watcher at its pod IP. A fresh report therefore proves the agent's whole path.
		pods, err := framework.WaitPods(ctx, c.Client, ns, "app.kubernetes.io/name=berth-loadwatcher", 1, time.Minute, ready)
		if err != nil {
			t.Fatal(err)
		}
		hc := watcherReader(ctx, t, c, ns, rn.DialContext)
		watcherAddr = net.JoinHostPort(pods[0].Status.PodIP, "2020")
		var last string
		err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			resp, err := hc.Get(fmt.Sprintf("http://%s/watcher/%s", watcherAddr, realNode))
			if err != nil {
				last = err.Error()
				return false, nil
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
			// Stale or never-reported nodes appear only in berthNodes, never in NodeMetricsMap.
			return resp.StatusCode == 200 && strings.Contains(string(b), `"NodeMetricsMap":{"`+realNode+`"`), nil
		})
		if err != nil {
			t.Fatalf("no fresh report for %s at the watcher: %s", realNode, last)
		}
		t.Logf("watcher: %s", last)
	})

	t.Run("the operator pod's /metrics: HTTPS, only for a token bound to the chart's metrics-reader", func(t *testing.T) {
		// In the pod the operator authenticates and authorises scrapers with its own
		// ServiceAccount: a 200 here proves the chart grants it TokenReview and
		// SubjectAccessReview (without them the filter answers 500), and the 401 that the
		// endpoint is not open.
		pods, err := framework.WaitPods(ctx, c.Client, ns, "app.kubernetes.io/name=berth-operator", 1, time.Minute, ready)
		if err != nil {
			t.Fatal(err)
		}
		const scraperNS, scraper = "default", "e2e-metrics-scraper"
		if _, err := c.Client.CoreV1().ServiceAccounts(scraperNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: scraper}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = c.Client.CoreV1().ServiceAccounts(scraperNS).Delete(context.Background(), scraper, metav1.DeleteOptions{})
		}()
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: scraper},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: release + "-metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: scraperNS, Name: scraper}}}
		if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
		}()
		tr, err := c.Client.CoreV1().ServiceAccounts(scraperNS).CreateToken(ctx, scraper, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Why InsecureSkipVerify: the operator's serving certificate is self-signed in memory.
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: rn.DialContext,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed, see above
		url := fmt.Sprintf("https://%s/metrics", net.JoinHostPort(pods[0].Status.PodIP, "8080"))
		get := func(token string) (int, string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return 0, "", err
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), err
		}
		if code, body, err := get(""); err != nil || code != http.StatusUnauthorized {
			t.Errorf("anonymous: %d %v %.200s; want 401", code, err, body)
		}
		// The binding reaches the API server's authorizer shortly after it is written and a
		// denial is cached for 30s by the operator: poll past that.
		var last string
		err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 90*time.Second, true, func(context.Context) (bool, error) {
			code, body, err := get(tr.Status.Token)
			last = fmt.Sprintf("%d %v %.300s", code, err, body)
			return err == nil && code == http.StatusOK && strings.Contains(body, "controller_runtime_reconcile_total{"), nil
		})
		if err != nil {
			t.Fatalf("bound ServiceAccount never got the operator's metrics: %s", last)
		}
	})

	t.Run("the isolation webhook: served by the operator pod, called by the API server through the chart's Service", func(t *testing.T) {
		const tenant = "helm-tenant"
		if err := framework.EnsureNamespace(ctx, c.Client, tenant); err != nil {
			t.Fatal(err)
		}
		// Written as a tenant writes it: a class label and nothing else. Dry run: admission
		// runs in full (the webhook, then the chart's policy), nothing is stored.
		pod := framework.Pod(tenant, "classed", map[string]string{framework.ClassLabel: "tenant-a"}, framework.PodSpec("", "10m", "16Mi"))
		var got *corev1.Pod
		var last error
		// The operator injects its CA bundle moments after it starts serving.
		err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			got, last = c.Client.CoreV1().Pods(tenant).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return last == nil, nil
		})
		if err != nil {
			t.Fatalf("classed pod refused: %v", last)
		}
		if got.Spec.SchedulerName != "berth-scheduler" {
			t.Errorf("schedulerName %q, want berth-scheduler (the webhook's mutation)", got.Spec.SchedulerName)
		}
		tolerated := false
		for _, tol := range got.Spec.Tolerations {
			tolerated = tolerated || tol.Key == "ipp"
		}
		if !tolerated {
			t.Errorf("no pool toleration added: %+v", got.Spec.Tolerations)
		}
		mwcs, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		viaService := false
		for _, m := range mwcs.Items {
			for _, w := range m.Webhooks {
				if w.ClientConfig.Service != nil && w.ClientConfig.Service.Namespace == ns && w.ClientConfig.URL == nil {
					viaService = true
					t.Logf("webhook %s calls Service %s/%s:%d", w.Name, ns, w.ClientConfig.Service.Name, ptrOr(w.ClientConfig.Service.Port, 443))
				}
			}
		}
		if !viaService {
			t.Errorf("no webhook of the release is called through a Service")
		}
	})

	var bound []corev1.Pod // the workload's pods, explained next
	t.Run("a workload with schedulerName berth-scheduler is bound by the scheduler pod", func(t *testing.T) {
		const app = "helm-app"
		spec := framework.PodSpec("berth-scheduler", "10m", "16Mi")
		spec.Containers[0].Image = cluster.PauseImage
		spec.Containers[0].ImagePullPolicy = corev1.PullNever
		if err := framework.EnsureNamespace(ctx, c.Client, app); err != nil {
			t.Fatal(err)
		}
		d := framework.Deployment(app, app, 2, spec)
		if _, err := c.Client.AppsV1().Deployments(app).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods, err := framework.WaitPods(ctx, c.Client, app, labelSelector(d), 2, 2*time.Minute, framework.Running)
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods {
			ev, err := framework.WaitSchedulingEvent(ctx, c.Client, &pods[i], "Scheduled", 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Scheduler != "berth-scheduler" {
				t.Errorf("pod %s bound by %q, want berth-scheduler", pods[i].Name, ev.Scheduler)
			}
		}
		bound = pods
	})

	t.Run("the installed agent reports a pod's own usage, read from the node's cgroups (agent.hostCgroup)", func(t *testing.T) {
		if watcherAddr == "" {
			t.Fatal("the earlier step found no watcher (see its failure)")
		}
		const probeNS = "usage-probe"
		if err := framework.EnsureNamespace(ctx, c.Client, probeNS); err != nil {
			t.Fatal(err)
		}
		// On the real node (a pod on kwok-1 would run nowhere), by the default scheduler.
		spec := framework.PodSpec("", "10m", "16Mi")
		spec.NodeSelector = map[string]string{"kubernetes.io/hostname": realNode}
		spec.Containers[0].Image = cluster.PauseImage
		spec.Containers[0].ImagePullPolicy = corev1.PullNever
		if _, err := c.Client.CoreV1().Pods(probeNS).Create(ctx, framework.Pod(probeNS, "probe", map[string]string{"app": "probe"}, spec), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods, err := framework.WaitPods(ctx, c.Client, probeNS, "app=probe", 1, 2*time.Minute, framework.Running)
		if err != nil {
			t.Fatal(err)
		}
		uid := string(pods[0].UID)
		hc := watcherReader(ctx, t, c, ns, rn.DialContext)
		var last string
		err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			resp, err := hc.Get(fmt.Sprintf("http://%s/watcher/%s?pods=true", watcherAddr, realNode))
			if err != nil {
				last = err.Error()
				return false, nil
			}
			defer resp.Body.Close()
			var doc loadapi.Response
			if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&doc); err != nil {
				last = err.Error()
				return false, nil
			}
			last = fmt.Sprintf("want pod %s; %s lists pods %v, per-pod usage %+v", uid, realNode, doc.Nodes[realNode].PodUIDs, doc.Nodes[realNode].Pods)
			for _, u := range doc.Nodes[realNode].Pods {
				// why: memory, not CPU: a pause container may not run a millisecond per window.
				if u.UID == uid && u.MemoryBytes > 0 && u.Latest.Memory > 0 && len(u.Windows) > 0 {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("the watcher has no per-pod usage for the probe pod: %s", last)
		}
		t.Log(last)
	})

	// Before the upgrade below restarts the scheduler: records live in the leader's memory.
	t.Run("kubectl berth explain with only the chart's explain-reader roles; refused without them", func(t *testing.T) {
		testExplain(ctx, t, c, bound)
	})
	t.Run("kubectl berth nodes with only the chart's berthctl-reader roles: measured load and the leader's placed-pod estimate", func(t *testing.T) {
		testNodes(ctx, t, c, realNode)
	})
	if err := c.Client.CoreV1().Namespaces().Delete(ctx, "helm-app", metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}

	t.Run("helm upgrade with a new weight and a field the previous CRD lacked: the CRD upgraded, the scheduler rolled", func(t *testing.T) {
		before := &berthv1alpha1.SecondaryScheduler{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: crName}, before); err != nil {
			t.Fatal(err)
		}
		oldHash := before.Status.ConfigHash
		// The previous release's CRD, without estimateSeconds: Helm itself never upgrades
		// crds/, the chart's pre-upgrade hook must.
		ext, err := apiextensionsclient.NewForConfig(c.RESTConfig)
		if err != nil {
			t.Fatal(err)
		}
		crds := ext.ApiextensionsV1().CustomResourceDefinitions()
		crd, err := crds.Get(ctx, "secondaryschedulers.berth.dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		framework.DropSchemaProperty(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "estimateSeconds")
		if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		upgraded := values(7)
		upgraded["scheduler"].(map[string]any)["loadAware"].(map[string]any)["estimateSeconds"] = 30
		if _, err := chart.Upgrade(ctx, cfg, release, ns, upgraded, 3*time.Minute); err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		if crd, err := crds.Get(ctx, crd.Name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		} else if !framework.HasSchemaProperty(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "estimateSeconds") {
			t.Error("after helm upgrade the SecondaryScheduler CRD still lacks estimateSeconds")
		}
		ss := waitCR(ctx, t, cl, "a new configHash, rolled out", func(ss *berthv1alpha1.SecondaryScheduler) bool {
			return ss.Status.ConfigHash != "" && ss.Status.ConfigHash != oldHash &&
				meta.IsStatusConditionTrue(ss.Status.Conditions, berthv1alpha1.ConditionAvailable) &&
				meta.IsStatusConditionFalse(ss.Status.Conditions, berthv1alpha1.ConditionProgressing)
		})
		if w := ss.Spec.Plugins.TargetLoadPacking.Weight.Weight; w == nil || *w != 7 {
			t.Errorf("CR weight %v, want 7", w)
		}
		if e := ss.Spec.Plugins.TargetLoadPacking.Args.EstimateSeconds; e == nil || *e != 30 {
			t.Errorf("CR estimateSeconds %v, want 30 (dropped by the old schema?)", e)
		}
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, crName+"-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"weight: 7", "estimateSeconds: 30"} {
			if !strings.Contains(cm.Data[operator.ConfigKey], want) {
				t.Errorf("rendered configuration lacks %q:\n%s", want, cm.Data[operator.ConfigKey])
			}
		}
		pods, err := framework.WaitPods(ctx, c.Client, ns, "app.kubernetes.io/name=berth-scheduler", 1, 2*time.Minute, func(p *corev1.Pod) bool {
			return ready(p) && p.Annotations[operator.AnnotationConfigHash] == ss.Status.ConfigHash && p.DeletionTimestamp == nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("config %s -> %s, scheduler pod %s", oldHash, ss.Status.ConfigHash, pods[0].Name)
	})

	t.Run("a scheduler image that cannot be pulled: Degraded naming it, the running scheduler kept", func(t *testing.T) {
		running, err := framework.WaitPods(ctx, c.Client, ns, "app.kubernetes.io/name=berth-scheduler", 1, time.Minute, ready)
		if err != nil {
			t.Fatal(err)
		}
		bad := values(7)
		bad["scheduler"].(map[string]any)["image"] = map[string]any{"repository": "localhost/berth/berth-scheduler", "tag": "missing", "pullPolicy": "Never"}
		if _, err := chart.Upgrade(ctx, cfg, release, ns, bad, 3*time.Minute); err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		ss := waitCR(ctx, t, cl, "Degraded with ImagePullFailed", func(ss *berthv1alpha1.SecondaryScheduler) bool {
			d := meta.FindStatusCondition(ss.Status.Conditions, berthv1alpha1.ConditionDegraded)
			return d != nil && d.Status == metav1.ConditionTrue && d.Reason == operator.ReasonImagePullFailed
		})
		msg := meta.FindStatusCondition(ss.Status.Conditions, berthv1alpha1.ConditionDegraded).Message
		if !strings.Contains(msg, "localhost/berth/berth-scheduler:missing") || !strings.Contains(msg, "spec.image") {
			t.Errorf("Degraded message should name the image and the field: %q", msg)
		}
		if !meta.IsStatusConditionTrue(ss.Status.Conditions, berthv1alpha1.ConditionAvailable) {
			t.Errorf("scheduler not Available while the new image fails: %+v", ss.Status.Conditions)
		}
		still, err := c.Client.CoreV1().Pods(ns).Get(ctx, running[0].Name, metav1.GetOptions{})
		if err != nil || !ready(still) || still.DeletionTimestamp != nil {
			t.Errorf("the running scheduler pod %s did not keep running: %v", running[0].Name, err)
		}
		if _, err := chart.Upgrade(ctx, cfg, release, ns, values(7), 3*time.Minute); err != nil {
			t.Fatalf("helm upgrade back: %v", err)
		}
		waitCR(ctx, t, cl, "healthy again", func(ss *berthv1alpha1.SecondaryScheduler) bool {
			return meta.IsStatusConditionFalse(ss.Status.Conditions, berthv1alpha1.ConditionDegraded) &&
				meta.IsStatusConditionFalse(ss.Status.Conditions, berthv1alpha1.ConditionProgressing)
		})
	})

	t.Run("helm uninstall leaves nothing of Berth behind", func(t *testing.T) {
		// The leader-election Leases are written by client-go, not by the chart or the
		// operator: they must exist now, or their absence afterwards would prove nothing.
		ss := &berthv1alpha1.SecondaryScheduler{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: crName}, ss); err != nil {
			t.Fatal(err)
		}
		leases := []string{release + "-operator", operator.LeaseName(ss)}
		for _, name := range leases {
			if _, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Fatalf("leader-election Lease %s/%s before uninstall: %v", ns, name, err)
			}
		}
		if err := chart.Uninstall(cfg, release, 3*time.Minute); err != nil {
			t.Fatalf("helm uninstall: %v", err)
		}
		var list berthv1alpha1.SecondarySchedulerList
		if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("SecondarySchedulers left: %d (finalizers %v)", len(list.Items), list.Items[0].Finalizers)
		}
		berth := []string{"app.kubernetes.io/part-of=berth", operator.LabelOwnerNamespace + "=" + ns}
		// Owned objects go through the garbage collector: give it a moment.
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			return len(leftovers(ctx, t, c, berth)) == 0, nil
		})
		if err != nil {
			t.Errorf("left behind: %v", leftovers(ctx, t, c, berth))
		}
		// Checked last, once no pod is left in the namespace (leftovers lists every pod): no
		// holder remains that could re-create a Lease. Everything in the namespace is Berth's,
		// so no Lease at all may be left, whatever its name.
		ls, err := c.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls.Items {
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			t.Errorf("Lease %s/%s left after uninstall (holder %q; Berth's are %v)", ns, l.Name, holder, leases)
		}
	})
	t.Logf("total %s", time.Since(start).Round(time.Second))
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func labelSelector(d *appsv1.Deployment) string {
	var parts []string
	for k, v := range d.Spec.Selector.MatchLabels {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func waitCR(ctx context.Context, t *testing.T, cl client.Client, what string, ok func(*berthv1alpha1.SecondaryScheduler) bool) *berthv1alpha1.SecondaryScheduler {
	t.Helper()
	ss := &berthv1alpha1.SecondaryScheduler{}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: crName}, ss); err != nil {
			return false, nil
		}
		return ok(ss), nil
	})
	if err != nil {
		t.Fatalf("SecondaryScheduler %s/%s never %s: status %+v", ns, crName, what, ss.Status)
	}
	return ss
}

// leftovers lists Berth's objects still in the cluster: labelled ones in the namespace,
// cluster-wide RBAC and kube-system RoleBindings, and any pod in the namespace.
func leftovers(ctx context.Context, t *testing.T, c *cluster.Cluster, selectors []string) []string {
	var out []string
	add := func(kind, ns, name string) { out = append(out, kind+" "+ns+"/"+name) }
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	for _, p := range pods.Items {
		add("Pod", ns, p.Name)
	}
	for _, sel := range selectors {
		lo := metav1.ListOptions{LabelSelector: sel}
		if l, err := c.Client.AppsV1().Deployments(ns).List(ctx, lo); err == nil {
			for _, o := range l.Items {
				add("Deployment", ns, o.Name)
			}
		}
		if l, err := c.Client.AppsV1().DaemonSets(ns).List(ctx, lo); err == nil {
			for _, o := range l.Items {
				add("DaemonSet", ns, o.Name)
			}
		}
		if l, err := c.Client.CoreV1().Services(ns).List(ctx, lo); err == nil {
			for _, o := range l.Items {
				add("Service", ns, o.Name)
			}
		}
		if l, err := c.Client.CoreV1().ServiceAccounts(ns).List(ctx, lo); err == nil {
			for _, o := range l.Items {
				add("ServiceAccount", ns, o.Name)
			}
		}
		if l, err := c.Client.CoreV1().ConfigMaps(ns).List(ctx, lo); err == nil {
			for _, o := range l.Items {
				add("ConfigMap", ns, o.Name)
			}
		}
		if l, err := c.Client.BatchV1().Jobs(ns).List(ctx, lo); err == nil {
			for _, o := range l.Items {
				add("Job", ns, o.Name)
			}
		}
		for _, rns := range []string{ns, "kube-system"} {
			if l, err := c.Client.RbacV1().Roles(rns).List(ctx, lo); err == nil {
				for _, o := range l.Items {
					add("Role", rns, o.Name)
				}
			}
			if l, err := c.Client.RbacV1().RoleBindings(rns).List(ctx, lo); err == nil {
				for _, o := range l.Items {
					add("RoleBinding", rns, o.Name)
				}
			}
		}
		if l, err := c.Client.RbacV1().ClusterRoles().List(ctx, lo); err == nil {
			for _, o := range l.Items {
				add("ClusterRole", "", o.Name)
			}
		}
		if l, err := c.Client.RbacV1().ClusterRoleBindings().List(ctx, lo); err == nil {
			for _, o := range l.Items {
				add("ClusterRoleBinding", "", o.Name)
			}
		}
		if l, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, lo); err == nil {
			for _, o := range l.Items {
				add("PodDisruptionBudget", ns, o.Name)
			}
		}
	}
	// Helm's own release records.
	if l, err := c.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"}); err == nil {
		for _, o := range l.Items {
			add("Secret", ns, o.Name)
		}
	}
	return out
}

// dump logs what a failure needs: pods, events and the components' logs via the kubelet's files.
func dump(t *testing.T, c *cluster.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range []string{ns, "helm-app"} {
		pods, err := c.Client.CoreV1().Pods(n).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			t.Logf("pod %s/%s node=%s phase=%s conditions=%v", n, p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
			for _, cs := range p.Status.ContainerStatuses {
				t.Logf("  container %s ready=%v restarts=%d state=%+v last=%+v", cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
			}
			for _, cn := range p.Spec.Containers {
				b, err := c.Client.CoreV1().Pods(n).GetLogs(p.Name, &corev1.PodLogOptions{Container: cn.Name, TailLines: ptr(int64(30))}).DoRaw(ctx)
				if err == nil {
					t.Logf("  logs %s:\n%s", cn.Name, b)
				}
			}
		}
		evs, err := c.Client.CoreV1().Events(n).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, e := range evs.Items {
				if e.Type != corev1.EventTypeNormal {
					t.Logf("event %s %s/%s %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
				}
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// watcherReader is an HTTP client into the real node that reads the helm-installed watcher as
// the operator's account (the chart grants it get on nodeloads and nodeloads/pods), with a token
// for the watcher's audience as the operator's projected volume holds: the watcher serves no
// anonymous reads with the chart's defaults.
func watcherReader(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string, dial func(context.Context, string, string) (net.Conn, error)) *http.Client {
	t.Helper()
	exp := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "berth-operator", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{loadapi.TokenAudience}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of berth-operator for the watcher: %v", err)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "token")
	if err := os.WriteFile(f, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: loadapi.NewTokenTransport(&http.Transport{DialContext: dial}, f)}
}
