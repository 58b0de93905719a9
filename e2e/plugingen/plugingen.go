// Package plugingen writes the code every Berth plugin needs in three places from one marker
// on the plugin's args type in api/config/v1:
//
//	// +berth:plugin:name=LowRiskOverCommitment,order=30
//
// It generates the SecondaryScheduler's spec.plugins (a field and, unless the marker names a
// hand-written one with entry=, an entry type per plugin), the plugin table's rows
// (pkg/scheduler/apis/config) and the registry's factories (pkg/scheduler/registry). A new
// plugin then writes its args file, its validation, its package (code, test, README) and,
// optionally, its values.yaml entry; hack/generate.sh does the rest.
//
// Marker keys (one +berth:plugin: line may hold several, comma-separated):
//
//	name=N         the plugin's profile name; the args type must be NArgs (required)
//	order=K        its place in a rendered profile, ascending (required, unique)
//	field=f        its field under spec.plugins (default: N with a lower-case first letter)
//	package=p      its factory's package under the repository (default
//	               pkg/scheduler/plugins/<n in lower case>); the package has Name and New
//	entry=T        a hand-written entry type in api/v1alpha1 (default: generated, weight + args)
//	argsOptional   the generated entry's args may be left out (all of them have defaults)
//	inline         the args sit in the entry itself (with entry=), not in its args block
//	doc=text       a line of the spec.plugins field's description (repeatable)
package plugingen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"unicode"
)

const (
	marker = "+berth:plugin:"
	module = "github.com/berth-sched/berth/"
	// ArgsDir holds the args types, relative to the repository.
	ArgsDir = "api/config/v1"
)

// Outputs are the files Generate writes, relative to the repository.
var Outputs = []string{
	"api/v1alpha1/zz_generated.plugins.go",
	"pkg/scheduler/apis/config/zz_generated.plugins.go",
	"pkg/scheduler/registry/zz_generated.plugins.go",
}

// Plugin is what one marker says.
type Plugin struct {
	Name, Field, Package, Entry string
	Order                       int
	ArgsOptional, Inline        bool
	Doc                         []string
}

// ArgsType is the plugin's args type in api/config/v1.
func (p Plugin) ArgsType() string { return p.Name + "Args" }

// PackageName is the last element of the factory's package path.
func (p Plugin) PackageName() string { return filepath.Base(p.Package) }

// EntryType is the entry's type in api/v1alpha1, generated or hand-written.
func (p Plugin) EntryType() string {
	if p.Entry != "" {
		return p.Entry
	}
	return p.Name + "Plugin"
}

// Read parses the args types under root/ArgsDir and returns the marked plugins in order.
func Read(root string) ([]Plugin, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(root, ArgsDir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []Plugin
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || strings.HasPrefix(filepath.Base(name), "zz_generated") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		ps, err := readFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(name), err)
		}
		out = append(out, ps...)
	}
	return out, check(out)
}

func readFile(f *ast.File) ([]Plugin, error) {
	var out []Plugin
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE || g.Doc == nil {
			continue
		}
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			p, marked, err := parseMarkers(g.Doc.List)
			if err != nil {
				return nil, fmt.Errorf("type %s: %w", ts.Name.Name, err)
			}
			if !marked {
				continue
			}
			if ts.Name.Name != p.ArgsType() {
				return nil, fmt.Errorf("type %s: the marker names plugin %s, whose args type must be %s (the scheme's kind)", ts.Name.Name, p.Name, p.ArgsType())
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// parseMarkers reads every +berth:plugin: line of a doc comment.
func parseMarkers(lines []*ast.Comment) (Plugin, bool, error) {
	var p Plugin
	marked := false
	for _, c := range lines {
		text, ok := strings.CutPrefix(strings.TrimSpace(strings.TrimPrefix(c.Text, "//")), marker)
		if !ok {
			continue
		}
		marked = true
		if doc, ok := strings.CutPrefix(text, "doc="); ok {
			p.Doc = append(p.Doc, doc)
			continue
		}
		for _, kv := range strings.Split(text, ",") {
			if err := p.set(strings.TrimSpace(kv)); err != nil {
				return p, true, err
			}
		}
	}
	if !marked {
		return p, false, nil
	}
	return p, true, p.complete()
}

func (p *Plugin) set(kv string) error {
	k, v, _ := strings.Cut(kv, "=")
	var err error
	switch k {
	case "name":
		p.Name = v
	case "order":
		p.Order, err = strconv.Atoi(v)
	case "field":
		p.Field = v
	case "package":
		p.Package = v
	case "entry":
		p.Entry = v
	case "argsOptional":
		p.ArgsOptional = true
	case "inline":
		p.Inline = true
	default:
		return fmt.Errorf("%s%s: unknown key %q (name, order, field, package, entry, argsOptional, inline, doc)", marker, kv, k)
	}
	if err != nil {
		return fmt.Errorf("%s%s: %w", marker, kv, err)
	}
	return nil
}

func (p *Plugin) complete() error {
	if p.Name == "" || !unicode.IsUpper(rune(p.Name[0])) {
		return fmt.Errorf("%sname= is required and is an exported Go name, got %q", marker, p.Name)
	}
	if p.Order <= 0 {
		return fmt.Errorf("plugin %s: %sorder= is required and positive", p.Name, marker)
	}
	if p.Field == "" {
		p.Field = strings.ToLower(p.Name[:1]) + p.Name[1:]
	}
	if p.Package == "" {
		p.Package = "pkg/scheduler/plugins/" + strings.ToLower(p.Name)
	}
	if p.Inline && p.Entry == "" {
		return fmt.Errorf("plugin %s: inline args need a hand-written entry= type that embeds them", p.Name)
	}
	return nil
}

// check sorts ps by order and refuses two plugins with one name, field or order.
func check(ps []Plugin) error {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Order < ps[j].Order })
	seen := map[string]string{}
	for _, p := range ps {
		for _, k := range []string{"name " + p.Name, "field " + p.Field, "order " + strconv.Itoa(p.Order)} {
			if other, dup := seen[k]; dup {
				return fmt.Errorf("plugins %s and %s have the same %s", other, p.Name, k)
			}
			seen[k] = p.Name
		}
	}
	if len(ps) == 0 {
		return fmt.Errorf("no %s markers under %s", marker, ArgsDir)
	}
	return nil
}

// Generate renders Outputs (in that order) for ps.
func Generate(ps []Plugin) ([][]byte, error) {
	var out [][]byte
	for _, t := range []*template.Template{specTemplate, tableTemplate, registryTemplate} {
		var b bytes.Buffer
		if err := t.Execute(&b, ps); err != nil {
			return nil, err
		}
		src, err := format.Source(b.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", t.Name(), err, b.Bytes())
		}
		out = append(out, src)
	}
	return out, nil
}

// Write regenerates Outputs under root.
func Write(root string) error {
	ps, err := Read(root)
	if err != nil {
		return err
	}
	srcs, err := Generate(ps)
	if err != nil {
		return err
	}
	for i, name := range Outputs {
		if err := os.WriteFile(filepath.Join(root, name), srcs[i], 0o644); err != nil {
			return err
		}
	}
	return nil
}
