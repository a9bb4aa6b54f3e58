package versioning_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/versioning"
)

// TestZeroValues: a Registry or Router nobody built returns an error wrapping ErrNotBuilt from every
// method with an error result, on the zero value and on a nil pointer, instead of panicking or
// answering as if it knew no version.
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	req := func() *http.Request { return httptest.NewRequest(http.MethodGet, "/v1/orders", nil) }
	shape := versioning.EventShape{Version: "v2", Type: "order.created", Data: []byte(`{}`)}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Registry.Compare", func() error { _, err := (&versioning.Registry{}).Compare("v1", "v2"); return err }},
		{"Registry.TransformResponse", func() error { _, err := (&versioning.Registry{}).TransformResponse([]byte(`{}`), "v1"); return err }},
		{"Registry.TransformRequest", func() error { _, err := (&versioning.Registry{}).TransformRequest([]byte(`{}`), "v1"); return err }},
		{"Registry.RenderEvent", func() error { _, err := (&versioning.Registry{}).RenderEvent(shape, "v1"); return err }},
		{"nil Registry.Compare", func() error { _, err := (*versioning.Registry)(nil).Compare("v1", "v2"); return err }},
		{"nil Registry.RenderEvent", func() error { _, err := (*versioning.Registry)(nil).RenderEvent(shape, "v1"); return err }},
		{"Router.Decide", func() error { _, err := (&versioning.Router{}).Decide(req()); return err }},
		{"Router.Pin", func() error { _, err := (&versioning.Router{}).Pin(ctx, "lic_1"); return err }},
		{"Router.Upgrade", func() error { _, err := (&versioning.Router{}).Upgrade(ctx, "lic_1", "v2"); return err }},
		{"Router.Rollback", func() error { _, err := (&versioning.Router{}).Rollback(ctx, "lic_1"); return err }},
		{"nil Router.Rollback", func() error { _, err := (*versioning.Router)(nil).Rollback(ctx, "lic_1"); return err }},
		{"Router.Repin", func() error { _, err := (&versioning.Router{}).Repin(ctx, "lic_1", "v1"); return err }},
		{"Router.Unpin", func() error { return (&versioning.Router{}).Unpin(ctx, "lic_1") }},
		{"Router.Pins", func() error { _, err := (&versioning.Router{}).Pins(ctx, "v1", "", 10); return err }},
		{"Router.RenderEvent", func() error { _, err := (&versioning.Router{}).RenderEvent(ctx, "lic_1", shape); return err }},
		{"nil Router.Decide", func() error { _, err := (*versioning.Router)(nil).Decide(req()); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.call() })
			require.ErrorIs(t, err, versioning.ErrNotBuilt)
		})
	}
}

// A zero Router's handlers answer the opaque 500 and never run next.
func TestZeroRouterHandlersAnswer500(t *testing.T) {
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("next ran") })
	for name, h := range map[string]http.Handler{
		"Handler":              (&versioning.Router{}).Handler(next),
		"PinHandler":           (&versioning.Router{}).PinHandler(),
		"nil Handler":          (*versioning.Router)(nil).Handler(next),
		"nil PinHandler":       (*versioning.Router)(nil).PinHandler(),
		"ChangelogHandler":     (&versioning.Router{}).ChangelogHandler(),
		"nil ChangelogHandler": (*versioning.Router)(nil).ChangelogHandler(),
	} {
		t.Run(name, func(t *testing.T) {
			w := httptest.NewRecorder()
			require.NotPanics(t, func() { h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/version_pin", nil)) })
			require.Equal(t, http.StatusInternalServerError, w.Code)
		})
	}
}

// The methods without an error result answer as an empty registry would.
func TestZeroRegistryWithoutErrorResult(t *testing.T) {
	for _, reg := range []*versioning.Registry{{}, nil} {
		require.NotPanics(t, func() {
			require.Zero(t, reg.Newest())
			_, ok := reg.Lookup("v1")
			require.False(t, ok)
			_, ok = reg.NewestReleased(testNow)
			require.False(t, ok)
			require.Empty(t, reg.Versions())
			require.Empty(t, reg.Supported(testNow))
			require.Empty(t, reg.Changes("v1"))
			require.Empty(t, reg.AllChanges())
		})
	}
	require.Nil(t, (*versioning.Router)(nil).Registry())
}
