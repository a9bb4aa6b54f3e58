package apikey

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/apierror"
)

// FuzzAuthorization feeds arbitrary Authorization headers to the Authenticator: it must never panic,
// never admit anything but the issued key, always answer a conforming 401, and never echo the header.
func FuzzAuthorization(f *testing.F) {
	iss := must(NewIssuer(nil, nil))
	c, err := iss.Issue(context.Background(), Evaluation{Licensee: "lic_a"})
	if err != nil {
		f.Fatal(err)
	}
	auth := must(NewAuthenticator(iss, nil))
	f.Add("Bearer " + c.APIKey)
	f.Add("bearer  " + c.APIKey)
	f.Add("Bearer " + c.APIKey[:len(c.APIKey)-1])
	f.Add("Basic dXNlcjpwYXNz")
	f.Add("Bearer")
	f.Add("")
	f.Add("Bearer sk_live_" + strings.Repeat("a", 40))
	f.Add("Bearer \x00\xff")
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header["Authorization"] = []string{header}
		p, err := auth.Authenticate(r)
		if err == nil {
			if strings.TrimSpace(strings.TrimSpace(header)[len("Bearer"):]) != c.APIKey || p.Licensee != "lic_a" {
				t.Fatalf("admitted something other than the issued key")
			}
			return
		}
		var pe *apierror.Error
		if !errors.As(err, &pe) || pe.Status != http.StatusUnauthorized {
			t.Fatalf("not a 401 problem: %v", err)
		}
		rec := httptest.NewRecorder()
		apierror.Write(rec, r, err)
		if cErr := apierror.Check(rec.Code, rec.Header(), rec.Body.Bytes()); cErr != nil {
			t.Fatalf("non-conforming 401: %v", cErr)
		}
		if tok := strings.TrimSpace(header); len(tok) >= 12 && (strings.Contains(rec.Body.String(), tok) || strings.Contains(err.Error(), tok)) {
			t.Fatalf("the credential was echoed")
		}
	})
}
