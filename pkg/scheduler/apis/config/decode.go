package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// codecs decode args by the kinds registered in Scheme, strictly (unknown and duplicate keys are
// errors), without defaulting: Parse defaults after decoding, whatever the args came as.
var codecs = serializer.NewCodecFactory(Scheme, serializer.EnableStrict)

// Decode decodes u (JSON, or YAML as kube-scheduler may pass it) into into through Scheme:
// apiVersion and kind may be left out (into's kind is assumed), keys are compared exactly,
// unknown and duplicate keys are refused, and every error names its field. Empty input decodes
// nothing.
func Decode(u *runtime.Unknown, into runtime.Object) error {
	if len(bytes.TrimSpace(u.Raw)) == 0 {
		return nil
	}
	switch u.ContentType {
	case runtime.ContentTypeJSON, runtime.ContentTypeYAML, "":
	default:
		return fmt.Errorf("unsupported content type %q", u.ContentType)
	}
	kinds, _, err := Scheme.ObjectKinds(into)
	if err != nil {
		return err
	}
	want := kinds[0]
	obj, got, err := codecs.UniversalDeserializer().Decode(u.Raw, &want, into)
	switch {
	case runtime.IsNotRegisteredError(err):
		var tm metav1.TypeMeta
		_ = yaml.Unmarshal(u.Raw, &tm)
		return field.ErrorList{field.Invalid(field.NewPath("kind"), tm.Kind,
			fmt.Sprintf("must be %s or omitted, with apiVersion %s or omitted (%v)", want.Kind, want.GroupVersion(), err))}.ToAggregate()
	case runtime.IsStrictDecodingError(err):
		strict, _ := runtime.AsStrictDecodingError(err)
		return strictErrors(strict.Errors(), into)
	case err != nil:
		return nameBadValue(u.Raw, into, err)
	case obj != into:
		// The data named another registered kind: args meant for another plugin.
		return field.ErrorList{field.Invalid(field.NewPath("kind"), got.Kind, "must be "+want.Kind+" or omitted")}.ToAggregate()
	}
	return nil
}

// strictErrors names the field of each unknown or duplicate key.
func strictErrors(strict []error, into runtime.Object) error {
	var errs field.ErrorList
	for _, e := range strict {
		fe, ok := e.(sigsjson.FieldError)
		if !ok {
			errs = append(errs, &field.Error{Type: field.ErrorTypeInvalid, Field: "<args>", BadValue: field.OmitValueType{}, Detail: e.Error()})
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
	j, jerr := yaml.YAMLToJSON(raw)
	if jerr != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(j, &keys) != nil {
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
