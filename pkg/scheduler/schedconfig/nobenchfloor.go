//go:build !berthbenchfloor

package schedconfig

// benchFloorPlugins is empty in every release build (see benchfloor.go).
var benchFloorPlugins []string
