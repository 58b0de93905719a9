package loadwatcher

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDecodeReport(t *testing.T) {
	good, _ := json.Marshal(validReport())
	tests := []struct {
		name string
		body string
		ok   bool
	}{
		{"one report", string(good), true},
		{"trailing whitespace", string(good) + "\n \t", true},
		{"trailing object", string(good) + "{}", false},
		{"trailing brace", string(good) + "}", false},
		{"trailing bracket", string(good) + "]", false},
		{"trailing garbage", string(good) + "x", false},
		{"unknown field", `{"node":"n","evil":1}`, false},
		{"not an object", `[1,2]`, false},
		{"empty", ``, false},
		{"truncated", string(good[:len(good)-1]), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeReport(strings.NewReader(tc.body))
			if (err == nil) != tc.ok || (err == nil && r == nil) {
				t.Fatalf("DecodeReport: %v, %v; want ok=%v", r, err, tc.ok)
			}
		})
	}
	// A read error of the body (the size limit) comes back as itself, not as "trailing data".
	rec := httptest.NewRecorder()
	body := http.MaxBytesReader(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(good)+strings.Repeat(" ", 100)+"x")).Body, int64(len(good)+10))
	_, err := DecodeReport(body)
	var tooBig *http.MaxBytesError
	if !errors.As(err, &tooBig) {
		t.Fatalf("over the limit after the report: %v, want *http.MaxBytesError", err)
	}
}
