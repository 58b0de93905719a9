// Package decisionrecord is the DecisionRecord plugin: enabling it in a profile (multiPoint)
// turns on berth-scheduler's decision records for that profile, with the profile's own
// bounds and summary target (Args). The plugin implements no extension point, so the
// framework never calls it in a scheduling cycle; the recording itself is done by
// this package's Recorder around the profile's framework, which the scheduler command installs
// for every profile whose DecisionRecord factory ran.
package decisionrecord

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	fwkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Name is the plugin name used in KubeSchedulerConfiguration.
const Name = "DecisionRecord"

// Registrar learns which profiles record and with which args (the scheduler's recorder).
type Registrar interface {
	EnableProfile(profile string, args *Args)
}

// DecisionRecord carries no behaviour of its own.
type DecisionRecord struct {
	Args *Args
}

// Name implements fwk.Plugin.
func (pl *DecisionRecord) Name() string { return Name }

// New parses the args only (configuration validation, tests): nothing is recorded.
func New(_ context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	return &DecisionRecord{Args: args}, nil
}

// NewFactory returns the factory the scheduler command registers: like New, and it tells reg
// that the profile records.
func NewFactory(reg Registrar) fwkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := New(ctx, obj, h)
		if err != nil {
			return nil, err
		}
		if reg != nil {
			reg.EnableProfile(h.ProfileName(), p.(*DecisionRecord).Args)
		}
		return p, nil
	}
}
