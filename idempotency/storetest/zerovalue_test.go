package storetest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/idempotency/storetest"
)

// zeroConfigEnv names the case a child process runs in TestZeroConfigsFailTheTest.
const zeroConfigEnv = "STORETEST_ZERO_CONFIG_CASE"

// zeroConfigCases are suites given a zero configuration value. Each must fail the test with a message
// naming what is missing rather than panic, skip or pass without checking the backend.
var zeroConfigCases = map[string]struct {
	run  func(t *testing.T)
	want string
}{
	"ExactConfig": {
		run:  func(t *testing.T) { storetest.RunExact(t, nil, storetest.ExactConfig{}) },
		want: "ExactConfig.Resolution is 0s",
	},
	"OutageBackend": {
		run: func(t *testing.T) {
			storetest.RunOutage(t, func(*testing.T) storetest.OutageBackend { return storetest.OutageBackend{} })
		},
		want: "OutageBackend.Store, OutageBackend.Cut and OutageBackend.Restore are required",
	},
	"ReplicaConfig": {
		run:  func(t *testing.T) { storetest.RunReplicas(t, storetest.ReplicaConfig{}) },
		want: "ReplicaConfig.Modes is empty",
	},
	"ReplicaMode": {
		run: func(t *testing.T) {
			storetest.RunReplicas(t, storetest.ReplicaConfig{Modes: []storetest.ReplicaMode{{}}})
		},
		want: "ReplicaMode.Setup is required",
	},
	"ReplicaBackend": {
		run: func(t *testing.T) {
			storetest.RunReplicas(t, storetest.ReplicaConfig{Modes: []storetest.ReplicaMode{{
				Name:  "zero",
				Setup: func(*testing.T) storetest.ReplicaBackend { return storetest.ReplicaBackend{} },
			}}})
		},
		want: "ReplicaBackend.Options and ReplicaBackend.Store are required",
	},
}

// TestZeroConfigsFailTheTest runs each case in a child process (a suite's failure cannot be caught
// in the process that runs it) and checks that the child failed with the case's message.
func TestZeroConfigsFailTheTest(t *testing.T) {
	if name := os.Getenv(zeroConfigEnv); name != "" {
		zeroConfigCases[name].run(t)
		return
	}
	for name, tc := range zeroConfigCases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestZeroConfigsFailTheTest$", "-test.count=1")
			cmd.Env = append(os.Environ(), zeroConfigEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed on a zero %s:\n%s", name, out)
			}
			if strings.Contains(string(out), "panic:") || !strings.Contains(string(out), tc.want) {
				t.Fatalf("want a failure saying %q, got:\n%s", tc.want, out)
			}
		})
	}
}
