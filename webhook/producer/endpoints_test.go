package producer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver/drivertest"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

func TestEndpointValidate(t *testing.T) {
	secret := webhook.NewSecret()
	good := producer.Endpoint{ID: "we_a", URL: "https://a.example/hook", Owner: "lic_1", Secrets: []string{secret}}
	require.NoError(t, good.Validate())
	for _, tc := range []struct {
		name string
		edit func(*producer.Endpoint)
	}{
		{"no ID", func(e *producer.Endpoint) { e.ID = "" }},
		{"no owner", func(e *producer.Endpoint) { e.Owner = "" }},
		{"no secret", func(e *producer.Endpoint) { e.Secrets = nil }},
		{"empty secret during rotation", func(e *producer.Endpoint) { e.Secrets = []string{secret, ""} }},
		{"relative URL", func(e *producer.Endpoint) { e.URL = "/hook" }},
		{"other scheme", func(e *producer.Endpoint) { e.URL = "ftp://a.example/hook" }},
		{"unparsable URL", func(e *producer.Endpoint) { e.URL = "https://a b\x7f" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := good
			ep.Secrets = append([]string(nil), good.Secrets...)
			tc.edit(&ep)
			err := ep.Validate()
			require.ErrorIs(t, err, producer.ErrInvalidEndpoint)
			require.NotContains(t, err.Error(), secret, "errors never echo a secret")
		})
	}
}

func TestMemoryEndpoints(t *testing.T) {
	ctx := context.Background()
	var m memstore.Endpoints // the zero value is ready
	secrets := []string{webhook.NewSecret()}
	require.NoError(t, m.Put(producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: secrets}))
	secrets[0] = "mutated by the caller"
	ep, err := m.Lookup(ctx, "we_a")
	require.NoError(t, err)
	require.NotEqual(t, "mutated by the caller", ep.Secrets[0], "Put keeps its own copy")
	ep.Secrets[0] = "mutated by a reader"
	again, err := m.Lookup(ctx, "we_a")
	require.NoError(t, err)
	require.NotEqual(t, "mutated by a reader", again.Secrets[0], "Lookup hands out a copy")

	// Rotation: Put again with both secrets.
	next := webhook.NewSecret()
	require.NoError(t, m.Put(producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{next, again.Secrets[0]}}))
	ep, err = m.Lookup(ctx, "we_a")
	require.NoError(t, err)
	require.Len(t, ep.Secrets, 2)

	require.ErrorIs(t, m.Put(producer.Endpoint{ID: "we_bad"}), producer.ErrInvalidEndpoint)
	m.Delete("we_a")
	_, err = m.Lookup(ctx, "we_a")
	require.ErrorIs(t, err, producer.ErrUnknownEndpoint)

	_, err = memstore.NewEndpoints(producer.Endpoint{ID: "x"})
	require.ErrorIs(t, err, producer.ErrInvalidEndpoint)
}

func TestMemoryEndpointsConcurrent(t *testing.T) {
	m := mustEndpoints(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				id := fmt.Sprintf("we_%d_%d", g, i)
				if err := m.Put(producer.Endpoint{ID: id, URL: "https://a.example/", Owner: "lic", Secrets: []string{"whsec_x"}}); err != nil {
					t.Error(err)
					return
				}
				if _, err := m.Lookup(context.Background(), id); err != nil {
					t.Error(err)
					return
				}
				m.Delete(id)
			}
		})
	}
	wg.Wait()
}

func TestMemoryEndpointsConformance(t *testing.T) {
	drivertest.RunEndpoints(t, func(t *testing.T) drivertest.Registry { return memoryRegistry{&memstore.Endpoints{}} })
}

// memoryRegistry gives memstore.Endpoints' Put and Delete the context the suite's Registry passes.
type memoryRegistry struct{ *memstore.Endpoints }

func (m memoryRegistry) Put(_ context.Context, ep producer.Endpoint) error {
	return m.Endpoints.Put(ep)
}

func (m memoryRegistry) Delete(_ context.Context, id string) error {
	m.Endpoints.Delete(id)
	return nil
}
