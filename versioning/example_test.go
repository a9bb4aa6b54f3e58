package versioning_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/versioning"
)

// exampleRegistry is the API of the examples: v2 renamed the order's "direction" to "side".
func exampleRegistry() *versioning.Registry {
	reg, err := versioning.NewRegistry(
		[]versioning.Version{
			{
				Name:            "v1",
				Released:        time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
				Deprecated:      time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
				Sunset:          time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC),
				DeprecationLink: "https://docs.example.com/upgrade/v2",
			},
			{Name: "v2", Released: time.Date(2025, 10, 1, 0, 0, 0, 0, time.UTC)},
		},
		[]versioning.Change{{
			Name:        "order_side_renamed",
			Version:     "v2",
			Description: "An order's direction is called side.",
			Object:      "order",
			Response: func(order map[string]any) error {
				order["direction"] = order["side"]
				delete(order, "side")
				return nil
			},
			Request: func(body map[string]any) error {
				if d, ok := body["direction"]; ok {
					body["side"] = d
					delete(body, "direction")
				}
				return nil
			},
		}})
	if err != nil {
		panic(err)
	}
	return reg
}

// createOrder is the only handler: it reads and writes the newest (v2) shape.
func createOrder(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Side string `json:"side"`
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":"ord_1","object":"order","side":%q}`, in.Side)
}

func Example() {
	router, err := versioning.New(exampleRegistry(), &versioning.Options{
		Now: func() time.Time { return time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{version}/orders", createOrder)
	// In a service: apierror.WithRequestID, whose IDs are fresh and random; a fixed one here keeps the
	// output stable.
	srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		router.Handler(mux).ServeHTTP(w, r.WithContext(apierror.NewRequestIDContext(r.Context(), "req_example")))
	})

	for _, req := range []struct{ path, body string }{
		{"/v2/orders", `{"side":"buy"}`},
		{"/v1/orders", `{"direction":"sell"}`},
		{"/v3/orders", `{}`},
	} {
		r := httptest.NewRequest("POST", req.path, strings.NewReader(req.body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		fmt.Println(strings.TrimSpace(fmt.Sprint(req.path, " ", w.Code, " ", w.Header().Get("X-SVC-Version"))))
		for _, h := range []string{"Deprecation", "Sunset", "Link"} {
			for _, v := range w.Header().Values(h) {
				fmt.Printf("  %s: %s\n", h, v)
			}
		}
		fmt.Println(" ", strings.TrimSpace(w.Body.String()))
	}
	// Output:
	// /v2/orders 201 v2
	//   {"id":"ord_1","object":"order","side":"buy"}
	// /v1/orders 201 v1
	//   Deprecation: @1767225600
	//   Sunset: Wed, 01 Jul 2026 00:00:00 GMT
	//   Link: </v2/orders>; rel="successor-version"
	//   Link: <https://docs.example.com/upgrade/v2>; rel="deprecation"; type="text/html"
	//   {"direction":"sell","id":"ord_1","object":"order"}
	// /v3/orders 404
	//   {"type":"https://svcplatform.dev/problems/version_unknown","title":"Not Found","status":404,"detail":"version v3 is not supported; supported versions: v1, v2","code":"version_unknown","request_id":"req_example","errors":[{"location":"path","name":"version","code":"version_unknown","detail":"version v3 is not supported; supported versions: v1, v2"}],"supported_versions":["v1","v2"]}
}

// Pins: the first request pins a licensee to the newest version, a request on another version is
// refused naming the pin, and Repin (or Upgrade, forward only) moves it.
func ExampleRouter_pinning() {
	router, err := versioning.New(exampleRegistry(), &versioning.Options{
		Now: func() time.Time { return time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC) },
		// In a service: apikey.RequestScope, or the service's own conventions.CallerFunc.
		Licensee: func(r *http.Request) (string, error) { return r.Header.Get("X-Licensee"), nil },
	})
	if err != nil {
		panic(err)
	}
	srv := router.Handler(http.HandlerFunc(createOrder))
	call := func(path string) {
		r := httptest.NewRequest("POST", path, strings.NewReader(`{"side":"buy"}`))
		r.Header.Set("X-Licensee", "lic_42")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		var p struct {
			Code   string `json:"code"`
			Pinned string `json:"pinned_version"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &p)
		if p.Code == "" {
			fmt.Println(path, w.Code)
			return
		}
		fmt.Println(path, w.Code, p.Code, "pinned_version="+p.Pinned)
	}
	call("/v2/orders") // first use: pinned to v2, the newest
	call("/v1/orders")
	pin, _ := router.Repin(context.Background(), "lic_42", "v1") // support rolls the licensee back
	fmt.Println("pinned to", pin.Version)
	call("/v1/orders")
	_, err = router.Upgrade(context.Background(), "lic_42", "v2")
	fmt.Println("upgrade:", err)
	call("/v2/orders")
	// Output:
	// /v2/orders 201
	// /v1/orders 403 version_not_enabled pinned_version=v2
	// pinned to v1
	// /v1/orders 201
	// upgrade: <nil>
	// /v2/orders 201
}

// An upgrade may be rolled back, once, within the rollback window (72 hours unless
// Options.RollbackWindow says otherwise); the pin endpoint does the same for a POST of the previous
// version.
func ExampleRouter_Rollback() {
	now := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	router, err := versioning.New(exampleRegistry(), &versioning.Options{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	show := func(what string, p versioning.Pin, err error) {
		if err != nil {
			fmt.Println(what+":", err)
			return
		}
		fmt.Printf("%s: on %s, previous %q\n", what, p.Version, p.Previous)
	}
	p, err := router.Repin(ctx, "lic_42", "v1") // an integration written for v1
	show("pinned", p, err)
	p, err = router.Upgrade(ctx, "lic_42", "v2")
	show("upgrade", p, err)
	now = now.Add(time.Hour) // it breaks
	p, err = router.Rollback(ctx, "lic_42")
	show("rollback", p, err)
	_, err = router.Rollback(ctx, "lic_42")
	fmt.Println("again:", errors.Is(err, versioning.ErrNoRollback))
	p, err = router.Upgrade(ctx, "lic_42", "v2") // fixed: a new upgrade, a new window
	show("upgrade", p, err)
	now = now.Add(versioning.DefaultRollbackWindow)
	_, err = router.Rollback(ctx, "lic_42")
	fmt.Println(errors.Is(err, versioning.ErrRollbackExpired), err)
	// Output:
	// pinned: on v1, previous ""
	// upgrade: on v2, previous "v1"
	// rollback: on v1, previous "v2"
	// again: true
	// upgrade: on v2, previous "v1"
	// true versioning: the rollback window has closed: the upgrade from v1 to v2 became final at 2026-02-04T01:00:00Z
}

// The changelog endpoint lists the changes from their definitions, the same on every version.
func ExampleRouter_ChangelogHandler() {
	router, err := versioning.New(exampleRegistry(), &versioning.Options{
		Now: func() time.Time { return time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/{version}/changelog", router.ChangelogHandler())
	w := httptest.NewRecorder()
	router.Handler(mux).ServeHTTP(w, httptest.NewRequest("GET", "/v1/changelog", nil))
	fmt.Println(w.Code, w.Header().Get("X-SVC-Version"))
	fmt.Print(w.Body.String())
	// Output:
	// 200 v1
	// {"object":"list","data":[{"object":"api_version","version":"v2","released":1759276800,"changes":[{"name":"order_side_renamed","resource":"order","description":"An order's direction is called side."}]},{"object":"api_version","version":"v1","released":1735689600,"deprecated":1767225600,"sunset":1782864000,"changes":[]}]}
}

// Webhook payloads are produced at the newest version and rendered at each licensee's pin. With
// webhook/producer, the Render hook of the Dispatcher and the RangeHandler does this:
//
//	Render: func(ctx context.Context, ep producer.Endpoint, ev webhook.Event) (webhook.Event, error) {
//		out, err := router.RenderEvent(ctx, ep.Owner, versioning.EventShape{Version: ev.APIVersion, Type: ev.Type, Data: ev.Data})
//		ev.APIVersion, ev.Type, ev.Data = out.Version, out.Type, out.Data
//		return ev, err
//	},
func ExampleRegistry_RenderEvent() {
	reg := exampleRegistry()
	ev := versioning.EventShape{Version: "v2", Type: "order.created",
		Data: json.RawMessage(`{"object":{"id":"ord_1","object":"order","side":"buy","amount":"12345678901234567890.01"}}`)}
	out, err := reg.RenderEvent(ev, "v1")
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Version, out.Type, string(out.Data))
	// Output:
	// v1 order.created {"object":{"amount":"12345678901234567890.01","direction":"buy","id":"ord_1","object":"order"}}
}

// A registered version with no chain of changes from the newest is refused at construction, so
// every test and every start of a service that builds the registry fails.
func ExampleNewRegistry_noPath() {
	_, err := versioning.NewRegistry([]versioning.Version{{Name: "v1"}, {Name: "v2"}, {Name: "v3"}},
		[]versioning.Change{{Name: "order_side_renamed", Version: "v2"}})
	fmt.Println(errors.Is(err, versioning.ErrNoPath))
	fmt.Println(err)
	// Output:
	// true
	// versioning: no chain of changes from the newest version: v2 cannot be served: v3 introduces no change (declare one, even without functions)
}

// Who still calls a deprecated version, from the telemetry hook.
func ExampleUsageCounter() {
	var usage versioning.UsageCounter
	router, err := versioning.New(exampleRegistry(), &versioning.Options{
		Now:      func() time.Time { return time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC) },
		Licensee: func(r *http.Request) (string, error) { return r.Header.Get("X-Licensee"), nil },
		Hooks:    &versioning.Hooks{Decided: usage.Observe},
	})
	if err != nil {
		panic(err)
	}
	srv := router.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	if _, err := router.Repin(context.Background(), "lic_a", "v1"); err != nil { // an old integration
		panic(err)
	}
	for _, c := range []struct{ lic, path string }{{"lic_a", "/v1/x"}, {"lic_a", "/v1/y"}, {"lic_b", "/v2/x"}} {
		r := httptest.NewRequest("GET", c.path, nil)
		r.Header.Set("X-Licensee", c.lic)
		srv.ServeHTTP(httptest.NewRecorder(), r)
	}
	for _, rec := range usage.Users("v1", time.Time{}) {
		fmt.Println(rec.Licensee, rec.Version, rec.Requests, "requests,", rec.Deprecated, "while deprecated")
	}
	// Output:
	// lic_a v1 2 requests, 2 while deprecated
}
