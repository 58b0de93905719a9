package chart

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// TestLoadAwareModes: scheduler.loadAware.mode fills what scheduler.plugins leaves null
// (pack by default, balance on request; neither sets a usage Filter unless usageThresholds
// does), explicit switches win, and an unknown mode is refused at render naming the field.
func TestLoadAwareModes(t *testing.T) {
	tests := []struct {
		name      string
		values    string
		wantTLP   bool
		wantLVRB  bool
		wantNoDef bool
		wantCPU   any // usageThresholds.cpu as decoded (float64), nil: none
		wantErr   string
	}{
		{name: "default: pack", values: `{}`, wantTLP: true, wantNoDef: true},
		{name: "pack", values: `{scheduler: {loadAware: {mode: pack}}}`, wantTLP: true, wantNoDef: true},
		{name: "balance", values: `{scheduler: {loadAware: {mode: balance}}}`, wantTLP: true, wantLVRB: true},
		{name: "balance with thresholds", values: `{scheduler: {loadAware: {mode: balance, usageThresholds: {cpu: 85}}}}`,
			wantTLP: true, wantLVRB: true, wantCPU: 85.0},
		{name: "pack with own thresholds", values: `{scheduler: {loadAware: {mode: pack, usageThresholds: {cpu: 70}}}}`,
			wantTLP: true, wantNoDef: true, wantCPU: 70.0},
		{name: "balance with an explicit switch", values: `{scheduler: {loadAware: {mode: balance}, plugins: {loadVariationRiskBalancing: {enabled: false}, disableDefaultScore: true}}}`,
			wantTLP: true, wantNoDef: true},
		{name: "pack with LVRB turned on", values: `{scheduler: {loadAware: {mode: pack}, plugins: {loadVariationRiskBalancing: {enabled: true}}}}`,
			wantTLP: true, wantLVRB: true, wantNoDef: true},
		{name: "pack without TargetLoadPacking keeps the upstream scores", values: `{scheduler: {plugins: {targetLoadPacking: {enabled: false}, sySched: {enabled: true}}}}`},
		{name: "unknown mode", values: `{scheduler: {loadAware: {mode: spread}}}`, wantErr: "mode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &v); err != nil {
				t.Fatal(err)
			}
			r, err := Render("berth", "berth-system", v)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			objs, err := Objects(r.Manifest)
			if err != nil {
				t.Fatal(err)
			}
			var ss *berthv1alpha1.SecondaryScheduler
			for _, o := range objs {
				if o.GetKind() == "SecondaryScheduler" {
					b, _ := yaml.Marshal(o.Object)
					ss = &berthv1alpha1.SecondaryScheduler{}
					if err := yaml.UnmarshalStrict(b, ss); err != nil {
						t.Fatalf("the chart's SecondaryScheduler does not decode strictly: %v", err)
					}
				}
			}
			if ss == nil {
				t.Fatal("no SecondaryScheduler rendered")
			}
			b, _ := yaml.Marshal(ss.Spec.Plugins)
			var p map[string]any
			_ = yaml.Unmarshal(b, &p)
			_, tlp := p["targetLoadPacking"]
			_, lvrb := p["loadVariationRiskBalancing"]
			noDef, _ := p["disableDefaultScore"].(bool)
			if tlp != tc.wantTLP || lvrb != tc.wantLVRB || noDef != tc.wantNoDef {
				t.Fatalf("TLP %v LVRB %v disableDefaultScore %v, want %v %v %v\n%s", tlp, lvrb, noDef, tc.wantTLP, tc.wantLVRB, tc.wantNoDef, b)
			}
			var cpu any
			if t1, ok := p["targetLoadPacking"].(map[string]any); ok {
				if args, ok := t1["args"].(map[string]any); ok {
					if th, ok := args["usageThresholds"].(map[string]any); ok {
						cpu = th["cpu"]
					}
				}
			}
			if cpu != tc.wantCPU {
				t.Fatalf("usageThresholds.cpu = %v (%T), want %v\n%s", cpu, cpu, tc.wantCPU, b)
			}
		})
	}
}
