package conventions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/ids"
	"github.com/svcplatform/conventions/ratelimit"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// paymentIDs makes the service's payment IDs: "pay_" and 26 random characters.
var paymentIDs = ids.MustPrefix("pay")

// userKey is the context key of the team's own authentication.
type userKey struct{}

// authenticate stands in for the team's own authentication: it is not package apikey's, and the
// library's pieces below work with it all the same.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := r.Header.Get("X-Example-User")
		if user == "" {
			apierror.Write(w, r, apierror.Unauthenticated("user_missing", "send X-Example-User",
				apierror.Header("X-Example-User", "user_missing", "header X-Example-User is required")))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
	})
}

func userOf(r *http.Request) (string, error) {
	u, _ := r.Context().Value(userKey{}).(string)
	if u == "" {
		return "", errors.New("no user: authenticate must run first")
	}
	return u, nil
}

// payments is the service's state.
type payments struct {
	mu   sync.Mutex
	byID map[string]payment
	pub  *producer.Publisher
}

type payment struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Owner  string `json:"-"`
}

func (s *payments) create(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Amount int64 `json:"amount"`
	}
	if err := apierror.Decode(r, &in, nil); err != nil { // strict, size-capped, located
		idempotency.NotPerformed(w) // nothing was done: the key may be reused with a corrected body
		apierror.Write(w, r, err)
		return
	}
	if in.Amount <= 0 {
		idempotency.NotPerformed(w)
		apierror.Write(w, r, apierror.Invalid(apierror.Body("/amount", "out_of_range", "must be a positive number of cents")))
		return
	}
	user, _ := userOf(r)
	p := payment{ID: paymentIDs.New(), Amount: in.Amount, Owner: user}
	s.mu.Lock()
	s.byID[p.ID] = p
	s.mu.Unlock()
	// One event to every endpoint the user registered, each on its own gap-free sequence.
	if _, err := s.pub.PublishToOwner(r.Context(), user, "payment.created", p); err != nil {
		apierror.Write(w, r, err) // the opaque 500, logged by the service's Writer
		return
	}
	apierror.WriteJSON(w, r, http.StatusCreated, p)
}

func (s *payments) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	user, _ := userOf(r)
	s.mu.Lock()
	p, ok := s.byID[id]
	s.mu.Unlock()
	if !paymentIDs.Valid(id) || !ok || p.Owner != user {
		apierror.Write(w, r, apierror.NotFound("payment_not_found", "no payment has this ID",
			apierror.Path("id", "payment_not_found", "no payment has this ID")))
		return
	}
	apierror.WriteJSON(w, r, http.StatusOK, p)
}

// A small payments service on a Go 1.22 ServeMux with its own authentication: every convention comes
// from the library, and none of it needs glue — the problem type base is set once, the mux's 404 and
// 405 are problems, successes are written by WriteJSON, IDs come from package ids, the rate limit
// counts by the team's own user, and one call publishes to all of a user's webhook endpoints.
func Example_service() {
	endpoints := &memstore.Endpoints{}
	for _, id := range []string{"we_1", "we_2"} {
		_ = endpoints.Put(producer.Endpoint{ID: id, URL: "https://ann.example/hooks/" + id, Owner: "ann",
			Secrets: []string{"whsec_example"}})
	}
	log := memstore.NewLog()
	pub, err := producer.NewPublisher(log, endpoints, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	svc := &payments{byID: map[string]payment{}, pub: pub}

	idem, err := idempotency.New(&idempotency.Options{Scope: userOf})
	if err != nil {
		fmt.Println(err)
		return
	}
	bucket, err := ratelimit.NewTokenBucket(1, 6, nil) // 6 at once, then one a second
	if err != nil {
		fmt.Println(err)
		return
	}
	limit, err := ratelimit.New(bucket, userOf, nil)
	if err != nil {
		fmt.Println(err)
		return
	}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/payments", svc.create)
	mux.HandleFunc("GET /v1/payments/{id}", svc.get)

	problems := apierror.Writer{TypeBase: "https://payments.example/problems/"}
	var h http.Handler = problems.ServeMux(mux)
	h = idem.Handler(h)
	h = limit.Handler(h)
	h = authenticate(h)
	h = problems.Recover(h)
	h = apierror.WithRequestID(problems.Handler(h)) // with chi: apierror.RequestIDs{From: …}.Handler

	do := func(method, path, key, body string) *http.Response {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("X-Example-User", "ann")
		r.Header.Set("Content-Type", "application/json")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result()
	}
	problem := func(resp *http.Response) string {
		p, _ := apierror.Parse(resp)
		return fmt.Sprintf("%d %s", resp.StatusCode, p.Type)
	}

	first := do("POST", "/v1/payments", "key-1", `{"amount":1250}`)
	retry := do("POST", "/v1/payments", "key-1", `{"amount":1250}`)
	var created, replayed payment
	_ = json.NewDecoder(first.Body).Decode(&created)
	_ = json.NewDecoder(retry.Body).Decode(&replayed)
	fmt.Println(first.StatusCode, first.Header.Get("Content-Type"), paymentIDs.Valid(created.ID))
	fmt.Println(retry.StatusCode, retry.Header.Get("Idempotent-Replayed"), replayed.ID == created.ID)

	fmt.Println(problem(do("GET", "/v1/payments/we_1", "", "")))
	resp := do("DELETE", "/v1/payments/"+created.ID, "key-2", "")
	fmt.Println(problem(resp), "Allow:", resp.Header.Get("Allow"))
	fmt.Println(problem(do("GET", "/v1/refunds", "", "")))
	fmt.Println(problem(do("POST", "/v1/payments", "key-3", `{"amount":"12.50"}`)))
	fmt.Println(problem(do("GET", "/v1/payments/"+created.ID, "", ""))) // the seventh request at once

	for _, ep := range []string{"we_1", "we_2"} {
		evs, _, _ := log.Range(context.Background(), ep, 1, 10, 10)
		fmt.Println(ep, len(evs), evs[0].Sequence, evs[0].Type)
	}
	// Output:
	// 201 application/json true
	// 201 true true
	// 404 https://payments.example/problems/payment_not_found
	// 405 https://payments.example/problems/method_not_allowed Allow: GET, HEAD
	// 404 https://payments.example/problems/route_not_found
	// 400 https://payments.example/problems/wrong_type
	// 429 https://payments.example/problems/rate_limited
	// we_1 1 1 payment.created
	// we_2 1 1 payment.created
}
