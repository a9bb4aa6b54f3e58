package reqnote

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestNilNote(t *testing.T) {
	n := From(context.Background())
	if n != nil {
		t.Fatal("a note in an empty context")
	}
	// Every method is a no-op on nil.
	n.SetPrincipal("key_1", "live:lic_1", "live")
	n.SetVersion("v1")
	n.SetIdempotencyKey("k")
	n.SetCode("c")
	n.SetRoute("GET /")
	n.SetReplayed(400, nil, nil)
	if f := n.Fields(); f != (Fields{}) {
		t.Fatalf("nil note has fields %+v", f)
	}
	if allocs := testing.AllocsPerRun(100, func() { From(context.Background()).SetCode("c") }); allocs != 0 {
		t.Fatalf("%v allocations without a note", allocs)
	}
}

func TestSetReplayed(t *testing.T) {
	problem := http.Header{"Content-Type": {"application/problem+json; charset=utf-8"}}
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		body   string
		want   string
	}{
		{"Problem", 422, problem, `{"status":422,"code":"amount_over_limit"}`, "amount_over_limit"},
		{"Success", 201, http.Header{"Content-Type": {"application/json"}}, `{"code":"not_a_problem"}`, ""},
		{"JSONError", 400, http.Header{"Content-Type": {"application/json"}}, `{"code":"x"}`, ""},
		{"NotJSON", 400, problem, `not json`, ""},
		{"TooLarge", 400, problem, `{"code":"big","pad":"` + strings.Repeat("a", maxProblemBody) + `"}`, ""},
		{"OmittedBody", 409, problem, ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := new(Note)
			n.SetReplayed(tc.status, tc.header, []byte(tc.body))
			f := n.Fields()
			if !f.Replayed || f.Code != tc.want {
				t.Fatalf("got %+v, want replayed with code %q", f, tc.want)
			}
		})
	}
}

// The last code and route win; writers on several goroutines are safe (-race).
func TestNoteConcurrent(t *testing.T) {
	n := new(Note)
	ctx := NewContext(context.Background(), n)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			From(ctx).SetCode("a")
			_ = From(ctx).Fields()
		})
	}
	wg.Wait()
	From(ctx).SetCode("b")
	From(ctx).SetRoute("GET /x")
	From(ctx).SetRoute("GET /x/{id}")
	if f := n.Fields(); f.Code != "b" || f.Route != "GET /x/{id}" {
		t.Fatalf("got %+v", f)
	}
}
