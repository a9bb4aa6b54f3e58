package drivertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Registry is what the suite exercises: lookup, listing and editing, and the two raw writes every
// registry offers in some form. pgstore.EndpointStore is one as it is; memstore.Endpoints, whose Put
// and Delete take no context, needs a three-line adapter.
type Registry interface {
	driver.Endpoints
	driver.EndpointLister
	driver.EndpointEditor
	// Put registers ep, or replaces the endpoint with its ID; an invalid ep is an error wrapping
	// driver.ErrInvalidEndpoint and stores nothing.
	Put(ctx context.Context, ep driver.Endpoint) error
	// Delete removes the endpoint, deleted or not; an ID that is not registered is not an error.
	Delete(ctx context.Context, id string) error
}

// EndpointRacers and EndpointsPerRacer size the concurrent registration test: EndpointRacers goroutines register EndpointsPerRacer
// endpoints each, while all of them move one shared endpoint from owner to owner.
const (
	EndpointRacers    = 8
	EndpointsPerRacer = 25
)

// RunEndpoints runs the suite of endpoint registries: a lookup returns what was registered, an
// unknown ID is ErrUnknownEndpoint, an owner's endpoints list in byte order of ID and page without a
// gap or a repeat, an endpoint registered again under another owner moves, a deleted one is gone from
// both, an invalid registration stores nothing, and racing registrations leave every endpoint listed
// under exactly the owner Lookup reports. newRegistry must return an empty registry for each call; each subtest gets its
// own.
func RunEndpoints(t *testing.T, newRegistry func(t *testing.T) Registry) {
	t.Run("LookupReturnsWhatWasPut", func(t *testing.T) { testLookup(t, newRegistry(t)) })
	t.Run("UnknownEndpoint", func(t *testing.T) { testUnknown(t, newRegistry(t)) })
	t.Run("ListByOwnerInOrder", func(t *testing.T) { testList(t, newRegistry(t)) })
	t.Run("ListPages", func(t *testing.T) { testListPages(t, newRegistry(t)) })
	t.Run("PutReplaces", func(t *testing.T) { testReplace(t, newRegistry(t)) })
	t.Run("PutMovesOwner", func(t *testing.T) { testMove(t, newRegistry(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, newRegistry(t)) })
	t.Run("PutRejectsInvalid", func(t *testing.T) { testInvalid(t, newRegistry(t)) })
	t.Run("ConcurrentPuts", func(t *testing.T) { testConcurrent(t, newRegistry(t)) })
	t.Run("CancelledContext", func(t *testing.T) { testEndpointsCancelled(t, newRegistry(t)) })
	t.Run("SettingsRoundTrip", func(t *testing.T) { testSettings(t, newRegistry(t)) })
	t.Run("Create", func(t *testing.T) { testCreate(t, newRegistry(t)) })
	t.Run("CreateUnderLimitRacing", func(t *testing.T) { testCreateRace(t, newRegistry(t)) })
	t.Run("Update", func(t *testing.T) { testUpdate(t, newRegistry(t)) })
	t.Run("UpdateRefuses", func(t *testing.T) { testUpdateRefuses(t, newRegistry(t)) })
	t.Run("UpdatesSerialise", func(t *testing.T) { testUpdateRace(t, newRegistry(t)) })
	t.Run("DeletedEndpoint", func(t *testing.T) { testSoftDelete(t, newRegistry(t)) })
	t.Run("DeleteRacesUpdates", func(t *testing.T) { testDeleteRace(t, newRegistry(t)) })
}

// secret is a signing secret of the suite's own; the real format does not matter to a registry.
func secret(n int) string { return fmt.Sprintf("whsec_endpointtest_%02d", n) }

func endpoint(id, owner string) driver.Endpoint {
	return driver.Endpoint{ID: id, URL: "https://consumer.example/hooks/" + id, Owner: owner,
		Secrets: []string{secret(1)}, APIVersion: "v1"}
}

func put(t *testing.T, r Registry, eps ...driver.Endpoint) {
	t.Helper()
	for _, ep := range eps {
		if err := r.Put(context.Background(), ep); err != nil {
			t.Fatalf("Put(%s): %v", ep.ID, err)
		}
	}
}

func lookup(t *testing.T, r Registry, id string) driver.Endpoint {
	t.Helper()
	ep, err := r.Lookup(context.Background(), id)
	if err != nil {
		t.Fatalf("Lookup(%s): %v", id, err)
	}
	return ep
}

// listAll lists every endpoint of owner in one call and fails when more are said to follow.
func listAll(t *testing.T, r Registry, owner string) []driver.Endpoint {
	t.Helper()
	eps, more, err := r.ListEndpoints(context.Background(), driver.EndpointQuery{Owner: owner, Limit: 1000})
	if err != nil {
		t.Fatalf("ListEndpoints(%s): %v", owner, err)
	}
	if more {
		t.Fatalf("ListEndpoints(%s): more than 1000 endpoints", owner)
	}
	return eps
}

func endpointIDs(eps []driver.Endpoint) []string {
	out := make([]string, len(eps))
	for i, ep := range eps {
		out[i] = ep.ID
	}
	return out
}

// equal compares every field; empty and nil slices and maps are equal, and times are compared as
// instants.
func equal(a, b driver.Endpoint) bool {
	return a.ID == b.ID && a.URL == b.URL && a.Owner == b.Owner && a.APIVersion == b.APIVersion &&
		slices.Equal(a.Secrets, b.Secrets) && a.OldSecretsExpire.Equal(b.OldSecretsExpire) &&
		slices.Equal(a.EnabledEvents, b.EnabledEvents) && a.Description == b.Description &&
		maps.Equal(a.Metadata, b.Metadata) && maps.Equal(a.Headers, b.Headers) && a.Created.Equal(b.Created) &&
		a.DisabledReason == b.DisabledReason && a.DisabledAt.Equal(b.DisabledAt) && a.DeletedAt.Equal(b.DeletedAt) &&
		a.RateLimit == b.RateLimit && a.FailingSince.Equal(b.FailingSince)
}

// show prints an endpoint without its secrets' values.
func show(ep driver.Endpoint) string {
	return fmt.Sprintf("{ID:%s URL:%s Owner:%s APIVersion:%s Secrets:%d OldSecretsExpire:%v EnabledEvents:%q Description:%q "+
		"Metadata:%v Headers:%v Created:%v DisabledReason:%q DisabledAt:%v DeletedAt:%v RateLimit:%d FailingSince:%v}",
		ep.ID, ep.URL, ep.Owner, ep.APIVersion, len(ep.Secrets), ep.OldSecretsExpire, ep.EnabledEvents, ep.Description,
		ep.Metadata, ep.Headers, ep.Created, ep.DisabledReason, ep.DisabledAt, ep.DeletedAt, ep.RateLimit, ep.FailingSince)
}

func testLookup(t *testing.T, r Registry) {
	want := driver.Endpoint{ID: "we_a", URL: "https://consumer.example/hooks?x=1", Owner: "lic_1",
		Secrets: []string{secret(2), secret(1)}, APIVersion: "2026-01-01"}
	put(t, r, want)
	got := lookup(t, r, "we_a")
	if !equal(got, want) {
		t.Fatalf("Lookup = %s, want %s", show(got), show(want))
	}
	if !slices.Equal(got.Secrets, want.Secrets) {
		t.Fatal("Lookup changed the secrets or their order")
	}
	got.Secrets[0] = "mutated by a reader"
	if again := lookup(t, r, "we_a"); !equal(again, want) {
		t.Fatal("a caller's change to a looked-up endpoint reached the registry")
	}
	listed := listAll(t, r, "lic_1")
	if len(listed) != 1 || !equal(listed[0], want) {
		t.Fatalf("ListEndpoints = %v, want the endpoint as it was put", endpointIDs(listed))
	}
}

func testUnknown(t *testing.T, r Registry) {
	put(t, r, endpoint("we_a", "lic_1"))
	for _, id := range []string{"we_nope", "WE_A", "we_a ", ""} {
		if _, err := r.Lookup(context.Background(), id); !errors.Is(err, driver.ErrUnknownEndpoint) {
			t.Errorf("Lookup(%q) error = %v, want ErrUnknownEndpoint", id, err)
		}
	}
	eps, more, err := r.ListEndpoints(context.Background(), driver.EndpointQuery{Owner: "lic_nobody", Limit: 10})
	if err != nil || len(eps) != 0 || more {
		t.Fatalf("ListEndpoints(unknown owner) = %v, %v, %v; want empty, false, nil", endpointIDs(eps), more, err)
	}
}

func testList(t *testing.T, r Registry) {
	// Byte order, whatever the backend's locale: "we_B" < "we_a" < "we_b" < "we_b1" < "we_é".
	want := []string{"we_B", "we_a", "we_b", "we_b1", "we_é"}
	for _, i := range []int{3, 0, 4, 2, 1} {
		put(t, r, endpoint(want[i], "lic_1"))
	}
	put(t, r, endpoint("we_0", "lic_2"), endpoint("we_c", "lic_2"), endpoint("we_x", "lic_10"))
	if got := endpointIDs(listAll(t, r, "lic_1")); !slices.Equal(got, want) {
		t.Fatalf("ListEndpoints(lic_1) = %v, want %v", got, want)
	}
	if got := endpointIDs(listAll(t, r, "lic_2")); !slices.Equal(got, []string{"we_0", "we_c"}) {
		t.Fatalf("ListEndpoints(lic_2) = %v, want [we_0 we_c]", got)
	}
	for _, ep := range listAll(t, r, "lic_1") {
		if ep.Owner != "lic_1" || len(ep.Secrets) != 1 || ep.URL == "" {
			t.Fatalf("listed endpoint %s is not whole", show(ep))
		}
	}
	if got := listAll(t, r, "lic_"); len(got) != 0 {
		t.Fatalf("ListEndpoints(lic_) = %v: an owner is matched exactly, not as a prefix", endpointIDs(got))
	}
}

func testListPages(t *testing.T, r Registry) {
	var all []string
	for i := range 7 {
		id := fmt.Sprintf("we_%02d", i)
		all = append(all, id)
		put(t, r, endpoint(id, "lic_1"))
	}
	put(t, r, endpoint("we_99", "lic_2"))
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 4 {
			t.Fatal("paging does not end")
		}
		eps, more, err := r.ListEndpoints(context.Background(), driver.EndpointQuery{Owner: "lic_1", After: after, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(eps) > 3 {
			t.Fatalf("a page of %d endpoints, limit 3", len(eps))
		}
		got = append(got, endpointIDs(eps)...)
		if !more {
			break
		}
		if len(eps) == 0 {
			t.Fatal("an empty page says more follow")
		}
		after = eps[len(eps)-1].ID
	}
	if !slices.Equal(got, all) {
		t.Fatalf("pages = %v, want %v", got, all)
	}
	// An exact fit says no more; a cursor that is not an ID starts after it; one past the end is empty.
	for _, tc := range []struct {
		after string
		limit int
		want  []string
		more  bool
	}{
		{"", 7, all, false},
		{"", 6, all[:6], true},
		{"we_02a", 2, []string{"we_03", "we_04"}, true},
		{"we_06", 5, nil, false},
		{"we_", 1, []string{"we_00"}, true},
	} {
		eps, more, err := r.ListEndpoints(context.Background(), driver.EndpointQuery{Owner: "lic_1", After: tc.after, Limit: tc.limit})
		if err != nil || !slices.Equal(endpointIDs(eps), tc.want) || more != tc.more {
			t.Errorf("After %q Limit %d = %v, %v, %v; want %v, %v", tc.after, tc.limit, endpointIDs(eps), more, err, tc.want, tc.more)
		}
	}
}

func testReplace(t *testing.T, r Registry) {
	first := endpoint("we_a", "lic_1")
	put(t, r, first)
	// Rotation: both secrets, then the new one only; the URL and version change too.
	rotating := first
	rotating.Secrets = []string{secret(2), secret(1)}
	rotating.URL = "https://consumer.example/v2/hooks"
	rotating.APIVersion = "v2"
	put(t, r, rotating)
	if got := lookup(t, r, "we_a"); !equal(got, rotating) {
		t.Fatalf("after the second Put, Lookup = %s, want %s", show(got), show(rotating))
	}
	rotated := rotating
	rotated.Secrets = []string{secret(2)}
	put(t, r, rotated)
	if got := lookup(t, r, "we_a"); !equal(got, rotated) {
		t.Fatalf("after the third Put, Lookup = %s, want %s", show(got), show(rotated))
	}
	if got := listAll(t, r, "lic_1"); len(got) != 1 || !equal(got[0], rotated) {
		t.Fatalf("ListEndpoints = %v: the endpoint is listed once, as last put", endpointIDs(got))
	}
}

func testMove(t *testing.T, r Registry) {
	put(t, r, endpoint("we_a", "lic_1"), endpoint("we_b", "lic_1"), endpoint("we_c", "lic_2"))
	put(t, r, endpoint("we_a", "lic_2"))
	if got := lookup(t, r, "we_a").Owner; got != "lic_2" {
		t.Fatalf("Lookup(we_a).Owner = %s, want lic_2", got)
	}
	if got := endpointIDs(listAll(t, r, "lic_1")); !slices.Equal(got, []string{"we_b"}) {
		t.Fatalf("ListEndpoints(lic_1) = %v, want [we_b]: the endpoint left its old owner", got)
	}
	if got := endpointIDs(listAll(t, r, "lic_2")); !slices.Equal(got, []string{"we_a", "we_c"}) {
		t.Fatalf("ListEndpoints(lic_2) = %v, want [we_a we_c]", got)
	}
	// The last endpoint of an owner moves away: the owner lists empty.
	put(t, r, endpoint("we_b", "lic_3"))
	if got := listAll(t, r, "lic_1"); len(got) != 0 {
		t.Fatalf("ListEndpoints(lic_1) = %v, want empty", endpointIDs(got))
	}
}

func testDelete(t *testing.T, r Registry) {
	ctx := context.Background()
	put(t, r, endpoint("we_a", "lic_1"), endpoint("we_b", "lic_1"), endpoint("we_c", "lic_2"))
	if err := r.Delete(ctx, "we_a"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup(ctx, "we_a"); !errors.Is(err, driver.ErrUnknownEndpoint) {
		t.Fatalf("Lookup after Delete error = %v, want ErrUnknownEndpoint", err)
	}
	if got := endpointIDs(listAll(t, r, "lic_1")); !slices.Equal(got, []string{"we_b"}) {
		t.Fatalf("ListEndpoints(lic_1) = %v, want [we_b]", got)
	}
	if err := r.Delete(ctx, "we_a"); err != nil {
		t.Fatalf("deleting again: %v; want nil", err)
	}
	if err := r.Delete(ctx, "we_never"); err != nil {
		t.Fatalf("deleting an unknown ID: %v; want nil", err)
	}
	if err := r.Delete(ctx, "we_b"); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, r, "lic_1"); len(got) != 0 {
		t.Fatalf("ListEndpoints(lic_1) = %v, want empty", endpointIDs(got))
	}
	if got := endpointIDs(listAll(t, r, "lic_2")); !slices.Equal(got, []string{"we_c"}) {
		t.Fatalf("ListEndpoints(lic_2) = %v: another owner's endpoint went too", got)
	}
	// A deleted ID can be registered again.
	put(t, r, endpoint("we_a", "lic_2"))
	if got := endpointIDs(listAll(t, r, "lic_2")); !slices.Equal(got, []string{"we_a", "we_c"}) {
		t.Fatalf("ListEndpoints(lic_2) = %v, want [we_a we_c]", got)
	}
}

func testInvalid(t *testing.T, r Registry) {
	good := endpoint("we_a", "lic_1")
	put(t, r, good)
	secretValue := "whsec_must_never_be_echoed"
	for name, edit := range map[string]func(*driver.Endpoint){
		"no ID":           func(e *driver.Endpoint) { e.ID = "" },
		"no owner":        func(e *driver.Endpoint) { e.Owner = "" },
		"no secret":       func(e *driver.Endpoint) { e.Secrets = nil },
		"an empty secret": func(e *driver.Endpoint) { e.Secrets = []string{secretValue, ""} },
		"relative URL":    func(e *driver.Endpoint) { e.URL = "/hooks" },
	} {
		for _, id := range []string{"we_new", "we_a"} {
			ep := endpoint(id, "lic_2")
			ep.Secrets = []string{secretValue}
			edit(&ep)
			err := r.Put(context.Background(), ep)
			if !errors.Is(err, driver.ErrInvalidEndpoint) {
				t.Errorf("%s (%s): Put error = %v, want ErrInvalidEndpoint", name, id, err)
			}
			if err != nil && strings.Contains(err.Error(), secretValue) {
				t.Errorf("%s (%s): the error echoes a secret", name, id)
			}
		}
	}
	if _, err := r.Lookup(context.Background(), "we_new"); !errors.Is(err, driver.ErrUnknownEndpoint) {
		t.Errorf("an invalid registration was stored (Lookup error %v)", err)
	}
	if got := lookup(t, r, "we_a"); !equal(got, good) {
		t.Errorf("an invalid registration replaced a good one: %s", show(got))
	}
	if got := listAll(t, r, "lic_2"); len(got) != 0 {
		t.Errorf("ListEndpoints(lic_2) = %v: an invalid registration was listed", endpointIDs(got))
	}
}

// testConcurrent races registrations: each racer registers endpoints of its own owner and moves one
// shared endpoint to its owner over and over, while readers list. In the end each owner lists exactly
// its endpoints, and the shared one is listed once, under the owner Lookup reports.
func testConcurrent(t *testing.T, r Registry) {
	ctx := context.Background()
	owner := func(g int) string { return fmt.Sprintf("lic_%d", g) }
	var wg sync.WaitGroup
	for g := range EndpointRacers {
		wg.Go(func() {
			for i := range EndpointsPerRacer {
				if err := r.Put(ctx, endpoint(fmt.Sprintf("we_%d_%03d", g, i), owner(g))); err != nil {
					t.Error(err)
					return
				}
				if err := r.Put(ctx, endpoint("we_shared", owner(g))); err != nil {
					t.Error(err)
					return
				}
				eps, _, err := r.ListEndpoints(ctx, driver.EndpointQuery{Owner: owner(g), Limit: EndpointsPerRacer + 1})
				if err != nil {
					t.Error(err)
					return
				}
				for _, ep := range eps {
					if ep.Owner != owner(g) {
						t.Errorf("ListEndpoints(%s) returned %s of %s", owner(g), ep.ID, ep.Owner)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	shared := lookup(t, r, "we_shared")
	seen := 0
	for g := range EndpointRacers {
		got := endpointIDs(listAll(t, r, owner(g)))
		var want []string
		for i := range EndpointsPerRacer {
			want = append(want, fmt.Sprintf("we_%d_%03d", g, i))
		}
		if owner(g) == shared.Owner {
			want = append(want, "we_shared")
		}
		if slices.Contains(got, "we_shared") {
			seen++
		}
		if !slices.Equal(got, want) {
			t.Errorf("ListEndpoints(%s) = %d endpoints %v…, want %d", owner(g), len(got), got[:min(3, len(got))], len(want))
		}
	}
	if seen != 1 {
		t.Errorf("we_shared is listed under %d owners, want 1", seen)
	}
}

func testEndpointsCancelled(t *testing.T, r Registry) {
	put(t, r, endpoint("we_a", "lic_1"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Lookup(ctx, "we_a"); err == nil {
		t.Error("Lookup on a cancelled context succeeded")
	}
	if _, _, err := r.ListEndpoints(ctx, driver.EndpointQuery{Owner: "lic_1", Limit: 10}); err == nil {
		t.Error("ListEndpoints on a cancelled context succeeded")
	}
}
