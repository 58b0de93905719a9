package plugingen

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestGeneratedFilesAreCurrent: the committed spec.plugins, table rows and registry factories
// are what the markers say (run make generate after changing a marker or adding a plugin).
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	ps, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := Generate(ps)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range Outputs {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(srcs[i]) {
			t.Errorf("%s is not what the +berth:plugin markers generate: run make generate", name)
		}
	}
	if len(ps) < 7 || ps[len(ps)-1].Name != "DecisionRecord" {
		t.Errorf("read %d plugins, last %q: want every plugin, DecisionRecord last", len(ps), ps[len(ps)-1].Name)
	}
}

// TestMarkers: what a marker may say, and the errors that name what is wrong.
func TestMarkers(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []Plugin
		err       string
	}{
		{name: "defaults", src: "// +berth:plugin:name=FooBar,order=5\ntype FooBarArgs struct{}",
			want: []Plugin{{Name: "FooBar", Order: 5, Field: "fooBar", Package: "pkg/scheduler/plugins/foobar"}}},
		{name: "every key", src: "// +berth:plugin:name=Foo,order=5,field=f,package=pkg/x/foo,entry=FooEntry,argsOptional,inline\n// +berth:plugin:doc=Foo does a thing,\n// +berth:plugin:doc=with a comma.\ntype FooArgs struct{}",
			want: []Plugin{{Name: "Foo", Order: 5, Field: "f", Package: "pkg/x/foo", Entry: "FooEntry", ArgsOptional: true, Inline: true, Doc: []string{"Foo does a thing,", "with a comma."}}}},
		{name: "unmarked types are not plugins", src: "// Foo is not one.\ntype FooArgs struct{}"},
		{name: "args type named for another plugin", src: "// +berth:plugin:name=Foo,order=5\ntype BarArgs struct{}", err: "type BarArgs: the marker names plugin Foo, whose args type must be FooArgs"},
		{name: "no order", src: "// +berth:plugin:name=Foo\ntype FooArgs struct{}", err: "plugin Foo: +berth:plugin:order= is required"},
		{name: "unknown key", src: "// +berth:plugin:name=Foo,order=1,weight=3\ntype FooArgs struct{}", err: `unknown key "weight"`},
		{name: "bad order", src: "// +berth:plugin:name=Foo,order=x\ntype FooArgs struct{}", err: "+berth:plugin:order=x: strconv.Atoi"},
		{name: "inline without entry", src: "// +berth:plugin:name=Foo,order=1,inline\ntype FooArgs struct{}", err: "inline args need a hand-written entry= type"},
		{name: "lower-case name", src: "// +berth:plugin:name=foo,order=1\ntype fooArgs struct{}", err: "name= is required and is an exported Go name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package v1\n"+tc.src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readFile(f)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], tc.want[i]) {
					t.Errorf("got %+v, want %+v", got[i], tc.want[i])
				}
			}
		})
	}
}

// TestTwoPluginsOneName: the table cannot hold a name, field or order twice.
func TestTwoPluginsOneName(t *testing.T) {
	for _, tc := range []struct {
		ps   []Plugin
		want string
	}{
		{[]Plugin{{Name: "A", Field: "a", Order: 1}, {Name: "A", Field: "b", Order: 2}}, "plugins A and A have the same name A"},
		{[]Plugin{{Name: "A", Field: "a", Order: 1}, {Name: "B", Field: "a", Order: 2}}, "plugins A and B have the same field a"},
		{[]Plugin{{Name: "A", Field: "a", Order: 1}, {Name: "B", Field: "b", Order: 1}}, "plugins A and B have the same order 1"},
		{nil, "no +berth:plugin: markers"},
	} {
		if err := check(tc.ps); err == nil || err.Error() != tc.want && !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.ps, err, tc.want)
		}
	}
}
