package schedconfig

import (
	"testing"
)

// FuzzRender feeds arbitrary raw configurations (a user's ConfigMap behind spec.configMapRef)
// to Render, which the operator runs before every rollout: never a panic, and whatever it
// accepts must pass Validate again, i.e. what the scheduler will check at start.
func FuzzRender(f *testing.F) {
	f.Add([]byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: berth-scheduler\n"))
	f.Add([]byte(weightConfig("score", -1)))
	f.Add([]byte(`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"KubeSchedulerConfiguration","profiles":[{"schedulerName":"berth-scheduler","pluginConfig":[{"name":"TargetLoadPacking","args":{"watcherAddress":"http://w:2020"}}]}]}`))
	f.Add([]byte("profiles: [{schedulerName: x, plugins: {multiPoint: {enabled: [{name: SySched}]}}}]\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := Render(cr(nil, ref), raw)
		if err != nil {
			return
		}
		if _, err := Validate(r.YAML); err != nil {
			t.Fatalf("Render accepted a configuration Validate refuses: %v\n%s", err, r.YAML)
		}
		if r.Hash != Hash(r.YAML) {
			t.Fatalf("hash %s of a different content", r.Hash)
		}
	})
}
