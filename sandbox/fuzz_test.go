package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
)

// FuzzFaultsBody feeds arbitrary bodies to PUT …/faults: the answer is 200 with valid faults, or a
// conforming 400, and the hook sees only valid faults.
func FuzzFaultsBody(f *testing.F) {
	var table FaultTable
	c := must(NewControls(Hooks{SetFaults: func(_ context.Context, _ apikey.Principal, id string, fl Faults) error {
		if err := fl.Validate(); err != nil {
			return errors.New("hook got invalid faults")
		}
		return table.Set(id, fl)
	}}, nil))
	sb := apikey.Principal{Licensee: "lic_a", Environment: apikey.Sandbox}
	f.Add(`{"drop":0.2,"duplicate":0.1,"reorder":0.1,"bad_signature":0.05,"delay_ms":0}`)
	f.Add(`{"delay":1,"delay_ms":30000}`)
	f.Add(`{"drop":1e400}`)
	f.Add(`{"drop":-0}`)
	f.Add(`{"drop":"1"}`)
	f.Add(`[]`)
	f.Add(`{"drop":0.5}{}`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest(http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/faults", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r = r.WithContext(apikey.NewContext(r.Context(), sb))
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, r)
		switch rec.Code {
		case http.StatusOK:
			var got Faults
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("200 with an unreadable body: %v", err)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("200 with invalid faults: %v", err)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if err := apierror.Check(rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
				t.Fatalf("non-conforming %d: %v", rec.Code, err)
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
	})
}

// FuzzTriggerBody feeds arbitrary bodies to POST …/events: 201 with a valid event type and an object
// for data, or a conforming 400.
func FuzzTriggerBody(f *testing.F) {
	c := must(NewControls(Hooks{Trigger: func(_ context.Context, _ apikey.Principal, req TriggerRequest) ([]Triggered, error) {
		if !validEventType(req.Type) || !json.Valid(req.Data) || !strings.HasPrefix(strings.TrimSpace(string(req.Data)), "{") {
			return nil, errors.New("hook got an invalid request")
		}
		return nil, nil
	}}, nil))
	sb := apikey.Principal{Licensee: "lic_a", Environment: apikey.Sandbox}
	f.Add(``)
	f.Add(`{}`)
	f.Add(`{"type":"order.created","data":{"id":"ord_1"},"endpoint":"we_1"}`)
	f.Add(`{"type":"a.b","data":null}`)
	f.Add(`{"type":"A.b"}`)
	f.Add(`{"data":"x"}`)
	f.Add(`{"type":"order.created"`)
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/sandbox/events", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r = r.WithContext(apikey.NewContext(r.Context(), sb))
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, r)
		switch rec.Code {
		case http.StatusCreated:
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if err := apierror.Check(rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
				t.Fatalf("non-conforming %d: %v", rec.Code, err)
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
	})
}
