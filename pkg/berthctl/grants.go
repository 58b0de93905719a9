package berthctl

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/berthctl/reach"
)

// GrantsResource is the namespaced Grants view the operator writes (pkg/grants).
var GrantsResource = schema.GroupVersionResource{Group: berthv1alpha1.GroupVersion.Group, Version: berthv1alpha1.GroupVersion.Version, Resource: "grants"}

const grantsUsage = `Usage: kubectl berth grants [-n NAMESPACE] [-o table|json|yaml] [flags]

What cluster administrators granted a namespace (default: your context's): the PodNetworks its
PodConfigs may name (range, gateway, MTU, routes, and whether the operator accepted each) and the
shared instance classes its pods may carry, read from the namespace's Grants object, which the
Berth operator writes. Needs only the built-in view role in the namespace. Says nothing about
other namespaces' grants.

Flags:
`

// GrantsView is what grants prints (and -o json|yaml emits).
type GrantsView struct {
	Namespace string `json:"namespace"`
	// Found is false when the namespace has no Grants object: nothing is granted to it (the
	// operator writes one wherever something is).
	Found           bool                                 `json:"found"`
	Networks        []berthv1alpha1.GrantedNetwork       `json:"networks"`
	InstanceClasses []berthv1alpha1.GrantedInstanceClass `json:"instanceClasses"`
	OwnClasses      string                               `json:"ownClasses"`
	// Complete is the Grants object's Complete condition ("" when not found).
	Complete        metav1.ConditionStatus `json:"complete,omitempty"`
	CompleteMessage string                 `json:"completeMessage,omitempty"`
	// AgeSeconds is how long ago the operator last changed the view (its newest condition
	// transition or the object's creation), when found.
	AgeSeconds *int64 `json:"ageSeconds,omitempty"`
}

// GrantsMain runs `kubectl berth grants ARGS` and returns the exit code.
func GrantsMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("kubectl berth grants", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context to use")
	namespace := fs.StringP("namespace", "n", "", "the namespace whose grants to print (default: the context's namespace)")
	output := fs.StringP("output", "o", "table", "table, json or yaml")
	timeout := fs.Duration("request-timeout", 30*time.Second, "time limit for the whole command")
	fs.Usage = func() { fmt.Fprint(stderr, grantsUsage); fs.PrintDefaults() }
	if code, ok := ParseFlags(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "error: kubectl berth grants takes no arguments, got %q (the namespace is -n NAMESPACE)\n", fs.Args())
		return 2
	}
	switch *output {
	case "table", "json", "yaml":
	default:
		fmt.Fprintf(stderr, "error: --output must be table, json or yaml, not %q\n", *output)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	err := func() error {
		kube, err := reach.Connect(*kubeconfig, *kubeContext)
		if err != nil {
			return err
		}
		ns := *namespace
		if ns == "" {
			ns = kube.Namespace
		}
		dyn, err := dynamic.NewForConfig(kube.Config)
		if err != nil {
			return err
		}
		view, err := CollectGrants(ctx, dyn, ns, time.Now())
		if err != nil {
			return err
		}
		return WriteGrants(stdout, view, *output)
	}()
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

// CollectGrants reads namespace ns's Grants object with the caller's credentials.
func CollectGrants(ctx context.Context, dyn dynamic.Interface, ns string, now time.Time) (*GrantsView, error) {
	view := &GrantsView{Namespace: ns, OwnClasses: berthv1alpha1.OwnClassesStatement,
		Networks: []berthv1alpha1.GrantedNetwork{}, InstanceClasses: []berthv1alpha1.GrantedInstanceClass{}}
	u, err := dyn.Resource(GrantsResource).Namespace(ns).Get(ctx, berthv1alpha1.GrantsName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// why tell the two apart: a missing object means "nothing granted" only where the
		// resource exists; a cluster without the CRD has an operator that writes none.
		if _, lerr := dyn.Resource(GrantsResource).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1}); isNoMatch(lerr) {
			return nil, fmt.Errorf("the API server does not serve berth.dev Grants: install or upgrade Berth's chart (with grants.enabled, the default)")
		}
		return view, nil
	case meta.IsNoMatchError(err):
		return nil, fmt.Errorf("the API server does not serve berth.dev Grants: install or upgrade Berth's chart (with grants.enabled, the default)")
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("you may not get grants in namespace %s: ask for the built-in view role there (kubectl create rolebinding <you>-view --clusterrole=view --user=<you> -n %s); Berth's chart folds Grants into view, edit and admin", ns, ns)
	case apierrors.IsUnauthorized(err):
		return nil, fmt.Errorf("the API server does not accept your credentials (to get grants in %s): log in again or check --kubeconfig/--context", ns)
	case err != nil:
		return nil, fmt.Errorf("cannot get grants in namespace %s: %w", ns, err)
	}
	var g berthv1alpha1.Grants
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &g); err != nil {
		return nil, fmt.Errorf("reading grants in %s: %w", ns, err)
	}
	return grantsView(&g, now), nil
}

func grantsView(g *berthv1alpha1.Grants, now time.Time) *GrantsView {
	v := &GrantsView{Namespace: g.Namespace, Found: true, Networks: g.Status.Networks, InstanceClasses: g.Status.InstanceClasses,
		OwnClasses: g.Status.OwnClasses}
	// why empty lists, not null: scripts reading -o json iterate without a nil check.
	if v.Networks == nil {
		v.Networks = []berthv1alpha1.GrantedNetwork{}
	}
	if v.InstanceClasses == nil {
		v.InstanceClasses = []berthv1alpha1.GrantedInstanceClass{}
	}
	if v.OwnClasses == "" {
		v.OwnClasses = berthv1alpha1.OwnClassesStatement
	}
	changed := g.CreationTimestamp.Time
	if c := meta.FindStatusCondition(g.Status.Conditions, berthv1alpha1.ConditionComplete); c != nil {
		v.Complete, v.CompleteMessage = c.Status, c.Message
		if c.LastTransitionTime.After(changed) {
			changed = c.LastTransitionTime.Time
		}
	}
	if !changed.IsZero() {
		age := int64(now.Sub(changed).Seconds())
		v.AgeSeconds = &age
	}
	return v
}

// WriteGrants prints view as table, json or yaml.
func WriteGrants(w io.Writer, v *GrantsView, output string) error {
	if done, err := writeStructured(w, v, output, "table, json or yaml"); done {
		return err
	}
	if !v.Found {
		_, err := fmt.Fprintf(w, "No PodNetwork or InstanceClass grants namespace %s (it has no Grants object).\nPodConfigs here can name no network.\nClasses: %s.\n",
			v.Namespace, v.OwnClasses)
		return err
	}
	fmt.Fprintf(w, "Namespace %s\n\n", v.Namespace)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(v.Networks) == 0 {
		fmt.Fprintln(tw, "NETWORK\t(none granted)")
	} else {
		fmt.Fprintln(tw, "NETWORK\tSTATE\tCIDR\tGATEWAY\tMTU\tROUTES")
		for _, n := range v.Networks {
			gw, mtu := dash(n.Gateway), "-"
			if n.MTU != nil {
				mtu = fmt.Sprint(*n.MTU)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.State, n.CIDR, gw, mtu, routes(n))
		}
	}
	fmt.Fprintln(tw)
	if len(v.InstanceClasses) == 0 {
		fmt.Fprintln(tw, "INSTANCE CLASS\t(no shared class granted)")
	} else {
		fmt.Fprintln(tw, "INSTANCE CLASS\tSHARED WITH")
		for _, c := range v.InstanceClasses {
			others := fmt.Sprintf("%d other namespaces", c.SharedWith)
			switch c.SharedWith {
			case 0:
				others = "no other namespace"
			case 1:
				others = "1 other namespace"
			}
			fmt.Fprintf(tw, "%s\t%s\n", c.Name, others)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nClasses: %s.\n", v.OwnClasses)
	fmt.Fprintf(w, "Only Accepted networks attach pods; ask the cluster administrator about a Refused or Pending one.\n")
	if v.Complete != "" && v.Complete != metav1.ConditionTrue {
		fmt.Fprintf(w, "INCOMPLETE: %s\n", v.CompleteMessage)
	}
	_, err := fmt.Fprintf(w, "Updated %s ago by the Berth operator.\n", Age(v.AgeSeconds))
	return err
}

func routes(n berthv1alpha1.GrantedNetwork) string {
	if len(n.Routes) == 0 {
		return "-"
	}
	var out []string
	for _, r := range n.Routes {
		via := r.Via
		if via == "" {
			via = n.Gateway
		}
		if via == "" {
			out = append(out, r.Destination+" on-link")
			continue
		}
		out = append(out, r.Destination+" via "+via)
	}
	return strings.Join(out, ", ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
