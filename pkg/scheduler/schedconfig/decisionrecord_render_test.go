package schedconfig

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/decisionrecord"
)

// TestRenderDecisionRecord: spec.plugins.decisionRecord is on by default in every profile the
// CR renders (main and isolated), carries its args, can be turned off, and bad args are refused
// naming the CR field (once, though both profiles carry them). Every accepted rendering passes
// Validate, the check berth-scheduler itself runs on --config at start.
func TestRenderDecisionRecord(t *testing.T) {
	withDR := func(dr *berthv1alpha1.DecisionRecordPlugin, iso string) *berthv1alpha1.PluginSet {
		ps := tlp("http://lw:2020", 40)
		ps.DecisionRecord = dr
		if iso != "" {
			ps.InstanceIsolation = &berthv1alpha1.InstanceIsolationPlugin{IsolatedProfileName: iso}
		}
		return ps
	}
	cases := []struct {
		name     string
		ps       *berthv1alpha1.PluginSet
		err      string // the CR-field error, when the CR is refused
		on       bool
		profiles int
		records  int32 // expected after the plugin's defaulting
		topNodes int32
		summary  decisionrecord.Summary
	}{
		{name: "left out: on with the plugin's defaults", ps: withDR(nil, ""), on: true, profiles: 1,
			records: 1000, topNodes: 10, summary: decisionrecord.SummaryNone},
		{name: "empty: on with defaults", ps: withDR(&berthv1alpha1.DecisionRecordPlugin{}, ""), on: true, profiles: 1,
			records: 1000, topNodes: 10, summary: decisionrecord.SummaryNone},
		{name: "args", ps: withDR(&berthv1alpha1.DecisionRecordPlugin{Enabled: ptr.To(true), DecisionRecordArgs: configv1.DecisionRecordArgs{Records: ptr.To[int32](50), TopNodes: ptr.To[int32](3), Summary: ptr.To[configv1.Summary]("Event")}}, ""), on: true, profiles: 1, records: 50, topNodes: 3, summary: decisionrecord.SummaryEvent},
		{name: "off", ps: withDR(&berthv1alpha1.DecisionRecordPlugin{Enabled: ptr.To(false), DecisionRecordArgs: configv1.DecisionRecordArgs{Records: ptr.To[int32](0)}}, ""), profiles: 1},
		{name: "isolated profile records too", ps: withDR(&berthv1alpha1.DecisionRecordPlugin{DecisionRecordArgs: configv1.DecisionRecordArgs{TopNodes: ptr.To[int32](1000)}}, "iso"),
			on: true, profiles: 2, records: 1000, topNodes: 1000, summary: decisionrecord.SummaryNone},
		{name: "isolated profile, off", ps: withDR(&berthv1alpha1.DecisionRecordPlugin{Enabled: ptr.To(false)}, "iso"), profiles: 2},
		{name: "recording alone (upstream's plugins, explained)", ps: &berthv1alpha1.PluginSet{DecisionRecord: &berthv1alpha1.DecisionRecordPlugin{}},
			on: true, profiles: 1, records: 1000, topNodes: 10, summary: decisionrecord.SummaryNone},
		{name: "nothing but recording off", ps: &berthv1alpha1.PluginSet{DecisionRecord: &berthv1alpha1.DecisionRecordPlugin{Enabled: ptr.To(false)}},
			err: "spec.plugins: enable at least one plugin"},
		{name: "only placement knobs: the implicit default does not make it a profile", ps: &berthv1alpha1.PluginSet{ProfileOptions: berthv1alpha1.ProfileOptions{DisableDefaultScore: true}},
			err: "spec.plugins: enable at least one plugin"},
		{name: "records 0", ps: withDR(&berthv1alpha1.DecisionRecordPlugin{DecisionRecordArgs: configv1.DecisionRecordArgs{Records: ptr.To[int32](0)}}, "iso"),
			err: "spec.plugins.decisionRecord.records: Invalid value: 0"},
		{name: "records past the bound", ps: withDR(&berthv1alpha1.DecisionRecordPlugin{DecisionRecordArgs: configv1.DecisionRecordArgs{Records: ptr.To[int32](decisionrecord.MaxRecords + 1)}}, ""),
			err: "spec.plugins.decisionRecord.records: Invalid value: 1000001"},
		{name: "topNodes 0", ps: withDR(&berthv1alpha1.DecisionRecordPlugin{DecisionRecordArgs: configv1.DecisionRecordArgs{TopNodes: ptr.To[int32](0)}}, "iso"),
			err: "spec.plugins.decisionRecord.topNodes: Invalid value: 0"},
		{name: "summary Annotation", ps: withDR(&berthv1alpha1.DecisionRecordPlugin{DecisionRecordArgs: configv1.DecisionRecordArgs{Summary: ptr.To[configv1.Summary]("Annotation")}}, ""),
			err: `spec.plugins.decisionRecord.summary: Unsupported value: "Annotation"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Render(cr(tc.ps, nil), nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want containing %q", err, tc.err)
				}
				// why: the isolated profile repeats the args; the user fixes one field.
				if n := strings.Count(err.Error(), "spec.plugins.decisionRecord"); n > 1 {
					t.Fatalf("reported %d times: %v", n, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Validate(r.YAML)
			if err != nil {
				t.Fatalf("berth-scheduler would refuse the rendered configuration: %v\n%s", err, r.YAML)
			}
			if len(cfg.Profiles) != tc.profiles {
				t.Fatalf("%d profiles, want %d", len(cfg.Profiles), tc.profiles)
			}
			for _, prof := range cfg.Profiles {
				if en, _ := multiPointHas(prof.Plugins.MultiPoint, decisionrecord.Name); en != tc.on {
					t.Errorf("profile %s: DecisionRecord enabled %v, want %v\n%s", prof.SchedulerName, en, tc.on, r.YAML)
				}
				var args *decisionrecord.Args
				for _, pc := range prof.PluginConfig {
					if pc.Name != decisionrecord.Name {
						continue
					}
					if args, err = decisionrecord.ParseArgs(pc.Args); err != nil {
						t.Fatalf("profile %s: %v", prof.SchedulerName, err)
					}
				}
				if !tc.on {
					if args != nil {
						t.Errorf("profile %s: DecisionRecord args rendered while off", prof.SchedulerName)
					}
					continue
				}
				if args == nil {
					t.Fatalf("profile %s: no DecisionRecord args", prof.SchedulerName)
				}
				if *args.Records != tc.records || *args.TopNodes != tc.topNodes || *args.Summary != tc.summary {
					t.Errorf("profile %s: args records %d topNodes %d summary %s, want %d %d %s", prof.SchedulerName,
						*args.Records, *args.TopNodes, *args.Summary, tc.records, tc.topNodes, tc.summary)
				}
			}
			// The placement plugins are untouched by recording.
			if en, _ := multiPointHas(cfg.Profiles[0].Plugins.MultiPoint, "TargetLoadPacking"); tc.ps.TargetLoadPacking != nil && !en {
				t.Errorf("TargetLoadPacking lost")
			}
		})
	}
}
