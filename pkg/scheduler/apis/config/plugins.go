package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	configv1 "github.com/berth-sched/berth/api/config/v1"
)

// Plugin is one row of the table of Berth's plugins: everything the scheme, the parser, the
// renderer and the operator need to know about a plugin without importing its code. The
// registry (pkg/scheduler/registry) maps the same names to factories; its test fails when the
// two disagree.
type Plugin struct {
	// Name is the plugin's name in a profile (upstream scheduler-plugins' where it exists).
	Name string
	// Field is the plugin's field under a SecondaryScheduler's spec.plugins.
	Field string
	// InlineArgs: the args sit in spec.plugins.<Field> itself (beside enabled), not in its
	// args block.
	InlineArgs bool

	newArgs  func() runtime.Object
	defaults func(runtime.Object)
	validate func(*field.Path, runtime.Object) field.ErrorList
	parse    func(runtime.Object) (field.ErrorList, error)
}

// The table itself (Plugins) is generated from the +berth:plugin markers on the args types
// (zz_generated.plugins.go, e2e/plugingen).

// row ties an args type to its defaulting and validation once, so the table's callers handle
// every plugin alike through runtime.Object.
func row[A any, P Object[A]](name, fieldName string, def func(P), validate func(*field.Path, P) field.ErrorList) Plugin {
	return Plugin{
		Name:     name,
		Field:    fieldName,
		newArgs:  func() runtime.Object { return P(new(A)) },
		defaults: func(o runtime.Object) { def(o.(P)) },
		validate: func(root *field.Path, o runtime.Object) field.ErrorList { return validate(root, o.(P)) },
		parse: func(o runtime.Object) (field.ErrorList, error) {
			_, errs, err := parse(o, name, validate)
			return errs, err
		},
	}
}

func inline(p Plugin) Plugin { p.InlineArgs = true; return p }

// Lookup finds a plugin's row by its profile name.
func Lookup(name string) (Plugin, bool) {
	for _, p := range Plugins {
		if p.Name == name {
			return p, true
		}
	}
	return Plugin{}, false
}

// NewArgs is an empty args object of the plugin's type.
func (p Plugin) NewArgs() runtime.Object { return p.newArgs() }

// ValidateCopy defaults a copy of typed args (the caller's stay as written) and validates it
// at root: the operator's check of a SecondaryScheduler's args, at the CR's own path.
func (p Plugin) ValidateCopy(root *field.Path, args runtime.Object) field.ErrorList {
	c := args.DeepCopyObject()
	p.defaults(c)
	return p.validate(root, c)
}

// DecodeAndValidate decodes (if still raw), defaults and validates args as the plugin's
// factory will; errors name fields relative to the args (the caller knows where they sit).
func (p Plugin) DecodeAndValidate(obj runtime.Object) error {
	errs, err := p.parse(obj)
	if err == nil && len(errs) > 0 {
		err = errs.ToAggregate()
	}
	return err
}

// DecodeAndValidate checks the args of a pluginConfig entry known only by its plugin's name;
// ok is false when the plugin is not in the table.
func DecodeAndValidate(plugin string, obj runtime.Object) (ok bool, err error) {
	p, ok := Lookup(plugin)
	if !ok {
		return false, nil
	}
	return true, p.DecodeAndValidate(obj)
}

// addPlugins registers every row's args kind and defaulting in s.
func addPlugins(s *runtime.Scheme) error {
	for _, p := range Plugins {
		obj := p.newArgs()
		s.AddKnownTypes(configv1.SchemeGroupVersion, obj)
		def := p.defaults
		s.AddTypeDefaultingFunc(obj, func(o any) { def(o.(runtime.Object)) })
	}
	for _, p := range Plugins {
		if n := count(p.Name); n != 1 {
			return fmt.Errorf("plugin table: %s appears %d times", p.Name, n)
		}
	}
	return nil
}

func count(name string) int {
	n := 0
	for _, p := range Plugins {
		if p.Name == name {
			n++
		}
	}
	return n
}
