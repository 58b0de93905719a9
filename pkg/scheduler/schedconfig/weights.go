package schedconfig

import (
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// weightsView is the part of a KubeSchedulerConfiguration checkWeights reads, as written: the
// loaded configuration has the default plugins merged in, which would shift the indices the
// error names away from the ones in the user's file.
type weightsView struct {
	Profiles []struct {
		Plugins map[string]struct {
			Enabled []struct {
				Name   string `json:"name"`
				Weight *int32 `json:"weight"`
			} `json:"enabled"`
		} `json:"plugins"`
	} `json:"profiles"`
}

// checkWeights refuses negative plugin weights. Upstream validation does not look at them (0
// means "default"), and the framework multiplies scores by them, so a negative weight silently
// inverts a plugin: the node it likes best becomes the worst. data has already been loaded
// strictly, so it decodes.
func checkWeights(data []byte) []error {
	var v weightsView
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil
	}
	var errs []error
	for i, prof := range v.Profiles {
		points := make([]string, 0, len(prof.Plugins))
		for point := range prof.Plugins {
			points = append(points, point)
		}
		sort.Strings(points)
		for _, point := range points {
			for k, pl := range prof.Plugins[point].Enabled {
				if pl.Weight != nil && *pl.Weight < 0 {
					p := field.NewPath("profiles").Index(i).Child("plugins", point, "enabled").Index(k).Child("weight")
					errs = append(errs, field.Invalid(p, *pl.Weight, "must not be negative (plugin "+pl.Name+"; a negative weight inverts its scores)"))
				}
			}
		}
	}
	return errs
}
