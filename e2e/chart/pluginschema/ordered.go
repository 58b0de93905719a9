package pluginschema

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// object is a JSON object that keeps its keys' order, so a regenerated schema diffs only where
// its content changed.
type object struct {
	keys []string
	vals map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

func (o *object) get(k string) (any, bool) { v, ok := o.vals[k]; return v, ok }

func (o *object) obj(k string) *object {
	v, _ := o.vals[k].(*object)
	return v
}

func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, x := range o.keys {
		if x == k {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			return
		}
	}
}

func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// decode reads one JSON value keeping objects' key order (objects become *object, arrays
// []any, numbers json.Number).
func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return value(dec)
}

func value(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := newObject()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := value(dec)
				if err != nil {
					return nil, err
				}
				o.set(kt.(string), v)
			}
			_, err := dec.Token()
			return o, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := value(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return tok, nil
	}
}

// span finds the bytes of the value at path (object keys) in data: start and end offsets.
func span(data []byte, path ...string) (int, int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	for depth, key := range path {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return 0, 0, fmt.Errorf("%v: not an object (%v)", path[:depth], err)
		}
		for {
			if !dec.More() {
				return 0, 0, fmt.Errorf("%v: no key %q", path[:depth], key)
			}
			kt, err := dec.Token()
			if err != nil {
				return 0, 0, err
			}
			if kt == key {
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, 0, err
			}
		}
	}
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return 0, 0, err
	}
	end := int(dec.InputOffset())
	return end - len(raw), end, nil
}
