//go:build berthbenchfloor

package schedconfig

// BenchFloorPlugins are the do-nothing Score plugins only bench builds register
// (pkg/scheduler/registry/benchfloor.go); the configuration check knows them in those builds.
var BenchFloorPlugins = []string{"BenchFloorScore1", "BenchFloorScore2", "BenchFloorScore3"}

var benchFloorPlugins = BenchFloorPlugins
