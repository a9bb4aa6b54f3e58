package sandbox_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/webhook/producer"
)

// call serves one request with an API key and a fixed request ID, so the output is stable.
func call(h http.Handler, method, path, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	exampleRequestID(h).ServeHTTP(rec, r)
	return rec
}

// exampleRequestID stands in for apierror.WithRequestID, whose IDs are fresh and random, so that the
// examples' output is stable.
func exampleRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(apierror.HeaderRequestID, "req_example")
		h.ServeHTTP(w, r.WithContext(apierror.NewRequestIDContext(r.Context(), "req_example")))
	})
}

// One build serves both environments: the controls and sandbox-only behaviour answer sandbox keys,
// and a production key cannot tell they exist.
func Example() {
	ctx := context.Background()
	issuer, err := apikey.NewIssuer(nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, _ := issuer.Issue(ctx, apikey.Evaluation{Licensee: "lic_42"})
	live, _ := issuer.Issue(ctx, apikey.Evaluation{Licensee: "lic_42", Environment: apikey.Live})

	faults := &sandbox.FaultTable{} // the webhook producer's FaultTransport reads it
	controls, err := sandbox.NewControls(sandbox.Hooks{
		SetFaults: func(_ context.Context, p apikey.Principal, id string, f sandbox.Faults) error {
			if id != "we_1" { // the application checks that p owns the endpoint
				return sandbox.ErrUnknownEndpoint
			}
			return faults.Set(id, f)
		},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/sandbox/", controls)
	mux.HandleFunc("GET /v1/orders", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "in the sandbox:", sandbox.InSandbox(r))
	})
	auth, err := apikey.NewAuthenticator(issuer, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	h := auth.Handler(mux)

	fmt.Print(call(h, "GET", "/v1/orders", sb.APIKey, "").Body)
	fmt.Print(call(h, "GET", "/v1/orders", live.APIKey, "").Body)
	fmt.Println(call(h, "PUT", "/v1/sandbox/webhook_endpoints/we_1/faults", sb.APIKey, `{"drop":0.5}`).Code, faults.FaultsFor("we_1").Drop)
	fmt.Println(call(h, "PUT", "/v1/sandbox/webhook_endpoints/we_1/faults", live.APIKey, `{"drop":1}`).Code, faults.FaultsFor("we_1").Drop)
	// Output:
	// in the sandbox: true
	// in the sandbox: false
	// 200 0.5
	// 404 0.5
}

// Production keys cannot reach, or even detect, the sandbox controls.
func ExampleControls() {
	issuer, err := apikey.NewIssuer(nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, _ := issuer.Issue(context.Background(), apikey.Evaluation{Licensee: "lic_42"})
	live, _ := issuer.Issue(context.Background(), apikey.Evaluation{Licensee: "lic_42", Environment: apikey.Live})
	faults := &sandbox.FaultTable{}
	controls, err := sandbox.NewControls(sandbox.Hooks{
		SetFaults: func(_ context.Context, _ apikey.Principal, id string, f sandbox.Faults) error {
			if id != "we_1" {
				return sandbox.ErrUnknownEndpoint
			}
			return faults.Set(id, f)
		},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	auth, err := apikey.NewAuthenticator(issuer, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	h := auth.Handler(controls)

	rec := call(h, "PUT", "/v1/sandbox/webhook_endpoints/we_1/faults", sb.APIKey, `{"drop":0.2,"reorder":0.1}`)
	fmt.Println(rec.Code, faults.FaultsFor("we_1").Drop)
	rec = call(h, "PUT", "/v1/sandbox/webhook_endpoints/we_1/faults", sb.APIKey, `{"drop":1.5}`)
	fmt.Println(rec.Code, rec.Body.String())
	rec = call(h, "PUT", "/v1/sandbox/webhook_endpoints/we_1/faults", live.APIKey, `{"drop":0.2}`)
	fmt.Println(rec.Code)
	// Output:
	// 200 0.2
	// 400 {"type":"https://svcplatform.dev/problems/out_of_range","title":"Bad Request","status":400,"detail":"body /drop: must be a rate between 0 and 1","code":"out_of_range","request_id":"req_example","errors":[{"location":"body","pointer":"/drop","code":"out_of_range","detail":"must be a rate between 0 and 1"}]}
	// 404
}

// FaultTransport drops a delivery: the producer sees 200, the consumer sees nothing. The
// producer.Dispatcher tags each delivery's context with its endpoint; this example does by hand.
func ExampleFaultTransport() {
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("consumer received", r.Header.Get("X-SVC-Sequence"))
	}))
	defer consumer.Close()
	faults := &sandbox.FaultTable{}
	_ = faults.Set("we_1", sandbox.Faults{Drop: 1})
	tr, err := sandbox.NewFaultTransport(nil, faults, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	for seq, endpoint := range []string{"we_1", "we_2"} {
		ctx := producer.NewEndpointIDContext(context.Background(), endpoint)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, consumer.URL, strings.NewReader(`{}`))
		req.Header.Set("X-SVC-Sequence", fmt.Sprint(seq+1))
		resp, _ := client.Do(req)
		resp.Body.Close()
		fmt.Println(endpoint, resp.StatusCode, resp.Header.Get(sandbox.HeaderSandboxFault))
	}
	// Output:
	// we_1 200 drop
	// consumer received 2
	// we_2 200
}
