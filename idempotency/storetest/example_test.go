package storetest_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
	"github.com/svcplatform/conventions/idempotency/storetest"
)

// A store author's whole conformance test is one function in the store's _test.go file: the function
// below, with a constructor of the author's store in place of memstore.New. go test -race then
// runs every check as a subtest of it.
//
// An Example is not given the *testing.T that go test hands a test, so this one is compiled, not run.
// The same call runs on memstore.Store in TestRunOnMemoryStore, and Example_contract below runs a
// few of the checks by hand.
func Example() {
	TestConformance := func(t *testing.T) { // in your file: func TestConformance(t *testing.T) {
		storetest.Run(t, func(t *testing.T) driver.Store {
			return memstore.New(nil) // your store here: a fresh one, or one for every subtest
		})
	}
	_ = TestConformance
}

// What the suite checks, a few of its checks done by hand on the reference store: of many racing
// claims on one key exactly one wins and the others find the key in flight; once the owner completes,
// a duplicate gets the stored response; and a completed record is no one's to complete again, not
// even its owner's.
func Example_contract() {
	ctx := context.Background()
	s := memstore.New(nil)
	key := driver.Key{Scope: "lic_1:sandbox", Key: "3f1c2a7e"}
	fp := driver.Fingerprint(sha256.Sum256([]byte("POST /v1/orders {\"side\":\"buy\"}")))
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	claim := func(at time.Time) (driver.Claim, error) {
		return s.Claim(ctx, key, fp, at, at.Add(30*time.Second), at.Add(24*time.Hour))
	}

	// 64 requests with one key at once: one claim, 63 in flight.
	var (
		mu     sync.Mutex
		counts = map[driver.Status]int{}
		owner  driver.Claim
		wg     sync.WaitGroup
	)
	for range 64 {
		wg.Go(func() {
			c, err := claim(now)
			if err != nil {
				fmt.Println(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			counts[c.Status]++
			if c.Status == driver.Claimed {
				owner = c
			}
		})
	}
	wg.Wait()
	fmt.Println("racing claims:", counts[driver.Claimed], counts[driver.InFlight])

	resp := driver.Response{Status: http.StatusCreated, Body: []byte(`{"id":"ord_1"}`)}
	if err := s.Complete(ctx, key, owner.Token, resp, now.Add(24*time.Hour)); err != nil {
		fmt.Println(err)
		return
	}
	replay, err := claim(now.Add(time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("after Complete:", replay.Status, replay.Response.Status, string(replay.Response.Body))

	err = s.Complete(ctx, key, owner.Token, driver.Response{Status: http.StatusInternalServerError}, now.Add(24*time.Hour))
	fmt.Println("Complete again:", errors.Is(err, driver.ErrLeaseLost))
	// Output:
	// racing claims: 1 63
	// after Complete: completed 201 {"id":"ord_1"}
	// Complete again: true
}
