// Package flagvalue parses the values of the binaries' list flags.
package flagvalue

import "strings"

// SplitList splits a comma-separated flag value into its items, trimmed, dropping empty ones.
func SplitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
