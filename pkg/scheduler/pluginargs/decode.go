// Package pluginargs decodes the args of Berth's scheduler plugins the way they must all be
// decoded: strictly, with keys compared exactly and errors that name the field.
package pluginargs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Decode decodes u (JSON, or YAML as kube-scheduler may pass it for out-of-tree plugins) into
// into. Only apiVersion, kind and fields are accepted as top-level keys; others are refused
// naming the key and the supported ones. A value of the wrong type is refused naming its
// field. Empty input decodes nothing. The top-level keys are returned (also with a decoding
// error) so a caller can tell an explicit value from an absent one or name a field whose own
// decoder reports errors without it.
func Decode(u *runtime.Unknown, into any, fields []string) (map[string]json.RawMessage, error) {
	raw := u.Raw
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	switch u.ContentType {
	case runtime.ContentTypeJSON, "":
	case runtime.ContentTypeYAML:
		j, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, err
		}
		raw = j
	default:
		return nil, fmt.Errorf("unsupported content type %q", u.ContentType)
	}
	// why: encoding/json matches keys case-insensitively, so "Records" or "ClassLabels" would
	// look configured while the user's typo elsewhere is silently dropped; compare keys
	// exactly first.
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return nil, err
	}
	known := map[string]bool{"apiVersion": true, "kind": true}
	for _, f := range fields {
		known[f] = true
	}
	var errs field.ErrorList
	for k := range keys {
		if !known[k] {
			errs = append(errs, field.NotSupported(field.NewPath(k), k, fields))
		}
	}
	if len(errs) > 0 {
		return keys, errs.ToAggregate()
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return keys, field.Invalid(field.NewPath(te.Field), te.Value, "must be a "+te.Type.String())
		}
		return keys, err
	}
	return keys, nil
}

// Object is a plugin's args type: a pointer to a struct that can travel as a runtime.Object.
type Object[A any] interface {
	*A
	runtime.Object
}

// Parse turns what kube-scheduler (or the operator, or a test) hands a plugin into defaulted,
// validated args, the same way for every Berth plugin: obj may be nil (all defaults), a
// *runtime.Unknown holding JSON or YAML (decoded with decode, usually Decode with the
// plugin's fields), or the args type itself (copied, never aliased). Errors name the plugin
// and the field.
func Parse[A any, P Object[A]](obj runtime.Object, plugin string, decode func(*runtime.Unknown, P) error, setDefaults func(P), validate func(P) field.ErrorList) (P, error) {
	args := P(new(A))
	switch o := obj.(type) {
	case nil:
	case P:
		if o != nil {
			args = o.DeepCopyObject().(P)
		}
	case *runtime.Unknown:
		if err := decode(o, args); err != nil {
			return nil, fmt.Errorf("decoding %s args: %w", plugin, err)
		}
	default:
		return nil, fmt.Errorf("%s args: want *runtime.Unknown or %T, got %T", plugin, args, obj)
	}
	setDefaults(args)
	if errs := validate(args); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return args, nil
}
