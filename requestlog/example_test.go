package requestlog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/requestlog"
)

// A service records its requests, and a caller reads its own back: the refused one is recorded too,
// and nobody's to read.
func Example() {
	ctx := context.Background()
	issuer, _ := apikey.NewIssuer(apikey.NewMemoryCredentialStore(), nil)
	creds, _ := issuer.Issue(ctx, apikey.Evaluation{Licensee: "lic_42"})
	auth, _ := apikey.NewAuthenticator(issuer, nil)

	store, _ := requestlog.NewMemoryStore(nil)
	reqlog, err := requestlog.New(&requestlog.Options{Store: store})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reqlog.Close(ctx) // at shutdown: writes what is buffered
	reads, _ := requestlog.NewRequestsHandler(store, apikey.RequestScope, nil)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/orders", func(w http.ResponseWriter, r *http.Request) {
		apierror.WriteJSON(w, r, http.StatusCreated, map[string]string{"id": "ord_1"})
	})
	reads.Register(mux, "v1")
	problems := apierror.Writer{}
	h := apierror.WithRequestID(reqlog.Handler(auth.Handler(problems.ServeMux(mux))))

	do := func(method, path, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(`{"amount":1250}`))
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	do("POST", "/v1/orders", creds.APIKey)
	do("POST", "/v1/orders", "") // refused: 401
	_ = reqlog.Flush(ctx)        // the flusher would write them within a second anyway
	fmt.Printf("%+v\n", reqlog.Stats())

	var list struct {
		Data []struct {
			APIKey string `json:"api_key"`
			Route  string `json:"route"`
			Status int    `json:"status"`
		} `json:"data"`
	}
	_ = json.Unmarshal(do("GET", "/v1/requests", creds.APIKey).Body.Bytes(), &list)
	for _, e := range list.Data {
		fmt.Println(e.Status, e.Route, e.APIKey == creds.KeyID)
	}
	// Output:
	// {Recorded:2 Dropped:0 Written:2 Failed:0 Retried:0 Pruned:0}
	// 201 POST /v1/orders true
}
