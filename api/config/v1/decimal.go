package v1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Decimal is a decimal number kept as written. CRDs carry non-integers as strings ("1.5"),
// upstream configurations write numbers (1.5): it decodes from either and always encodes as a
// string, so a typed object read from the API server is accepted when written back (the CRD
// schema says string) and every Berth reader decodes it again. Float64 parses it; validation
// says when it does not.
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
type Decimal string

// NewDecimal returns a pointer to the Decimal written as s.
func NewDecimal(s string) *Decimal { d := Decimal(s); return &d }

// Float64 is the number d stands for.
func (d Decimal) Float64() (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(string(d)), 64)
	if err != nil {
		return 0, fmt.Errorf("must be a decimal number, e.g. \"1.5\"")
	}
	return f, nil
}

// MarshalJSON writes the string as written: the CRD's schema type, and what the scheduler's own
// decoder takes (a number encoded here would be refused by the API server on the next Update).
func (d Decimal) MarshalJSON() ([]byte, error) {
	return json.Marshal(strings.TrimSpace(string(d)))
}

// UnmarshalJSON takes a JSON string or number.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*d = Decimal(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("must be a decimal number or a string holding one: %w", err)
	}
	*d = Decimal(n.String())
	return nil
}
