package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// editTime is the suite's clock: a registry keeps times to the microsecond at least (PostgreSQL's
// timestamptz), and the suite's times have no finer part.
var editTime = time.Date(2026, 11, 28, 12, 0, 0, 123456000, time.UTC)

// editRacers sizes the concurrent editing tests: that many goroutines update, create and delete at once.
const editRacers = 8

// settled is an endpoint with every optional setting in use.
func settled(id, owner string) driver.Endpoint {
	ep := endpoint(id, owner)
	ep.Secrets = []string{secret(2), secret(1)}
	ep.OldSecretsExpire = editTime.Add(24 * time.Hour)
	ep.EnabledEvents = []string{"order.created", "order.settled"}
	ep.Description = "Orders of the EU desk — ünïcode too"
	ep.Metadata = map[string]string{"team": "payments", "cost/centre": "4711"}
	ep.Headers = map[string]string{"X-Tenant": "eu-1", "X-Route": "a b\tc"}
	ep.Created = editTime
	ep.DisabledReason, ep.DisabledAt = "manual", editTime.Add(time.Minute)
	ep.RateLimit = 25
	ep.FailingSince = editTime.Add(30 * time.Second)
	return ep
}

func create(t *testing.T, r Registry, limit int, eps ...driver.Endpoint) {
	t.Helper()
	for _, ep := range eps {
		if err := r.CreateEndpoint(context.Background(), ep, limit); err != nil {
			t.Fatalf("CreateEndpoint(%s): %v", ep.ID, err)
		}
	}
}

func update(t *testing.T, r Registry, id string, change func(*driver.Endpoint)) driver.Endpoint {
	t.Helper()
	ep, err := r.UpdateEndpoint(context.Background(), id, func(ep *driver.Endpoint) error { change(ep); return nil })
	if err != nil {
		t.Fatalf("UpdateEndpoint(%s): %v", id, err)
	}
	return ep
}

// testSettings: every field survives Put, Lookup, ListEndpoints and CreateEndpoint, and a caller's
// change to what it put or read never reaches the registry.
func testSettings(t *testing.T, r Registry) {
	want := settled("we_a", "lic_1")
	put(t, r, want)
	if got := lookup(t, r, "we_a"); !equal(got, want) {
		t.Fatalf("Lookup = %s\nwant     %s", show(got), show(want))
	}
	if got := listAll(t, r, "lic_1"); len(got) != 1 || !equal(got[0], want) {
		t.Fatalf("ListEndpoints = %d endpoints, want the one put, whole", len(got))
	}
	created := settled("we_b", "lic_1")
	create(t, r, 0, created)
	created.Metadata["team"], created.Headers["X-Tenant"], created.EnabledEvents[0] = "x", "x", "x"
	got := lookup(t, r, "we_b")
	if !equal(got, settled("we_b", "lic_1")) {
		t.Fatalf("after CreateEndpoint, Lookup = %s: a change to the caller's maps or slices reached the registry", show(got))
	}
	got.Metadata["team"], got.Headers["X-Route"], got.EnabledEvents[1] = "y", "y", "y"
	if again := lookup(t, r, "we_b"); !equal(again, settled("we_b", "lic_1")) {
		t.Fatal("a change to a looked-up endpoint's maps or slices reached the registry")
	}
	// The settings' bounds are the registry's too.
	bad := settled("we_c", "lic_1")
	bad.Headers = map[string]string{"X-SVC-Signature": "forged"}
	if err := r.CreateEndpoint(context.Background(), bad, 0); !errors.Is(err, driver.ErrInvalidEndpoint) {
		t.Fatalf("CreateEndpoint with a reserved header: %v, want ErrInvalidEndpoint", err)
	}
	bad = settled("we_c", "lic_1")
	bad.EnabledEvents = []string{"*", "order.created"}
	if err := r.Put(context.Background(), bad); !errors.Is(err, driver.ErrInvalidEndpoint) {
		t.Fatalf("Put with a wildcard beside a type: %v, want ErrInvalidEndpoint", err)
	}
	if _, err := r.Lookup(context.Background(), "we_c"); !errors.Is(err, driver.ErrUnknownEndpoint) {
		t.Fatalf("an invalid endpoint was stored (Lookup: %v)", err)
	}
}

// testCreate: CreateEndpoint registers a new ID only, and refuses past the limit, counting only the
// owner's endpoints not deleted.
func testCreate(t *testing.T, r Registry) {
	ctx := context.Background()
	create(t, r, 2, endpoint("we_a", "lic_1"), endpoint("we_b", "lic_1"), endpoint("we_x", "lic_2"))
	if err := r.CreateEndpoint(ctx, endpoint("we_c", "lic_1"), 2); !errors.Is(err, driver.ErrEndpointLimit) {
		t.Fatalf("a third endpoint under a limit of 2: %v, want ErrEndpointLimit", err)
	}
	if _, err := r.Lookup(ctx, "we_c"); !errors.Is(err, driver.ErrUnknownEndpoint) {
		t.Fatalf("the refused endpoint was stored (Lookup: %v)", err)
	}
	if err := r.CreateEndpoint(ctx, endpoint("we_c", "lic_1"), 0); err != nil {
		t.Fatalf("no limit: %v", err)
	}
	if err := r.CreateEndpoint(ctx, endpoint("we_a", "lic_3"), 0); !errors.Is(err, driver.ErrInvalidEndpoint) {
		t.Fatalf("creating a registered ID: %v, want ErrInvalidEndpoint", err)
	}
	if got := lookup(t, r, "we_a").Owner; got != "lic_1" {
		t.Fatalf("creating a registered ID moved it to %s", got)
	}
	// A deleted endpoint frees its slot, and its ID stays taken.
	update(t, r, "we_a", func(ep *driver.Endpoint) { ep.DeletedAt = editTime })
	update(t, r, "we_b", func(ep *driver.Endpoint) { ep.DeletedAt = editTime })
	if err := r.CreateEndpoint(ctx, endpoint("we_d", "lic_1"), 2); err != nil {
		t.Fatalf("after deleting two of three, a second endpoint under a limit of 2: %v", err)
	}
	if err := r.CreateEndpoint(ctx, endpoint("we_e", "lic_1"), 2); !errors.Is(err, driver.ErrEndpointLimit) {
		t.Fatalf("a third live endpoint under a limit of 2: %v, want ErrEndpointLimit", err)
	}
	if err := r.CreateEndpoint(ctx, endpoint("we_a", "lic_1"), 0); !errors.Is(err, driver.ErrInvalidEndpoint) {
		t.Fatalf("creating the ID of a deleted endpoint: %v, want ErrInvalidEndpoint", err)
	}
}

// testCreateRace: racing registrations for one owner under a limit register exactly the limit.
func testCreateRace(t *testing.T, r Registry) {
	const limit = 5
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, full int
	)
	for g := range editRacers {
		wg.Go(func() {
			for i := range 3 {
				err := r.CreateEndpoint(context.Background(), endpoint(fmt.Sprintf("we_%d_%d", g, i), "lic_1"), limit)
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, driver.ErrEndpointLimit):
					full++
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if got := len(listAll(t, r, "lic_1")); ok != limit || got != limit || full != 3*editRacers-limit {
		t.Fatalf("%d registrations succeeded, %d refused, %d listed; want %d, %d, %d", ok, full, got, limit, 3*editRacers-limit, limit)
	}
}

// testUpdate: each setting changes through UpdateEndpoint, which returns what it stored, and Lookup
// and the listing agree.
func testUpdate(t *testing.T, r Registry) {
	create(t, r, 0, endpoint("we_a", "lic_1"), endpoint("we_b", "lic_1"))
	want := settled("we_a", "lic_1")
	got := update(t, r, "we_a", func(ep *driver.Endpoint) { *ep = settled("we_a", "lic_1") })
	if !equal(got, want) {
		t.Fatalf("UpdateEndpoint returned %s\nwant                   %s", show(got), show(want))
	}
	if got := lookup(t, r, "we_a"); !equal(got, want) {
		t.Fatalf("after the update, Lookup = %s", show(got))
	}
	// A URL change keeps the secrets (which a registry that seals them binds to the URL).
	want.URL = "https://consumer.example/moved?token=1"
	want.DisabledReason, want.DisabledAt = "", time.Time{}
	want.Metadata, want.Headers, want.EnabledEvents = nil, nil, nil
	got = update(t, r, "we_a", func(ep *driver.Endpoint) {
		ep.URL = want.URL
		ep.DisabledReason, ep.DisabledAt = "", time.Time{}
		ep.Metadata, ep.Headers, ep.EnabledEvents = nil, nil, nil
	})
	if !equal(got, want) || !equal(lookup(t, r, "we_a"), want) {
		t.Fatalf("after the second update, Lookup = %s\nwant                              %s", show(lookup(t, r, "we_a")), show(want))
	}
	// The secret roll: a new first secret, the old one until an expiry.
	got = update(t, r, "we_a", func(ep *driver.Endpoint) {
		ep.Secrets = []string{secret(3), ep.Secrets[0]}
		ep.OldSecretsExpire = editTime.Add(time.Hour)
	})
	if !slices.Equal(got.Secrets, []string{secret(3), secret(2)}) || !got.OldSecretsExpire.Equal(editTime.Add(time.Hour)) {
		t.Fatalf("after the roll, %s", show(got))
	}
	if l := lookup(t, r, "we_a"); !slices.Equal(l.Secrets, got.Secrets) {
		t.Fatal("after the roll, Lookup has other secrets than UpdateEndpoint returned")
	}
	if got := lookup(t, r, "we_b"); !equal(got, endpoint("we_b", "lic_1")) {
		t.Fatalf("updating we_a changed we_b: %s", show(got))
	}
}

// testUpdateRefuses: an unknown ID, a failing change, an invalid result and a change of ID or owner
// store nothing.
func testUpdateRefuses(t *testing.T, r Registry) {
	ctx := context.Background()
	create(t, r, 0, endpoint("we_a", "lic_1"))
	called := false
	if _, err := r.UpdateEndpoint(ctx, "we_nope", func(*driver.Endpoint) error { called = true; return nil }); !errors.Is(err, driver.ErrUnknownEndpoint) || called {
		t.Fatalf("updating an unknown ID: %v (change called: %v), want ErrUnknownEndpoint without a call", err, called)
	}
	boom := errors.New("the caller's refusal")
	_, err := r.UpdateEndpoint(ctx, "we_a", func(ep *driver.Endpoint) error { ep.URL = "https://elsewhere.example/"; return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("a failing change: %v, want its error", err)
	}
	for name, change := range map[string]func(*driver.Endpoint){
		"new ID":          func(ep *driver.Endpoint) { ep.ID = "we_b" },
		"new owner":       func(ep *driver.Endpoint) { ep.Owner = "lic_2" },
		"no secret":       func(ep *driver.Endpoint) { ep.Secrets = nil },
		"relative URL":    func(ep *driver.Endpoint) { ep.URL = "/hooks" },
		"long desc":       func(ep *driver.Endpoint) { ep.Description = strings.Repeat("x", driver.MaxDescriptionBytes+1) },
		"reserved header": func(ep *driver.Endpoint) { ep.Headers = map[string]string{"Host": "evil.example"} },
		"reason no time":  func(ep *driver.Endpoint) { ep.DisabledReason = "manual" },
	} {
		_, err := r.UpdateEndpoint(ctx, "we_a", func(ep *driver.Endpoint) error { change(ep); return nil })
		if !errors.Is(err, driver.ErrInvalidEndpoint) {
			t.Errorf("%s: %v, want ErrInvalidEndpoint", name, err)
		}
	}
	if got := lookup(t, r, "we_a"); !equal(got, endpoint("we_a", "lic_1")) {
		t.Fatalf("a refused update was stored: %s", show(got))
	}
	if _, err := r.Lookup(ctx, "we_b"); !errors.Is(err, driver.ErrUnknownEndpoint) {
		t.Fatalf("an update that changed the ID stored a new endpoint (Lookup: %v)", err)
	}
	if got := listAll(t, r, "lic_2"); len(got) != 0 {
		t.Fatal("an update that changed the owner moved the endpoint")
	}
}

// testUpdateRace: concurrent read-modify-write updates of one endpoint serialise: each adds one to a
// counter in its metadata and one to its description, and no increment is lost.
func testUpdateRace(t *testing.T, r Registry) {
	create(t, r, 0, endpoint("we_a", "lic_1"))
	const each = 10
	var wg sync.WaitGroup
	for g := range editRacers {
		wg.Go(func() {
			for range each {
				_, err := r.UpdateEndpoint(context.Background(), "we_a", func(ep *driver.Endpoint) error {
					n, _ := strconv.Atoi(ep.Metadata["n"])
					ep.Metadata = map[string]string{"n": strconv.Itoa(n + 1), fmt.Sprintf("g%d", g): "seen"}
					ep.Description += "x"
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := lookup(t, r, "we_a")
	if got.Metadata["n"] != strconv.Itoa(editRacers*each) || len(got.Description) != editRacers*each {
		t.Fatalf("after %d updates the counter is %s and the description %d bytes: an update was lost",
			editRacers*each, got.Metadata["n"], len(got.Description))
	}
}

// testSoftDelete: a deleted endpoint is looked up with its DeletedAt and its secrets, listed nowhere,
// and changes no more; Delete removes it for good.
func testSoftDelete(t *testing.T, r Registry) {
	ctx := context.Background()
	create(t, r, 0, settled("we_a", "lic_1"), endpoint("we_b", "lic_1"))
	del := update(t, r, "we_a", func(ep *driver.Endpoint) { ep.DeletedAt = editTime.Add(time.Hour) })
	if !del.DeletedAt.Equal(editTime.Add(time.Hour)) {
		t.Fatalf("UpdateEndpoint returned %s without its DeletedAt", show(del))
	}
	got := lookup(t, r, "we_a")
	want := settled("we_a", "lic_1")
	want.DeletedAt = editTime.Add(time.Hour)
	if !equal(got, want) {
		t.Fatalf("Lookup of a deleted endpoint = %s\nwant                          %s", show(got), show(want))
	}
	if got := endpointIDs(listAll(t, r, "lic_1")); !slices.Equal(got, []string{"we_b"}) {
		t.Fatalf("ListEndpoints = %v, want [we_b]: a deleted endpoint is not listed", got)
	}
	called := false
	_, err := r.UpdateEndpoint(ctx, "we_a", func(ep *driver.Endpoint) error { called = true; ep.DeletedAt = time.Time{}; return nil })
	if !errors.Is(err, driver.ErrUnknownEndpoint) || called {
		t.Fatalf("updating a deleted endpoint: %v (change called: %v), want ErrUnknownEndpoint without a call", err, called)
	}
	if err := r.Delete(ctx, "we_a"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup(ctx, "we_a"); !errors.Is(err, driver.ErrUnknownEndpoint) {
		t.Fatalf("Lookup after Delete of a deleted endpoint: %v, want ErrUnknownEndpoint", err)
	}
}

// testDeleteRace: updates racing a delete either land before it or fail with ErrUnknownEndpoint; the
// endpoint ends deleted, and nothing an update wrote after the delete is stored.
func testDeleteRace(t *testing.T, r Registry) {
	create(t, r, 0, endpoint("we_a", "lic_1"))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		deleted bool
		after   int
	)
	for g := range editRacers {
		wg.Go(func() {
			for i := range 10 {
				_, err := r.UpdateEndpoint(context.Background(), "we_a", func(ep *driver.Endpoint) error {
					if g == 0 && i == 5 {
						ep.DeletedAt = editTime
						return nil
					}
					ep.Description = fmt.Sprintf("g%d i%d", g, i)
					return nil
				})
				mu.Lock()
				switch {
				case err == nil && g == 0 && i == 5:
					deleted = true
				case errors.Is(err, driver.ErrUnknownEndpoint):
					after++
				case err != nil:
					t.Error(err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got := lookup(t, r, "we_a")
	if !deleted || got.DeletedAt.IsZero() {
		t.Fatalf("the delete did not land: %s", show(got))
	}
	if len(listAll(t, r, "lic_1")) != 0 {
		t.Fatal("the deleted endpoint is listed")
	}
	if after == 0 {
		t.Log("no update came after the delete (the scheduler ran it last); the endpoint is deleted all the same")
	}
}
