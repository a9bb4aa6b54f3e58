package check

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// recorder stands in for the *testing.T of a suite's subtest and keeps what a check reported.
type recorder struct {
	testing.TB
	reports []string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.reports = append(r.reports, fmt.Sprintf(format, args...))
}

var errBase = errors.New("base")

func TestReports(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		run  func(tb testing.TB)
		want string // "" when the check passes
	}{
		{"NoError passes", func(tb testing.TB) { NoError(tb, nil) }, ""},
		{"NoError", func(tb testing.TB) { NoError(tb, errBase, "Claim at +%v", time.Second) }, `Claim at +1s: got error "base", want none`},
		{"Error passes", func(tb testing.TB) { Error(tb, errBase) }, ""},
		{"Error", func(tb testing.TB) { Error(tb, nil, "Get with a cancelled context") }, "Get with a cancelled context: got no error, want one"},
		{"ErrorIs passes wrapped", func(tb testing.TB) { ErrorIs(tb, fmt.Errorf("x: %w", errBase), errBase) }, ""},
		{"ErrorIs nil", func(tb testing.TB) { ErrorIs(tb, nil, errBase) }, `got no error, want "base"`},
		{"ErrorIs other", func(tb testing.TB) { ErrorIs(tb, errors.New("other"), errBase) }, `got error "other", want one that is "base"`},
		{"NotErrorIs passes on nil", func(tb testing.TB) { NotErrorIs(tb, nil, errBase) }, ""},
		{"NotErrorIs", func(tb testing.TB) { NotErrorIs(tb, errBase, errBase) }, `got error "base", want one that is not "base"`},
		{"Equal passes", func(tb testing.TB) { Equal(tb, []uint64{1, 2}, []uint64{1, 2}) }, ""},
		{"Equal strings", func(tb testing.TB) { Equal(tb, "v1", "v2", "licensee %q", "a b") }, `licensee "a b": got "v2", want "v1"`},
		{"Equal numbers", func(tb testing.TB) { Equal(tb, 1, 2) }, "got 2, want 1"},
		{"Equal nil and empty differ", func(tb testing.TB) { Equal(tb, nil, http.Header{}) }, "got map[], want nil"},
		{"Equal nil slice", func(tb testing.TB) { Equal(tb, []byte{}, nil) }, `got []byte(nil), want []byte("")`},
		{"Equal single message value is not a format", func(tb testing.TB) { Equal(tb, 1, 2, "we_%") }, "we_%: got 2, want 1"},
		{"NotEqual passes", func(tb testing.TB) { NotEqual(tb, uint64(1), 2) }, ""},
		{"NotEqual", func(tb testing.TB) { NotEqual(tb, uint64(7), 7, "a take-over gets a new token") }, "a take-over gets a new token: got 7, want anything else"},
		{"True passes", func(tb testing.TB) { True(tb, true) }, ""},
		{"True", func(tb testing.TB) { True(tb, false, "token %d handed out twice", 3) }, "token 3 handed out twice"},
		{"True without message", func(tb testing.TB) { True(tb, false) }, "condition is false"},
		{"Len passes", func(tb testing.TB) { Len(tb, []int(nil), 0) }, ""},
		{"Len", func(tb testing.TB) { Len(tb, []int{4, 5}, 0, "leased deliveries") }, "leased deliveries: got 2 elements, want 0: [4 5]"},
		{"Instant passes across locations", func(tb testing.TB) { Instant(tb, t0, t0.In(time.FixedZone("X", 3600))) }, ""},
		{"Instant", func(tb testing.TB) { Instant(tb, t0, t0.Add(time.Microsecond), "LeaseUntil") }, "LeaseUntil: got 2026-03-01T12:00:00.000001Z, want 2026-03-01T12:00:00Z"},
		{"Instant zero", func(tb testing.TB) { Instant(tb, time.Time{}, t0, "RevokedAt") }, "RevokedAt: got 2026-03-01T12:00:00Z, want the zero time"},
		{"JSONEq passes", func(tb testing.TB) { JSONEq(tb, `{"a":1,"b":[2]}`, `{ "b":[2], "a":1.0 }`) }, ""},
		{"JSONEq", func(tb testing.TB) { JSONEq(tb, `{"i":1}`, `{"i":2}`) }, `got JSON "{\"i\":2}", want "{\"i\":1}"`},
		{"JSONEq not JSON", func(tb testing.TB) { JSONEq(tb, `{}`, `{`) }, `got "{", which is not JSON`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			tc.run(r)
			switch {
			case tc.want == "" && len(r.reports) > 0:
				t.Fatalf("got report %q, want the check to pass", r.reports[0])
			case tc.want != "" && len(r.reports) == 0:
				t.Fatalf("the check passed, want a report containing %q", tc.want)
			case tc.want != "" && !strings.Contains(r.reports[0], tc.want):
				t.Fatalf("got report %q, want one containing %q", r.reports[0], tc.want)
			}
		})
	}
}

func TestLongValuesAreCut(t *testing.T) {
	r := &recorder{TB: t}
	Equal(r, make([]byte, 1<<20), nil)
	if len(r.reports) != 1 {
		t.Fatalf("got %d reports, want 1", len(r.reports))
	}
	if n := len(r.reports[0]); n > 3*maxShown {
		t.Fatalf("got a report of %d bytes for a 1 MiB value, want at most %d", n, 3*maxShown)
	}
}
