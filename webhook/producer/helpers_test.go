package producer_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"

	"github.com/svcplatform/conventions/internal/testclock"
)

var t0 = time.Unix(1767225600, 0).UTC()

// clock is the shared injectable test clock.
type clock = testclock.Clock

func newClock() *clock { return testclock.New(t0) }

// delivery is one request a test endpoint received.
type delivery struct {
	Endpoint  string
	Header    http.Header
	Body      []byte
	Event     webhook.Event
	Signature string
}

// sink is a test webhook endpoint: it records every request and answers with the status its
// respond function picks (200 when nil).
type sink struct {
	mu      sync.Mutex
	got     []delivery
	respond func(ev webhook.Event, n int) int // n: how many times this sequence was received so far
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev webhook.Event
	_ = json.Unmarshal(body, &ev)
	s.mu.Lock()
	n := 0
	for _, d := range s.got {
		if d.Event.Sequence == ev.Sequence && d.Endpoint == r.URL.Path {
			n++
		}
	}
	s.got = append(s.got, delivery{Endpoint: r.URL.Path, Header: r.Header.Clone(), Body: body, Event: ev,
		Signature: r.Header.Get(webhook.HeaderSignature)})
	respond := s.respond
	s.mu.Unlock()
	status := http.StatusOK
	if respond != nil {
		status = respond(ev, n)
	}
	w.WriteHeader(status)
}

func (s *sink) deliveries() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.got...)
}

func (s *sink) seqs() []uint64 {
	var out []uint64
	for _, d := range s.deliveries() {
		out = append(out, d.Event.Sequence)
	}
	return out
}

func startSink(t *testing.T, respond func(ev webhook.Event, n int) int) (*sink, *httptest.Server) {
	s := &sink{respond: respond}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

func mustEndpoints(t testing.TB, eps ...producer.Endpoint) *memstore.Endpoints {
	m, err := memstore.NewEndpoints(eps...)
	require.NoError(t, err)
	return m
}

func mustPublisher(t testing.TB, l driver.Log, eps driver.Endpoints, opts *producer.PublisherOptions) *producer.Publisher {
	t.Helper()
	p, err := producer.NewPublisher(l, eps, opts)
	require.NoError(t, err)
	return p
}

// loopback lets the default delivery client reach the tests' httptest servers.
var loopback = &ssrf.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}

// mustDispatcher builds a dispatcher whose default client may dial loopback (and nothing else private).
func mustDispatcher(t testing.TB, l driver.Log, eps driver.Endpoints, opts *producer.DispatcherOptions) *producer.Dispatcher {
	if opts == nil {
		opts = &producer.DispatcherOptions{}
	}
	if opts.Client == nil && opts.Guard == nil {
		o := *opts
		o.Guard = loopback
		opts = &o
	}
	d, err := producer.NewDispatcher(l, eps, opts)
	require.NoError(t, err)
	return d
}

func publishN(t testing.TB, l driver.Log, stream string, n int, created time.Time) {
	for i := range n {
		_, err := l.Append(context.Background(), driver.StreamEvent{Stream: stream, Event: webhook.Event{Type: "order.created", Created: created.Unix(),
			APIVersion: "v1", Data: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)}})
		require.NoError(t, err)
	}
}

// checkSignature verifies a signature header independently of the webhook package: one v1 per secret,
// each an HMAC-SHA256 of "<t>.<body>".
func checkSignature(t *testing.T, header string, body []byte, at time.Time, secrets ...string) {
	t.Helper()
	parts := strings.Split(header, ",")
	require.Equal(t, "t="+strconv.FormatInt(at.Unix(), 10), parts[0])
	require.Len(t, parts, 1+len(secrets), "one v1 per secret")
	for i, s := range secrets {
		mac := hmac.New(sha256.New, []byte(s))
		mac.Write([]byte(strconv.FormatInt(at.Unix(), 10) + "."))
		mac.Write(body)
		require.Equal(t, "v1="+hex.EncodeToString(mac.Sum(nil)), parts[1+i], "signature %d", i)
	}
}

func status(t *testing.T, l driver.Log, stream string, seq uint64) driver.DeliveryStatus {
	t.Helper()
	st, err := l.Status(context.Background(), stream, seq)
	require.NoError(t, err)
	return st
}

// roundTripFunc lets a test answer requests in memory (inside a synctest bubble, where real sockets
// would not let fake time advance).
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func respond(r *http.Request, status int) *http.Response {
	return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: r}
}
