// Package requestlogtest is the conformance suite of requestlog.Store: every implementation — the
// in-memory requestlog.MemoryStore, pgstore.RequestLogStore, a team's own — runs it in its tests,
// under -race:
//
//	func TestConformance(t *testing.T) {
//		requestlogtest.Run(t, func(t *testing.T) requestlog.Store { return newEmptyStore(t) })
//	}
//
// It uses the standard library alone (no assertion library), so that importing it adds nothing to a
// store's dependencies.
package requestlogtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/requestlog"
)

// epoch is a fixed instant, to the microsecond as stores keep it: the suite never reads the clock.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)

// Run runs the suite. newStore must return a fresh, empty store on every call.
func Run(t *testing.T, newStore func(t *testing.T) requestlog.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s requestlog.Store)
	}{
		{"InsertGet", testInsertGet},
		{"GetUnknown", testGetUnknown},
		{"GetIsPerOwner", testGetPerOwner},
		{"DuplicateSkipped", testDuplicate},
		{"EmptyInsert", testEmptyInsert},
		{"ListNewestFirst", testListOrder},
		{"ListPages", testListPages},
		{"ListFilters", testListFilters},
		{"ListCursorOutsideFilter", testListCursorOutsideFilter},
		{"ListUnknownCursor", testListUnknownCursor},
		{"ListIsPerOwner", testListPerOwner},
		{"DeleteBefore", testDeleteBefore},
		{"LargeBatch", testLargeBatch},
		{"ConcurrentInserts", testConcurrentInserts},
		{"CanceledContext", testCanceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// entry returns a distinct, fully populated entry: every field set, so that a store that drops one
// is caught.
func entry(n int, owner string, at time.Time) requestlog.Entry {
	return requestlog.Entry{
		RequestID:      fmt.Sprintf("req_%026d", n),
		Owner:          owner,
		KeyID:          fmt.Sprintf("key_%04d", n%7),
		Environment:    "live",
		Method:         "POST",
		Route:          fmt.Sprintf("POST /v1/orders/%d", n%3),
		Status:         []int{200, 201, 400, 404, 409, 500}[n%6],
		Code:           []string{"", "", "validation_failed", "order_not_found", "idempotency_key_in_use", "internal_error"}[n%6],
		IdempotencyKey: fmt.Sprintf("idem-%d", n),
		Replayed:       n%2 == 1,
		Version:        "v2",
		Latency:        time.Duration(n)*time.Millisecond + 250*time.Microsecond,
		At:             at,
	}
}

// same fails unless got is want, times compared as instants.
func same(t testing.TB, want, got requestlog.Entry) {
	t.Helper()
	check.Instant(t, want.At, got.At, "At of %s", want.RequestID)
	want.At, got.At = time.Time{}, time.Time{}
	check.Equal(t, want, got, "entry %s", want.RequestID)
}

// ids lists entries' request IDs; nil for none.
func ids(entries []requestlog.Entry) []string {
	if len(entries) == 0 {
		return nil
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.RequestID
	}
	return out
}

func testInsertGet(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	a, b := entry(1, "live:lic_a", epoch), entry(2, "live:lic_a", epoch.Add(time.Second))
	refused := entry(3, "", epoch)
	refused.KeyID, refused.Environment, refused.Route, refused.Code, refused.IdempotencyKey, refused.Version = "", "", "", "api_key_invalid", "", ""
	refused.Status, refused.Replayed = 401, false
	check.NoError(t, s.Insert(ctx, []requestlog.Entry{a, b, refused}))
	for _, want := range []requestlog.Entry{a, b, refused} {
		got, err := s.Get(ctx, want.Owner, want.RequestID)
		check.NoError(t, err, "Get %s", want.RequestID)
		same(t, want, got)
	}
}

func testGetUnknown(t *testing.T, s requestlog.Store) {
	_, err := s.Get(context.Background(), "live:lic_a", "req_nobody")
	check.ErrorIs(t, err, requestlog.ErrNotFound)
}

func testGetPerOwner(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	a := entry(1, "live:lic_a", epoch)
	check.NoError(t, s.Insert(ctx, []requestlog.Entry{a}))
	for _, owner := range []string{"live:lic_b", "sandbox:lic_a", ""} {
		_, err := s.Get(ctx, owner, a.RequestID)
		check.ErrorIs(t, err, requestlog.ErrNotFound, "owner %q reads lic_a's entry", owner)
	}
	// The same request ID under another owner is another entry.
	b := entry(2, "live:lic_b", epoch.Add(time.Second))
	b.RequestID = a.RequestID
	check.NoError(t, s.Insert(ctx, []requestlog.Entry{b}))
	got, err := s.Get(ctx, "live:lic_a", a.RequestID)
	check.NoError(t, err)
	same(t, a, got)
	got, err = s.Get(ctx, "live:lic_b", a.RequestID)
	check.NoError(t, err)
	same(t, b, got)
}

func testDuplicate(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	first := entry(1, "live:lic_a", epoch)
	again := entry(2, "live:lic_a", epoch.Add(time.Minute))
	again.RequestID = first.RequestID
	other := entry(3, "live:lic_a", epoch.Add(time.Second))
	check.NoError(t, s.Insert(ctx, []requestlog.Entry{first}))
	check.NoError(t, s.Insert(ctx, []requestlog.Entry{again, other}), "a duplicate is skipped, not an error")
	within := entry(4, "live:lic_a", epoch.Add(2*time.Second))
	withinAgain := entry(5, "live:lic_a", epoch.Add(3*time.Second))
	withinAgain.RequestID = within.RequestID
	check.NoError(t, s.Insert(ctx, []requestlog.Entry{within, withinAgain}), "a duplicate within a batch is skipped")

	got, err := s.Get(ctx, first.Owner, first.RequestID)
	check.NoError(t, err)
	same(t, first, got)
	got, err = s.Get(ctx, within.Owner, within.RequestID)
	check.NoError(t, err)
	same(t, within, got)
	list, more, err := s.List(ctx, requestlog.Query{Owner: "live:lic_a", Limit: 10})
	check.NoError(t, err)
	check.Equal(t, []string{within.RequestID, other.RequestID, first.RequestID}, ids(list), "the other entries of the batches are stored")
	check.True(t, !more, "has more")
}

func testEmptyInsert(t *testing.T, s requestlog.Store) {
	check.NoError(t, s.Insert(context.Background(), nil))
	list, more, err := s.List(context.Background(), requestlog.Query{Owner: "live:lic_a", Limit: 10})
	check.NoError(t, err)
	check.Len(t, list, 0)
	check.True(t, !more, "has more")
}

func testListOrder(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	// Inserted out of order, in two batches, with two entries at the same instant.
	e1, e2, e3, e4 := entry(1, "o", epoch), entry(2, "o", epoch.Add(time.Microsecond)), entry(3, "o", epoch.Add(time.Hour)), entry(4, "o", epoch.Add(time.Hour))
	check.NoError(t, s.Insert(ctx, []requestlog.Entry{e3, e1}))
	check.NoError(t, s.Insert(ctx, []requestlog.Entry{e2, e4}))
	list, more, err := s.List(ctx, requestlog.Query{Owner: "o", Limit: 10})
	check.NoError(t, err)
	check.Equal(t, []string{e4.RequestID, e3.RequestID, e2.RequestID, e1.RequestID}, ids(list),
		"newest first; at one instant, the greater request ID first")
	check.True(t, !more, "has more")
	for i, e := range []requestlog.Entry{e4, e3, e2, e1} {
		same(t, e, list[i])
	}
}

// insertMany inserts n entries of owner, one a second from epoch, in batches of 50, and returns them
// newest first.
func insertMany(t *testing.T, s requestlog.Store, owner string, n, from int) []requestlog.Entry {
	t.Helper()
	all := make([]requestlog.Entry, 0, n)
	for i := range n {
		all = append(all, entry(from+i, owner, epoch.Add(time.Duration(i)*time.Second)))
	}
	for i := 0; i < n; i += 50 {
		check.NoError(t, s.Insert(context.Background(), all[i:min(i+50, n)]))
	}
	sort.Slice(all, func(i, j int) bool { return all[i].At.After(all[j].At) })
	return all
}

func testListPages(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	all := insertMany(t, s, "live:lic_a", 23, 0)
	var got []string
	after := ""
	for page := 0; ; page++ {
		list, more, err := s.List(ctx, requestlog.Query{Owner: "live:lic_a", After: after, Limit: 5})
		check.NoError(t, err)
		check.True(t, len(list) <= 5, "page %d has %d entries, over the limit", page, len(list))
		got = append(got, ids(list)...)
		if !more {
			break
		}
		check.True(t, len(list) == 5, "page %d: has more with a short page", page)
		after = list[len(list)-1].RequestID
	}
	check.Equal(t, ids(all), got, "the pages list every entry once, newest first")
	// A limit that ends exactly at the last entry: no more.
	list, more, err := s.List(ctx, requestlog.Query{Owner: "live:lic_a", Limit: 23})
	check.NoError(t, err)
	check.Len(t, list, 23)
	check.True(t, !more, "has more after the last entry")
}

func testListFilters(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	all := insertMany(t, s, "live:lic_a", 36, 0)
	keep := func(f func(e requestlog.Entry) bool) []string {
		var out []string
		for _, e := range all {
			if f(e) {
				out = append(out, e.RequestID)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    requestlog.Query
		want []string
	}{
		{"Status", requestlog.Query{Status: 404}, keep(func(e requestlog.Entry) bool { return e.Status == 404 })},
		{"StatusClass", requestlog.Query{StatusClass: 4}, keep(func(e requestlog.Entry) bool { return e.Status >= 400 && e.Status < 500 })},
		{"Code", requestlog.Query{Code: "idempotency_key_in_use"}, keep(func(e requestlog.Entry) bool { return e.Code == "idempotency_key_in_use" })},
		{"KeyID", requestlog.Query{KeyID: "key_0003"}, keep(func(e requestlog.Entry) bool { return e.KeyID == "key_0003" })},
		{"Route", requestlog.Query{Route: "POST /v1/orders/1"}, keep(func(e requestlog.Entry) bool { return e.Route == "POST /v1/orders/1" })},
		{"Since", requestlog.Query{Since: epoch.Add(30 * time.Second)}, keep(func(e requestlog.Entry) bool { return !e.At.Before(epoch.Add(30 * time.Second)) })},
		{"Until", requestlog.Query{Until: epoch.Add(5 * time.Second)}, keep(func(e requestlog.Entry) bool { return e.At.Before(epoch.Add(5 * time.Second)) })},
		{"SinceUntil", requestlog.Query{Since: epoch.Add(10 * time.Second), Until: epoch.Add(20 * time.Second)},
			keep(func(e requestlog.Entry) bool {
				return !e.At.Before(epoch.Add(10*time.Second)) && e.At.Before(epoch.Add(20*time.Second))
			})},
		{"Combined", requestlog.Query{StatusClass: 2, KeyID: "key_0001", Since: epoch.Add(2 * time.Second)},
			keep(func(e requestlog.Entry) bool {
				return e.Status/100 == 2 && e.KeyID == "key_0001" && !e.At.Before(epoch.Add(2*time.Second))
			})},
		{"NoMatch", requestlog.Query{Code: "nothing_like_it"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Owner, q.Limit = "live:lic_a", 100
			list, more, err := s.List(ctx, q)
			check.NoError(t, err)
			check.Equal(t, tc.want, ids(list))
			check.True(t, !more, "has more")
			if len(tc.want) > 1 {
				// Paged by one: the same entries, and has_more on all but the last page.
				var got []string
				q.Limit = 1
				for {
					list, more, err := s.List(ctx, q)
					check.NoError(t, err)
					got = append(got, ids(list)...)
					if !more {
						break
					}
					q.After = list[0].RequestID
				}
				check.Equal(t, tc.want, got, "paged by one")
			}
		})
	}
}

// A cursor names a position: the entry it names need not pass the filters.
func testListCursorOutsideFilter(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	all := insertMany(t, s, "o", 12, 0)
	var cursor requestlog.Entry
	for _, e := range all {
		if e.Status != 404 && e.At.Before(epoch.Add(8*time.Second)) {
			cursor = e
			break
		}
	}
	list, _, err := s.List(ctx, requestlog.Query{Owner: "o", Status: 404, After: cursor.RequestID, Limit: 100})
	check.NoError(t, err)
	for _, e := range list {
		check.True(t, e.Status == 404 && e.At.Before(cursor.At), "entry %s after the cursor %s", e.RequestID, cursor.RequestID)
	}
	check.True(t, len(list) > 0, "no entry after the cursor")
}

func testListUnknownCursor(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	insertMany(t, s, "o", 3, 0)
	other := insertMany(t, s, "p", 1, 10)
	for _, after := range []string{"req_pruned", other[0].RequestID} {
		list, more, err := s.List(ctx, requestlog.Query{Owner: "o", After: after, Limit: 10})
		check.NoError(t, err)
		check.Len(t, list, 0, "a cursor %s that names no entry of the owner", after)
		check.True(t, !more, "has more")
	}
}

func testListPerOwner(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	a := insertMany(t, s, "live:lic_a", 5, 0)
	insertMany(t, s, "live:lic_b", 5, 100)
	insertMany(t, s, "sandbox:lic_a", 5, 200)
	insertMany(t, s, "", 5, 300)
	list, more, err := s.List(ctx, requestlog.Query{Owner: "live:lic_a", Limit: 100})
	check.NoError(t, err)
	check.Equal(t, ids(a), ids(list), "only lic_a's live entries")
	check.True(t, !more, "has more")
	list, _, err = s.List(ctx, requestlog.Query{Owner: "live:lic_c", Limit: 100})
	check.NoError(t, err)
	check.Len(t, list, 0, "an owner without entries")
}

func testDeleteBefore(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	insertMany(t, s, "a", 10, 0)
	insertMany(t, s, "b", 10, 100)
	cutoff := epoch.Add(6 * time.Second) // entries 0–5 of each owner are older: 12
	n, err := s.DeleteBefore(ctx, cutoff, 5)
	check.NoError(t, err)
	check.Equal(t, 5, n, "bounded by the limit")
	total := n
	for n == 5 {
		n, err = s.DeleteBefore(ctx, cutoff, 5)
		check.NoError(t, err)
		total += n
	}
	check.Equal(t, 12, total, "every older entry, once")
	n, err = s.DeleteBefore(ctx, cutoff, 5)
	check.NoError(t, err)
	check.Equal(t, 0, n, "nothing left to delete")
	for _, owner := range []string{"a", "b"} {
		list, _, err := s.List(ctx, requestlog.Query{Owner: owner, Limit: 100})
		check.NoError(t, err)
		check.Len(t, list, 4, "owner %s keeps its entries at or after the cutoff", owner)
		for _, e := range list {
			check.True(t, !e.At.Before(cutoff), "entry %s at %v survived", e.RequestID, e.At)
		}
	}
	_, err = s.Get(ctx, "a", entry(0, "a", epoch).RequestID)
	check.ErrorIs(t, err, requestlog.ErrNotFound, "a pruned entry is gone")
}

func testLargeBatch(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	batch := make([]requestlog.Entry, 1000)
	for i := range batch {
		batch[i] = entry(i, fmt.Sprintf("live:lic_%d", i%4), epoch.Add(time.Duration(i)*time.Millisecond))
	}
	check.NoError(t, s.Insert(ctx, batch))
	list, more, err := s.List(ctx, requestlog.Query{Owner: "live:lic_1", Limit: 100})
	check.NoError(t, err)
	check.Len(t, list, 100)
	check.True(t, more, "250 entries, 100 listed")
	same(t, batch[997], list[0])
}

func testConcurrentInserts(t *testing.T, s requestlog.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for b := range 5 {
				batch := make([]requestlog.Entry, 10)
				for i := range batch {
					n := w*1000 + b*10 + i
					batch[i] = entry(n, "o", epoch.Add(time.Duration(n)*time.Microsecond))
				}
				// Every writer also repeats one shared entry: exactly one copy stays.
				batch = append(batch, entry(999_999, "o", epoch))
				if err := s.Insert(ctx, batch); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		check.NoError(t, err)
	}
	var all []requestlog.Entry
	q := requestlog.Query{Owner: "o", Limit: 100}
	for {
		list, more, err := s.List(ctx, q)
		check.NoError(t, err)
		all = append(all, list...)
		if !more {
			break
		}
		q.After = list[len(list)-1].RequestID
	}
	check.Len(t, all, 8*5*10+1, "every entry once, and the shared one once")
}

func testCanceled(t *testing.T, s requestlog.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := entry(1, "o", epoch)
	check.True(t, s.Insert(ctx, []requestlog.Entry{e}) != nil, "Insert with a cancelled context succeeded")
	_, err := s.Get(ctx, "o", e.RequestID)
	check.True(t, err != nil && !errors.Is(err, requestlog.ErrNotFound), "Get with a cancelled context: %v", err)
	_, _, err = s.List(ctx, requestlog.Query{Owner: "o", Limit: 1})
	check.Error(t, err, "List with a cancelled context")
	_, err = s.DeleteBefore(ctx, epoch, 10)
	check.Error(t, err, "DeleteBefore with a cancelled context")
	_, err = s.Get(context.Background(), "o", e.RequestID)
	check.ErrorIs(t, err, requestlog.ErrNotFound, "a cancelled Insert stored nothing")
}
