package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Object is an args type: a pointer to a struct registered in Scheme.
type Object[A any] interface {
	*A
	runtime.Object
}

// Parse turns what kube-scheduler (or a test) hands a plugin into defaulted, validated args,
// the same way for every Berth plugin: obj may be nil (all defaults), a *runtime.Unknown
// holding JSON or YAML (decoded strictly by Decode), or the args type itself (copied, never
// aliased). validate is the args' validation function; errors name the plugin and the field.
func Parse[A any, P Object[A]](obj runtime.Object, plugin string, validate func(*field.Path, P) field.ErrorList) (P, error) {
	args, errs, err := parse(obj, plugin, validate)
	if err == nil && len(errs) > 0 {
		err = fmt.Errorf("%s args: %w", plugin, errs.ToAggregate())
	}
	if err != nil {
		return nil, err
	}
	return args, nil
}

func parse[A any, P Object[A]](obj runtime.Object, plugin string, validate func(*field.Path, P) field.ErrorList) (P, field.ErrorList, error) {
	args := P(new(A))
	switch o := obj.(type) {
	case nil:
	case P:
		if o != nil {
			args = o.DeepCopyObject().(P)
		}
	case *runtime.Unknown:
		if err := Decode(o, args); err != nil {
			return nil, nil, fmt.Errorf("decoding %s args: %w", plugin, err)
		}
	default:
		return nil, nil, fmt.Errorf("%s args: want *runtime.Unknown or %T, got %T", plugin, args, obj)
	}
	Scheme.Default(args)
	return args, validate(nil, args), nil
}
