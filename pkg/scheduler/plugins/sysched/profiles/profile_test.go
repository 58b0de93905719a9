package profiles

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseProfile(t *testing.T) {
	many := make([]interface{}, MaxNamesTotal+10)
	for i := range many {
		many[i] = fmt.Sprint("s", i)
	}
	cases := []struct {
		name      string
		obj       string
		raw       map[string]interface{}
		wantNil   bool
		want      []string
		wantBase  string
		wantAllow bool
		wantErrs  int
	}{
		{name: "allow and log, other actions ignored", obj: `{"metadata":{"name":"p","namespace":"ns"},"spec":{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
			{"action":"SCMP_ACT_ALLOW","names":["read","write"]},{"action":"SCMP_ACT_LOG","names":["open","read"]},
			{"action":"SCMP_ACT_ERRNO","names":["ptrace"]}]}}`, want: []string{"read", "write", "open"}},
		{name: "no name", obj: `{"metadata":{},"spec":{}}`, wantNil: true, wantErrs: 1},
		{name: "wrong types", obj: `{"metadata":{"name":"p"},"spec":{"baseProfileName":3,"syscalls":[1,{"action":"SCMP_ACT_ALLOW","names":"read"},
			{"action":"SCMP_ACT_ALLOW","names":["", " ", 4, "ok"]}]}}`, want: []string{"ok"}, wantErrs: 6},
		{name: "syscalls not a list", obj: `{"metadata":{"name":"p"},"spec":{"syscalls":{"a":1}}}`, wantErrs: 1},
		{name: "spec not an object", obj: `{"metadata":{"name":"p"},"spec":"x"}`, wantErrs: 1},
		{name: "base and deny-list", obj: `{"metadata":{"name":"p"},"spec":{"baseProfileName":"runc","defaultAction":"SCMP_ACT_ALLOW"}}`,
			wantBase: "runc", wantAllow: true},
		{name: "huge list truncated", raw: map[string]interface{}{"metadata": map[string]interface{}{"name": "p"},
			"spec": map[string]interface{}{"syscalls": []interface{}{map[string]interface{}{"action": "SCMP_ACT_ALLOW", "names": many}}}},
			wantErrs: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.raw
			if obj == nil {
				if err := json.Unmarshal([]byte(tc.obj), &obj); err != nil {
					t.Fatal(err)
				}
			}
			p, errs := ParseProfile(obj)
			if len(errs) != tc.wantErrs {
				t.Errorf("errors %v, want %d", errs, tc.wantErrs)
			}
			if tc.wantNil {
				if p != nil {
					t.Fatalf("want nil profile, got %+v", p)
				}
				return
			}
			if tc.raw != nil {
				if len(p.Syscalls) != MaxNamesTotal {
					t.Fatalf("huge list: %d names kept, want %d", len(p.Syscalls), MaxNamesTotal)
				}
				return
			}
			if !reflect.DeepEqual(p.Syscalls, tc.want) || p.BaseProfileName != tc.wantBase || p.AllowByDefault != tc.wantAllow {
				t.Fatalf("got %+v", p)
			}
		})
	}
}

func TestKeysForPath(t *testing.T) {
	cases := map[string][]Key{
		"localhost/operator/default/httpd-seccomp.json": {{"default", "httpd-seccomp"}, {"", "httpd-seccomp"}},
		"operator/default/httpd-seccomp.json":           {{"default", "httpd-seccomp"}, {"", "httpd-seccomp"}},
		"operator/httpd-seccomp.json":                   {{"", "httpd-seccomp"}, {"operator", "httpd-seccomp"}},
		"/var/lib/kubelet/seccomp/operator/ns/a.json":   {{"ns", "a"}, {"", "a"}},
		"profiles/audit.json":                           {{"profiles", "audit"}, {"", "audit"}},
		"a.json":                                        {{"", "a"}},
		"":                                              nil,
		"operator/.json":                                nil,
	}
	for in, want := range cases {
		if got := KeysForPath(in); !reflect.DeepEqual(got, want) {
			t.Errorf("KeysForPath(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestParseBinding(t *testing.T) {
	var obj map[string]interface{}
	_ = json.Unmarshal([]byte(`{"metadata":{"name":"b","namespace":"ns"},"spec":{"image":"*","profileRef":{"kind":"SeccompProfile","name":"p"}}}`), &obj)
	b, err := ParseBinding(obj)
	if err != nil || b == nil || b.Image != SelectAllImages || b.ProfileName != "p" || b.Namespace != "ns" {
		t.Fatalf("got %+v, %v", b, err)
	}
	_ = json.Unmarshal([]byte(`{"metadata":{"name":"b"},"spec":{"image":"x","profileRef":{"kind":"SelinuxProfile","name":"p"}}}`), &obj)
	if b, err := ParseBinding(obj); b != nil || err != nil {
		t.Fatalf("SELinux binding should be ignored: %+v %v", b, err)
	}
	_ = json.Unmarshal([]byte(`{"metadata":{"name":"b"},"spec":{"profileRef":{"kind":"SeccompProfile","name":"p"}}}`), &obj)
	if _, err := ParseBinding(obj); err == nil {
		t.Fatal("binding without image accepted")
	}
}

// FuzzParseProfile feeds arbitrary JSON objects to the parser; it must never panic and must only
// return names that are non-empty, bounded, unique and within the total limit.
func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"p"},"spec":{"syscalls":[{"action":"SCMP_ACT_ALLOW","names":["read"]}]}}`))
	f.Add([]byte(`{"metadata":{"name":"p"},"spec":{"baseProfileName":"oci://x","syscalls":[{"action":"SCMP_ACT_LOG","names":[1,"",null]}]}}`))
	f.Add([]byte(`{"metadata":{"name":1},"spec":null,"status":{"localhostProfile":7}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var obj map[string]interface{}
		if json.Unmarshal(data, &obj) != nil {
			return
		}
		p, _ := ParseProfile(obj)
		if p == nil {
			return
		}
		if p.Key.Name == "" {
			t.Fatal("profile without name")
		}
		if len(p.Syscalls) > MaxNamesTotal {
			t.Fatalf("%d names", len(p.Syscalls))
		}
		seen := map[string]bool{}
		for _, s := range p.Syscalls {
			if s == "" || len(s) > MaxNameLength || strings.TrimSpace(s) != s || seen[s] {
				t.Fatalf("bad name %q", s)
			}
			seen[s] = true
		}
		_, _ = p.BaseKey()
		_ = KeysForPath(p.LocalhostProfile)
	})
}
