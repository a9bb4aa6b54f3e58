package producer

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/svcplatform/conventions/apierror"
)

// FuzzParseRangeQuery feeds arbitrary query strings to the range parameters' parser: it must never
// panic, accept only ranges the driver contract allows, and locate every refusal at a query parameter.
func FuzzParseRangeQuery(f *testing.F) {
	for _, seed := range []string{
		"from=1", "from=1&to=10&limit=100", "from=5&to=3", "from=0", "from=&to=", "limit=1001&from=1",
		"from=18446744073709551615", "from=18446744073709551616", "from=1&from=2", "from=%2B1", "from=1e3",
		"from=00007&to=0007", "to=5", ";;&&==", "from=1&limit=-1", "from=%00",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw) // the server serves whatever part of a bad query it could parse
		rq, err := parseRangeQuery(q)
		if err == nil {
			if rq.From < 1 || rq.To < rq.From || rq.Limit < 1 {
				t.Fatalf("accepted %q as %+v, outside the driver contract (1 ≤ from ≤ to, limit ≥ 1)", raw, rq)
			}
			if rq.Limit > MaxRangeLimit {
				t.Fatalf("accepted limit %d", rq.Limit)
			}
			return
		}
		var p *apierror.Error
		if !errors.As(err, &p) || p.Status != http.StatusBadRequest || len(p.Errors) == 0 {
			t.Fatalf("%q: want a located 400, got %v", raw, err)
		}
		for _, v := range p.Errors {
			if v.Location != apierror.LocationQuery || (v.Name != "from" && v.Name != "to" && v.Name != "limit") || v.Code == "" || v.Detail == "" {
				t.Fatalf("%q: badly located violation %+v", raw, v)
			}
		}
	})
}

func TestParseRangeQueryDefaults(t *testing.T) {
	q, err := parseRangeQuery(url.Values{"from": {"5"}})
	require.NoError(t, err)
	require.Equal(t, rangeQuery{From: 5, To: ^uint64(0), Limit: DefaultRangeLimit}, q)
}
