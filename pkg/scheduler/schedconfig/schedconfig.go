// Package schedconfig renders berth-scheduler's KubeSchedulerConfiguration from a
// SecondaryScheduler and validates a configuration exactly as berth-scheduler will load it:
// the upstream loader (strict decoding, defaulting, conversion), upstream validation, the
// plugin names the binary knows, and each Berth plugin's args through pkg/scheduler/apis/config
// (the decoding, defaulting and validation the plugin's factory runs). The operator, the
// chart tests and the scheduler share it, so nothing reaches a running scheduler that the
// scheduler would reject at start.
package schedconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"

	berthconfig "github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// APIVersion of the configurations this package renders.
const APIVersion = "kubescheduler.config.k8s.io/v1"

// ArgsError is a Berth plugin's args rejected by their decoding or validation.
type ArgsError struct {
	// Path is where the args sit in the configuration, e.g. profiles[0].pluginConfig[1].args.
	Path   string
	Plugin string
	Err    error
}

func (e *ArgsError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }
func (e *ArgsError) Unwrap() error { return e.Err }

// NotConfigError says the input is not a KubeSchedulerConfiguration at all.
type NotConfigError struct{ Err error }

func (e *NotConfigError) Error() string {
	return fmt.Sprintf("not a KubeSchedulerConfiguration (want apiVersion %s, kind KubeSchedulerConfiguration): %v", APIVersion, e.Err)
}
func (e *NotConfigError) Unwrap() error { return e.Err }

// Load decodes data exactly as kube-scheduler's --config loader does (strict: unknown and
// duplicate fields are errors) and returns the defaulted internal configuration.
func Load(data []byte) (*config.KubeSchedulerConfiguration, error) {
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if runtime.IsStrictDecodingError(err) {
		// The right kind with unknown or duplicate fields: name them.
		return nil, err
	}
	if err != nil {
		return nil, &NotConfigError{Err: err}
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, &NotConfigError{Err: fmt.Errorf("got %s", gvk)}
	}
	cfg.TypeMeta.APIVersion = gvk.GroupVersion().String()
	return cfg, nil
}

// Validate loads data and checks it as berth-scheduler will at start: upstream validation,
// every plugin name known to the binary (in-tree plus Berth's registry), and Berth's plugin
// args through pkg/scheduler/apis/config. All problems are returned, each naming its field.
func Validate(data []byte) (*config.KubeSchedulerConfiguration, error) {
	return validate(data, true)
}

// validate is Validate; berthArgs false skips Berth's args, for a configuration rendered from
// typed args that were validated at the SecondaryScheduler's path just before (validated
// once where they enter, not again after the YAML round trip).
func validate(data []byte, berthArgs bool) (*config.KubeSchedulerConfiguration, error) {
	cfg, err := Load(data)
	if err != nil {
		return nil, err
	}
	var errs []error
	if agg := validation.ValidateKubeSchedulerConfiguration(cfg); agg != nil {
		errs = append(errs, agg.Errors()...)
	}
	errs = append(errs, checkPluginNames(cfg)...)
	errs = append(errs, checkWeights(data)...)
	for i, prof := range cfg.Profiles {
		for j, pc := range prof.PluginConfig {
			if !berthArgs {
				break
			}
			// why: Berth's args stay runtime.Unknown through the upstream loader; they are
			// decoded, defaulted and validated here exactly as the plugin's factory will.
			if _, err := berthconfig.DecodeAndValidate(pc.Name, pc.Args); err != nil {
				path := field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j).Child("args")
				errs = append(errs, &ArgsError{Path: path.String(), Plugin: pc.Name, Err: err})
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// KnownPlugins are the plugin names berth-scheduler can run.
func KnownPlugins() map[string]bool {
	known := map[string]bool{}
	for name := range frameworkplugins.NewInTreeRegistry() {
		known[name] = true
	}
	// why the table and not the registry: the registry links every plugin's code, which the
	// operator must not (the registry's test keeps both lists equal).
	for _, p := range berthconfig.Plugins {
		known[p.Name] = true
	}
	for _, name := range benchFloorPlugins {
		known[name] = true
	}
	return known
}

// checkPluginNames reports plugin names the binary does not have; upstream validation leaves
// that to framework construction, i.e. to a crash-looping scheduler.
func checkPluginNames(cfg *config.KubeSchedulerConfiguration) []error {
	known := KnownPlugins()
	var errs []error
	for i, prof := range cfg.Profiles {
		p := field.NewPath("profiles").Index(i)
		if prof.Plugins != nil {
			sets := map[string]config.PluginSet{
				"preEnqueue": prof.Plugins.PreEnqueue, "queueSort": prof.Plugins.QueueSort,
				"preFilter": prof.Plugins.PreFilter, "filter": prof.Plugins.Filter,
				"postFilter": prof.Plugins.PostFilter, "preScore": prof.Plugins.PreScore,
				"score": prof.Plugins.Score, "reserve": prof.Plugins.Reserve,
				"permit": prof.Plugins.Permit, "preBind": prof.Plugins.PreBind,
				"bind": prof.Plugins.Bind, "postBind": prof.Plugins.PostBind,
				"multiPoint": prof.Plugins.MultiPoint,
			}
			points := make([]string, 0, len(sets))
			for k := range sets {
				points = append(points, k)
			}
			sort.Strings(points)
			for _, point := range points {
				for k, pl := range sets[point].Enabled {
					if !known[pl.Name] {
						errs = append(errs, field.NotFound(p.Child("plugins", point, "enabled").Index(k).Child("name"), pl.Name))
					}
				}
			}
		}
		for j, pc := range prof.PluginConfig {
			if !known[pc.Name] {
				errs = append(errs, field.NotFound(p.Child("pluginConfig").Index(j).Child("name"), pc.Name))
			}
		}
	}
	for _, e := range errs {
		if fe := (*field.Error)(nil); errors.As(e, &fe) {
			fe.Detail = "no such plugin in berth-scheduler"
		}
	}
	return errs
}

// Hash is the short content hash of a rendered configuration (status.configHash, pod template
// annotation).
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

// ErrorMessage flattens a (joined) validation error into one line per problem.
func ErrorMessage(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
