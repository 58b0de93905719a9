package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Decode decodes u (JSON, or YAML as kube-scheduler may pass it) into into, strictly: keys
// are compared exactly, unknown and duplicate keys are refused, and every error names its
// field. Empty input decodes nothing.
func Decode(u *runtime.Unknown, into runtime.Object) error {
	raw := u.Raw
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	switch u.ContentType {
	case runtime.ContentTypeJSON, "":
	case runtime.ContentTypeYAML:
		j, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return err
		}
		raw = j
	default:
		return fmt.Errorf("unsupported content type %q", u.ContentType)
	}
	strict, err := sigsjson.UnmarshalStrict(raw, into)
	if err != nil {
		return nameBadValue(raw, into, err)
	}
	var errs field.ErrorList
	for _, e := range strict {
		fe, ok := e.(sigsjson.FieldError)
		if !ok {
			errs = append(errs, field.Invalid(nil, nil, e.Error()))
			continue
		}
		p := field.NewPath(fe.FieldPath())
		if strings.HasPrefix(e.Error(), "duplicate field") {
			errs = append(errs, &field.Error{Type: field.ErrorTypeDuplicate, Field: p.String(), BadValue: field.OmitValueType{}, Detail: e.Error()})
			continue
		}
		detail := e.Error()
		if !strings.Contains(fe.FieldPath(), ".") {
			detail += "; supported fields: " + strings.Join(jsonFields(reflect.TypeOf(into)), ", ")
		}
		errs = append(errs, &field.Error{Type: field.ErrorTypeNotSupported, Field: p.String(), BadValue: field.OmitValueType{}, Detail: detail})
	}
	return errs.ToAggregate()
}

// nameBadValue finds which top-level key a decoding error (a value of the wrong type, a bad
// duration) comes from, by decoding the keys one at a time, so the error names the field.
func nameBadValue(raw []byte, into runtime.Object, err error) error {
	var keys map[string]json.RawMessage
	if json.Unmarshal(raw, &keys) != nil {
		return err
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	var errs field.ErrorList
	for _, k := range names {
		one, _ := json.Marshal(map[string]json.RawMessage{k: keys[k]})
		scratch := reflect.New(reflect.TypeOf(into).Elem()).Interface()
		if kerr := sigsjson.UnmarshalCaseSensitivePreserveInts(one, scratch); kerr != nil {
			var bad any = string(keys[k])
			var s string
			if json.Unmarshal(keys[k], &s) == nil {
				bad = s
			}
			errs = append(errs, field.Invalid(field.NewPath(k), bad, kerr.Error()))
		}
	}
	if len(errs) == 0 {
		return err
	}
	return errs.ToAggregate()
}

// jsonFields lists the top-level JSON field names of struct pointer type t, inlined structs
// included, so a refused key is answered with the ones that exist.
func jsonFields(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "" && f.Anonymous && strings.Contains(opts, "inline") && f.Type.Name() == "TypeMeta":
		case name == "" && f.Anonymous:
			out = append(out, jsonFields(f.Type)...)
		case name != "":
			out = append(out, name)
		}
	}
	return out
}
