package producer_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// TestAttemptIDsRevealNoVolume (issue 30): attempt IDs came from one counter for the whole log, so a
// tenant who saw its own att_41 and then att_97 knew that 55 attempts went to others in between. They
// are random now: unique over many, with the att_ prefix, and nothing in one tenant's IDs follows the
// other's attempts. The history is still ordered newest first, by time, and pages by them.
func TestAttemptIDsRevealNoVolume(t *testing.T) {
	ctx := context.Background()
	l := memstore.NewLog()
	const n = 200
	publishN(t, l, "we_mine", n, t0)
	publishN(t, l, "we_theirs", 5*n, t0)
	at := t0
	settle := func(stream string) {
		t.Helper()
		dls, err := l.Claim(ctx, driver.ClaimRequest{Now: at, LeaseUntil: at.Add(time.Minute), Limit: 1, PerStream: 1,
			Skip: []string{map[string]string{"we_mine": "we_theirs", "we_theirs": "we_mine"}[stream]}})
		require.NoError(t, err)
		require.Len(t, dls, 1)
		require.NoError(t, l.Delivered(ctx, dls[0].Lease, driver.Attempt{At: at, StatusCode: 204}))
		at = at.Add(time.Millisecond)
	}
	for range n {
		settle("we_mine")
		for range 5 { // the others' traffic between two of mine
			settle("we_theirs")
		}
	}

	var mine []uint64
	seen := map[uint64]bool{}
	for _, stream := range []string{"we_mine", "we_theirs"} {
		var recs []driver.AttemptRecord
		var before uint64
		for {
			page, more, err := l.Attempts(ctx, driver.AttemptQuery{Stream: stream, Limit: 37, Before: before})
			require.NoError(t, err)
			recs = append(recs, page...)
			if !more {
				break
			}
			before = page[len(page)-1].ID
		}
		require.Len(t, recs, map[string]int{"we_mine": n, "we_theirs": 5 * n}[stream], "every attempt, paged by ID")
		for i, r := range recs {
			require.NotZero(t, r.ID)
			require.False(t, seen[r.ID], "attempt IDs are unique")
			seen[r.ID] = true
			if i > 0 {
				require.True(t, r.At.Before(recs[i-1].At), "newest first, by time")
			}
		}
		if stream == "we_mine" {
			for _, r := range slices.Backward(recs) {
				mine = append(mine, r.ID) // oldest first
			}
		}
	}
	// A counter rises by one plus the others' attempts; random IDs neither rise nor keep a step.
	require.False(t, slices.IsSorted(mine), "my attempt IDs, oldest first, must not rise with time")
	steps := map[uint64]bool{}
	for i := 1; i < len(mine); i++ {
		steps[mine[i]-mine[i-1]] = true
	}
	require.Greater(t, len(steps), len(mine)/2, "no common step between consecutive IDs")

	// Through the history API: the att_ prefix, and starting_after pages by time.
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_mine", URL: "https://hooks.example.com/", Owner: "lic_1",
		Secrets: []string{"whsec_x"}})
	h := must(producer.NewDeliveriesHandler(l, eps, func(*http.Request) (string, error) { return "lic_1", nil }, nil))
	mux := http.NewServeMux()
	mux.Handle(producer.DeliveriesPattern("v1"), h)
	get := func(query string) (ids []string, seqs []int64) {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_mine/deliveries"+query, nil))
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		var body struct {
			Data []struct {
				ID       string `json:"id"`
				Sequence uint64 `json:"sequence"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
		for _, a := range body.Data {
			ids = append(ids, a.ID)
			seqs = append(seqs, int64(a.Sequence))
		}
		return ids, seqs
	}
	first, seqs := get("?limit=3")
	require.Equal(t, []int64{n, n - 1, n - 2}, seqs)
	for _, id := range first {
		require.True(t, strings.HasPrefix(id, producer.AttemptIDPrefix), id)
		_, err := strconv.ParseUint(strings.TrimPrefix(id, producer.AttemptIDPrefix), 10, 64)
		require.NoError(t, err, id)
	}
	_, seqs = get("?limit=3&starting_after=" + first[2])
	require.Equal(t, []int64{n - 3, n - 4, n - 5}, seqs)
}
