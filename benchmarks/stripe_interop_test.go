package benchmarks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v85/webhook"

	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// The X-SVC-Signature scheme is Stripe's Stripe-Signature scheme (docs/decisions.md D3), so a consumer can
// verify our deliveries with stripe-go, and our verifier accepts what stripe-go signs. These tests
// hold both directions against the real library. stripe-go's ValidatePayload checks the signature
// and the timestamp only; it does not parse the body, so no API-version option is involved (that
// check lives in ConstructEvent, which needs a Stripe event object).

var interopBodies = []struct {
	name string
	body []byte
}{
	{"event envelope", []byte(`{"id":"evt_01j","sequence":7,"type":"order.created","created":1767225600,"api_version":"v1","data":{"id":"ord_1"}}`)},
	{"empty", []byte{}},
	{"binary and separators", []byte("t=1,v1=ab\x00\xff.\n\r\"é")},
	{"64KiB", eventBody(64 << 10)},
}

func TestStripeValidatesOurSignature(t *testing.T) {
	secret := webhook.NewSecret()
	for _, tt := range interopBodies {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Now()
			header, err := webhook.Sign(tt.body, now, secret)
			require.NoError(t, err)

			require.NoError(t, stripewebhook.ValidatePayload(tt.body, header, secret))
			require.NoError(t, stripewebhook.ValidatePayloadWithTolerance(tt.body, header, secret, time.Minute))

			// And stripe-go rejects what it should: another secret, a changed body, a stale timestamp.
			require.ErrorIs(t, stripewebhook.ValidatePayload(tt.body, header, webhook.NewSecret()), stripewebhook.ErrNoValidSignature)
			tampered := append(append([]byte{}, tt.body...), ' ')
			require.ErrorIs(t, stripewebhook.ValidatePayload(tampered, header, secret), stripewebhook.ErrNoValidSignature)
			old, err := webhook.Sign(tt.body, now.Add(-10*time.Minute), secret)
			require.NoError(t, err)
			require.ErrorIs(t, stripewebhook.ValidatePayload(tt.body, old, secret), stripewebhook.ErrTooOld)
		})
	}
}

func TestStripeValidatesOurSignatureDuringRotation(t *testing.T) {
	oldSecret, newSecret := webhook.NewSecret(), webhook.NewSecret()
	body := interopBodies[0].body
	header, err := webhook.Sign(body, time.Now(), newSecret, oldSecret)
	require.NoError(t, err)
	// A consumer still on the old secret and one already on the new both verify the delivery.
	require.NoError(t, stripewebhook.ValidatePayload(body, header, oldSecret))
	require.NoError(t, stripewebhook.ValidatePayload(body, header, newSecret))
	require.ErrorIs(t, stripewebhook.ValidatePayload(body, header, webhook.NewSecret()), stripewebhook.ErrNoValidSignature)
}

func TestOurHeaderIsStripesHeader(t *testing.T) {
	secret := webhook.NewSecret()
	at := time.Unix(1767225600, 0)
	for _, tt := range interopBodies {
		t.Run(tt.name, func(t *testing.T) {
			ours, err := webhook.Sign(tt.body, at, secret)
			require.NoError(t, err)
			theirs := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: tt.body, Secret: secret, Timestamp: at})
			require.Equal(t, theirs.Header, ours, "same secret, time and body must give the same header byte for byte")
		})
	}
}

func TestOurVerifierAcceptsStripeSignature(t *testing.T) {
	secret := webhook.NewSecret()
	at := time.Unix(1767225600, 0)
	for _, tt := range interopBodies {
		t.Run(tt.name, func(t *testing.T) {
			p := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: tt.body, Secret: secret, Timestamp: at})
			v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return at.Add(time.Minute) }})
			require.NoError(t, err)
			require.NoError(t, v.Verify(p.Header, tt.body))
			got, err := v.VerifyTime(p.Header, tt.body)
			require.NoError(t, err)
			require.True(t, got.Equal(at))

			tampered := append(append([]byte{}, tt.body...), ' ')
			require.ErrorIs(t, v.Verify(p.Header, tampered), webhook.ErrSignatureMismatch)
			other, err := webhook.NewVerifier([]string{webhook.NewSecret()}, &webhook.VerifierOptions{Now: func() time.Time { return at }})
			require.NoError(t, err)
			require.ErrorIs(t, other.Verify(p.Header, tt.body), webhook.ErrSignatureMismatch)
		})
	}
}

func TestOurVerifierAppliesToleranceToStripeSignature(t *testing.T) {
	secret := webhook.NewSecret()
	at := time.Unix(1767225600, 0)
	body := interopBodies[0].body
	p := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
	tests := []struct {
		name string
		now  time.Time
		want error
	}{
		{"at the edge in the past", at.Add(webhook.DefaultTolerance), nil},
		{"too old", at.Add(webhook.DefaultTolerance + time.Second), webhook.ErrTooOld},
		{"at the edge in the future", at.Add(-webhook.DefaultTolerance), nil},
		// stripe-go itself accepts this one (its check is one-sided); ours does not.
		{"too new", at.Add(-webhook.DefaultTolerance - time.Second), webhook.ErrTooNew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return tt.now }})
			require.NoError(t, err)
			err = v.Verify(p.Header, body)
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.want)
			}
		})
	}
}

// The secondary v0 scheme stripe-go's test helper can emit is ignored by both sides: a header that
// carries only v0 is not a signature.
func TestOurVerifierIgnoresStripeV0(t *testing.T) {
	secret := webhook.NewSecret()
	at := time.Unix(1767225600, 0)
	body := interopBodies[0].body
	p := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at, Scheme: "v0"})
	v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return at }})
	require.NoError(t, err)
	require.ErrorIs(t, v.Verify(p.Header, body), webhook.ErrNoSignature)
	require.ErrorIs(t, stripewebhook.ValidatePayload(body, p.Header, secret), stripewebhook.ErrNoValidSignature)
}

// TestStripeVerifiesDeliveriesThroughASecretRoll: real deliveries of a producer, whose endpoint's
// secret is rolled through the endpoints API with an hour's overlap, verify with stripe-go holding the
// old secret until the hour is up, and not after; the new secret verifies throughout. The producer's
// clock starts now, for stripe-go checks the signature's age against the wall clock.
func TestStripeVerifiesDeliveriesThroughASecretRoll(t *testing.T) {
	ctx := context.Background()
	var (
		mu     sync.Mutex
		bodies [][]byte
		sigs   []string
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, sigs = append(bodies, body), append(sigs, r.Header.Get(webhook.HeaderSignature))
		mu.Unlock()
	}))
	defer sink.Close()
	now := time.Now()
	clock := func() time.Time { return now }
	oldSecret := webhook.NewSecret()
	eps, err := memstore.NewEndpoints(producer.Endpoint{ID: "we_roll", URL: sink.URL, Owner: "lic_1", Secrets: []string{oldSecret}})
	require.NoError(t, err)
	log := memstore.NewLog()
	pub, err := producer.NewPublisher(log, eps, &producer.PublisherOptions{Now: clock})
	require.NoError(t, err)
	d, err := producer.NewDispatcher(log, eps, &producer.DispatcherOptions{Now: clock,
		Guard: &ssrf.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	require.NoError(t, err)
	api, err := producer.NewEndpointsHandler(eps, func(*http.Request) (string, error) { return "lic_1", nil },
		&producer.EndpointsHandlerOptions{Now: clock})
	require.NoError(t, err)
	mux := http.NewServeMux()
	api.Register(mux, "v1", nil)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/webhook_endpoints/we_roll/roll_secret", strings.NewReader(`{"expires_in":3600}`)))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var rolled struct{ Secret string }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &rolled))
	newSecret := rolled.Secret

	deliver := func() (body []byte, sig string) {
		t.Helper()
		_, err := pub.Publish(ctx, "we_roll", "order.created", map[string]string{"id": "ord_1"})
		require.NoError(t, err)
		st, err := d.DeliverDue(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, st.Delivered)
		mu.Lock()
		defer mu.Unlock()
		return bodies[len(bodies)-1], sigs[len(sigs)-1]
	}
	body, sig := deliver()
	require.NoError(t, stripewebhook.ValidatePayload(body, sig, oldSecret), "the old secret verifies during the overlap")
	require.NoError(t, stripewebhook.ValidatePayload(body, sig, newSecret))

	now = now.Add(time.Hour) // the overlap ends: stripe-go accepts a signature from its future
	body, sig = deliver()
	require.ErrorIs(t, stripewebhook.ValidatePayload(body, sig, oldSecret), stripewebhook.ErrNoValidSignature,
		"the old secret verifies nothing after its expiry")
	require.NoError(t, stripewebhook.ValidatePayload(body, sig, newSecret))
}
