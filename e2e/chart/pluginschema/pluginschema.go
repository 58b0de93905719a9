// Package pluginschema derives the chart's scheduler.plugins from the plugin table
// (pkg/scheduler/apis/config) and the generated SecondaryScheduler CRD: values.schema.json's
// per-plugin schema (args exactly as the CRD's, plus additionalProperties: false so a misspelt
// arg fails `helm install`) and templates/_plugins.tpl (the rows the SecondaryScheduler
// template loops over). hack/generate.sh writes both; e2e/chart's test fails when they drift.
package pluginschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// Files are the chart files generated here, relative to the chart.
const (
	SchemaFile   = "values.schema.json"
	TemplateFile = "templates/_plugins.tpl"
)

// schedulerPlugins is where scheduler.plugins sits in values.schema.json.
var schedulerPlugins = []string{"properties", "scheduler", "properties", "plugins"}

// chartKeys are a plugin's values keys that are the chart's, not the SecondaryScheduler's.
var chartKeys = map[string]bool{"enabled": true, "aggregateTo": true}

// Generate returns values.schema.json with scheduler.plugins regenerated (the rest of the
// file byte for byte as it was) and the _plugins.tpl template, from the CRD's YAML.
func Generate(schema, crdYAML []byte) (newSchema, tpl []byte, err error) {
	crdPlugins, err := crdPluginProps(crdYAML)
	if err != nil {
		return nil, nil, err
	}
	doc, err := decode(schema)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", SchemaFile, err)
	}
	old := lookup(doc.(*object), schedulerPlugins...)
	if old == nil {
		return nil, nil, fmt.Errorf("%s: no %s", SchemaFile, strings.Join(schedulerPlugins, "."))
	}
	start, end, err := span(schema, schedulerPlugins...)
	if err != nil {
		return nil, nil, err
	}
	plugins, rows, err := pluginsSchema(old, crdPlugins)
	if err != nil {
		return nil, nil, err
	}
	body, err := json.MarshalIndent(plugins, strings.Repeat(" ", 8), "  ")
	if err != nil {
		return nil, nil, err
	}
	out := append(append(append([]byte{}, schema[:start]...), body...), schema[end:]...)
	if out, err = withSharedArgs(out, crdPlugins, rows); err != nil {
		return nil, nil, err
	}
	return out, template(rows), nil
}

// loadAwarePath is where scheduler.loadAware sits in values.schema.json.
var loadAwarePath = []string{"properties", "scheduler", "properties", "loadAware"}

// withSharedArgs gives scheduler.loadAware the CRD's schema of every arg all load-aware
// plugins share (LoadAwareArgs) that the chart does not describe itself: a shared arg added to
// the types reaches the chart's shared block without a hand edit, while the chart's own
// entries (watcherAddress's "" for the chart's default, mode) stay as written.
func withSharedArgs(schema []byte, crd *object, rows []row) ([]byte, error) {
	doc, err := decode(schema)
	if err != nil {
		return nil, err
	}
	la := lookup(doc.(*object), loadAwarePath...)
	if la == nil || la.obj("properties") == nil {
		return nil, fmt.Errorf("%s: no %s.properties", SchemaFile, strings.Join(loadAwarePath, "."))
	}
	props := la.obj("properties")
	shared := sharedArgs(rows)
	first := ""
	for _, r := range rows {
		if r.LoadAware {
			first = r.Field
			break
		}
	}
	added := false
	for _, k := range shared {
		if _, ok := props.get(k); ok {
			continue
		}
		props.set(k, convert(lookup(crd, first, "properties", "args", "properties", k)))
		added = true
	}
	if !added {
		return schema, nil
	}
	start, end, err := span(schema, loadAwarePath...)
	if err != nil {
		return nil, err
	}
	body, err := json.MarshalIndent(la, strings.Repeat(" ", 8), "  ")
	if err != nil {
		return nil, err
	}
	return append(append(append([]byte{}, schema[:start]...), body...), schema[end:]...), nil
}

// sharedArgs are the args every load-aware row has, in the first one's order.
func sharedArgs(rows []row) []string {
	count := map[string]int{}
	n := 0
	var order []string
	for _, r := range rows {
		if !r.LoadAware {
			continue
		}
		n++
		for _, a := range r.Args {
			if count[a] == 0 && n == 1 {
				order = append(order, a)
			}
			count[a]++
		}
	}
	var out []string
	for _, a := range order {
		if count[a] == n {
			out = append(out, a)
		}
	}
	return out
}

func lookup(o *object, path ...string) *object {
	for _, k := range path {
		if o = o.obj(k); o == nil {
			return nil
		}
	}
	return o
}

// crdPluginProps is the CRD's spec.plugins.properties.
func crdPluginProps(crdYAML []byte) (*object, error) {
	j, err := yaml.YAMLToJSON(crdYAML)
	if err != nil {
		return nil, err
	}
	doc, err := decode(j)
	if err != nil {
		return nil, err
	}
	versions, _ := doc.(*object).obj("spec").get("versions")
	vs, _ := versions.([]any)
	if len(vs) != 1 {
		return nil, fmt.Errorf("CRD: want one version, got %d", len(vs))
	}
	p := lookup(vs[0].(*object), "schema", "openAPIV3Schema", "properties", "spec", "properties", "plugins", "properties")
	if p == nil {
		return nil, fmt.Errorf("CRD: no spec.plugins")
	}
	return p, nil
}

// row is what the template needs of one plugin.
type row struct {
	Field     string
	LoadAware bool
	Inline    bool
	Args      []string
}

// pluginsSchema rebuilds scheduler.plugins: its own keys as they were, then one entry per row
// of the plugin table.
func pluginsSchema(old, crd *object) (*object, []row, error) {
	out := newObject()
	for _, k := range old.keys {
		if k != "properties" {
			out.set(k, old.vals[k])
		}
	}
	oldProps := old.obj("properties")
	props := newObject()
	isRow := map[string]bool{}
	for _, p := range config.Plugins {
		isRow[p.Field] = true
	}
	// why: scheduler.plugins mirrors spec.plugins; a key of neither the table nor the CRD is a
	// plugin that left the table, and keeping its entry would accept values nothing renders.
	for _, k := range oldProps.keys {
		if !isRow[k] && crd.obj(k) != nil {
			props.set(k, oldProps.vals[k])
		}
	}
	var rows []row
	for _, p := range config.Plugins {
		c := crd.obj(p.Field)
		if c == nil {
			return nil, nil, fmt.Errorf("CRD: no spec.plugins.%s for plugin %s", p.Field, p.Name)
		}
		e, r := entry(p, oldProps.obj(p.Field), c)
		props.set(p.Field, e)
		rows = append(rows, r)
	}
	out.set("properties", props)
	return out, rows, nil
}

// entry is one plugin's values schema: the chart's keys (enabled, aggregateTo) as they were,
// the CRD's fields converted, and for each arg a stub at the old place (args used to sit
// beside enabled) that the template refuses, naming where it moved.
func entry(p config.Plugin, old, crd *object) (*object, row) {
	if old == nil {
		old = newObject()
		old.set("type", "object")
		old.set("properties", newObject())
		old.set("required", []any{"enabled"})
	}
	e := newObject()
	for _, k := range old.keys {
		if k != "properties" && k != "additionalProperties" {
			e.set(k, old.vals[k])
		}
	}
	oldProps := old.obj("properties")
	props := newObject()
	if v, ok := oldProps.get("enabled"); ok {
		props.set("enabled", v)
	} else {
		props.set("enabled", obj("type", "boolean"))
	}
	crdProps := crd.obj("properties")
	r := row{Field: p.Field, Inline: p.InlineArgs}
	for _, k := range crdProps.keys {
		switch {
		case k == "enabled" || typeMeta[k]:
		case k == "args":
			props.set(k, valuesArgs(crdProps.obj(k)))
		case oldProps.vals[k] != nil && !p.InlineArgs:
			// why: a field beside args (weight, isolatedProfileName) keeps the chart's own rule
			// once written, e.g. "" for unset where the CRD wants a name or nothing.
			props.set(k, oldProps.vals[k])
		default:
			props.set(k, convert(crdProps.vals[k]))
		}
	}
	for _, k := range oldProps.keys {
		if chartKeys[k] {
			props.set(k, oldProps.vals[k])
		}
	}
	if args := lookup(crdProps, "args", "properties"); args != nil && !p.InlineArgs {
		for _, k := range args.keys {
			if typeMeta[k] {
				continue
			}
			r.Args = append(r.Args, k)
			r.LoadAware = r.LoadAware || k == "watcherAddress"
			props.set(k, obj("description", fmt.Sprintf("moved to scheduler.plugins.%s.args.%s (the template refuses it here)", p.Field, k)))
		}
	}
	e.set("properties", props)
	e.set("additionalProperties", false)
	return e, r
}

// typeMeta are the args' apiVersion and kind: a SecondaryScheduler's args never need them.
var typeMeta = map[string]bool{"apiVersion": true, "kind": true}

// valuesArgs is the CRD's args schema as values take it: without apiVersion and kind, and
// without required fields at the top (the template fills the load-aware ones from
// scheduler.loadAware; the API server and the operator name a missing one).
func valuesArgs(crd *object) *object {
	a := convert(crd).(*object)
	a.del("required")
	if props := a.obj("properties"); props != nil {
		for k := range typeMeta {
			props.del(k)
		}
	}
	return a
}

func obj(kv ...any) *object {
	o := newObject()
	for i := 0; i+1 < len(kv); i += 2 {
		o.set(kv[i].(string), kv[i+1])
	}
	return o
}

// convert turns a CRD's structural schema into JSON Schema (draft 7) as Helm checks values:
// objects with properties refuse other keys (the API server would prune them silently),
// nullable becomes a "null" type, a set-typed list has unique items, the Kubernetes
// extensions go (CEL rules are the API server's and the operator's to check).
func convert(v any) any {
	switch t := v.(type) {
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = convert(x)
		}
		return out
	case *object:
		out := newObject()
		for _, k := range t.keys {
			switch {
			case k == "x-kubernetes-list-type":
				if t.vals[k] == "set" {
					out.set("uniqueItems", true)
				}
			case strings.HasPrefix(k, "x-kubernetes-"), k == "format", k == "nullable":
			case k == "properties" || k == "additionalProperties" && isSchema(t.vals[k]):
				out.set(k, convertMap(t.vals[k], k == "properties"))
			default:
				out.set(k, convert(t.vals[k]))
			}
		}
		if n, _ := t.vals["nullable"].(bool); n {
			if ty, ok := out.vals["type"].(string); ok {
				out.set("type", []any{ty, "null"})
			}
		}
		if _, ok := out.vals["properties"]; ok {
			if _, set := out.vals["additionalProperties"]; !set {
				out.set("additionalProperties", false)
			}
		}
		return out
	default:
		return v
	}
}

func isSchema(v any) bool { _, ok := v.(*object); return ok }

// convertMap converts a properties map (each value a schema) or one schema.
func convertMap(v any, props bool) any {
	o := v.(*object)
	if !props {
		return convert(o)
	}
	out := newObject()
	for _, k := range o.keys {
		out.set(k, convert(o.vals[k]))
	}
	return out
}

// template is _plugins.tpl: the plugin table as the chart's templates read it.
func template(rows []row) []byte {
	var b bytes.Buffer
	b.WriteString("{{- /* Generated by hack/generate.sh (e2e/cmd/chartschema) from the plugin table\n")
	b.WriteString("(pkg/scheduler/apis/config/plugins.go) and the SecondaryScheduler CRD: do not edit. One row\n")
	b.WriteString("per plugin: its field under scheduler.plugins and spec.plugins, whether it takes the\n")
	b.WriteString("load-aware args (scheduler.loadAware), whether its args sit inline, and its args' names. */ -}}\n")
	b.WriteString("{{- define \"berth.pluginTable\" -}}\n")
	for _, r := range rows {
		args := append([]string(nil), r.Args...)
		sort.Strings(args)
		fmt.Fprintf(&b, "- field: %s\n  loadAware: %v\n  inline: %v\n  args: [%s]\n", r.Field, r.LoadAware, r.Inline, strings.Join(args, ", "))
	}
	b.WriteString("{{- end }}\n")
	return b.Bytes()
}
