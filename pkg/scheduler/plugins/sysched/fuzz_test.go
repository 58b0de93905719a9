package sysched

import (
	"reflect"
	"testing"

	"github.com/berth-sched/berth/pkg/scheduler/apis/config/configtest"
)

// FuzzSySchedArgs: ParseArgs on arbitrary JSON or YAML never panics, and accepted args survive
// an encode/parse round trip unchanged.
func FuzzSySchedArgs(f *testing.F) {
	f.Add([]byte(`{"defaultProfileNamespace":"default","defaultProfileName":"all-syscalls"}`), false)
	f.Add([]byte("syschedCRDNamespace: ns\nsyschedFullCRDName: full\n"), true)
	f.Add([]byte(`{"defaultProfileName":"a","syschedFullCRDName":"b"}`), false)
	f.Fuzz(func(t *testing.T, data []byte, yaml bool) {
		configtest.RoundTrip(t, ParseArgs, data, yaml, nil, func(a, b *Args) bool { return reflect.DeepEqual(a, b) })
	})
}
