package versioning_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/versioning/versiontest"
)

// Each transform of the fixture has a golden test: newer JSON in, older JSON out.
func TestChangesGolden(t *testing.T) {
	versiontest.Golden(t, fixtureRegistry(t), "testdata/changes")
}

func canon(t *testing.T, s string) string {
	t.Helper()
	b, err := versiontest.Canonical([]byte(s))
	require.NoError(t, err)
	return string(b)
}

func TestTransformResponseChain(t *testing.T) {
	reg := fixtureRegistry(t)
	list := `{"object":"list","has_more":true,"data":[` + orderJSON + `]}`
	cases := []struct {
		name, version, in, want string
	}{
		{"newest is untouched", "v3", orderJSON, orderJSON},
		{"one step: amount flattened", "v2", orderJSON,
			`{"id":"ord_1","object":"order","account":"acc_1","side":"buy","amount":"10.50","currency":"EUR","status":"created","created":1767225600}`},
		{"two steps: amount flattened, side renamed", "v1", orderJSON,
			`{"id":"ord_1","object":"order","account":"acc_1","direction":"buy","amount":"10.50","currency":"EUR","status":"created","created":1767225600}`},
		{"two steps on a list: resources and envelope", "v1", list,
			`{"object":"list","more":true,"data":[{"id":"ord_1","object":"order","account":"acc_1","direction":"buy","amount":"10.50","currency":"EUR","status":"created","created":1767225600}]}`},
		{"top-level array: only scoped changes apply", "v1", `[` + orderJSON + `]`,
			`[{"id":"ord_1","object":"order","account":"acc_1","direction":"buy","amount":"10.50","currency":"EUR","status":"created","created":1767225600}]`},
		{"other resources untouched", "v1", `{"object":"account","side":"x","amount":{"value":"1"}}`,
			`{"object":"account","side":"x","amount":{"value":"1"}}`},
		{"scalar body untouched", "v1", `"ok"`, `"ok"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := reg.TransformResponse([]byte(tc.in), tc.version)
			require.NoError(t, err)
			require.Equal(t, canon(t, tc.want), canon(t, string(out)))
		})
	}
}

func TestTransformResponseFraming(t *testing.T) {
	reg := fixtureRegistry(t)
	t.Run("numbers keep every digit", func(t *testing.T) {
		in := `{"object":"order","side":"buy","qty":123456789012345678901234567890,"rate":0.1000000000000000055511151231257827}`
		out, err := reg.TransformResponse([]byte(in), "v1")
		require.NoError(t, err)
		require.Contains(t, string(out), `"qty":123456789012345678901234567890`)
		require.Contains(t, string(out), `"rate":0.1000000000000000055511151231257827`)
	})
	t.Run("no HTML escaping", func(t *testing.T) {
		out, err := reg.TransformResponse([]byte(`{"object":"order","side":"<b>&</b>"}`), "v1")
		require.NoError(t, err)
		require.Equal(t, `{"direction":"<b>&</b>","object":"order"}`, string(out))
	})
	t.Run("trailing newline kept", func(t *testing.T) {
		out, err := reg.TransformResponse([]byte("{\"object\":\"order\",\"side\":\"buy\"}\n"), "v1")
		require.NoError(t, err)
		require.Equal(t, "{\"direction\":\"buy\",\"object\":\"order\"}\n", string(out))
	})
	t.Run("empty body", func(t *testing.T) {
		out, err := reg.TransformResponse(nil, "v1")
		require.NoError(t, err)
		require.Empty(t, out)
	})
	t.Run("not JSON", func(t *testing.T) {
		_, err := reg.TransformResponse([]byte(`{"object":`), "v1")
		require.Error(t, err)
		_, err = reg.TransformResponse([]byte(`{} {}`), "v1")
		require.Error(t, err)
	})
	t.Run("unknown version", func(t *testing.T) {
		_, err := reg.TransformResponse([]byte(`{}`), "v9")
		require.ErrorIs(t, err, versioning.ErrUnknownVersion)
	})
}

func TestTransformRequestChain(t *testing.T) {
	reg := fixtureRegistry(t)
	cases := []struct {
		name, version, in, want string
	}{
		{"newest is untouched", "v3", `{"side":"buy","amount":{"value":"1","currency":"EUR"}}`,
			`{"side":"buy","amount":{"value":"1","currency":"EUR"}}`},
		{"v2 body upgraded", "v2", `{"account":"acc_1","side":"buy","amount":"10.50","currency":"EUR"}`,
			`{"account":"acc_1","side":"buy","amount":{"value":"10.50","currency":"EUR"}}`},
		{"v1 body upgraded oldest first", "v1", `{"account":"acc_1","direction":"buy","amount":"10.50","currency":"EUR"}`,
			`{"account":"acc_1","side":"buy","amount":{"value":"10.50","currency":"EUR"}}`},
		{"array body untouched", "v1", `[{"direction":"buy"}]`, `[{"direction":"buy"}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := reg.TransformRequest([]byte(tc.in), tc.version)
			require.NoError(t, err)
			require.Equal(t, canon(t, tc.want), canon(t, string(out)))
		})
	}
}

func TestRenderEvent(t *testing.T) {
	reg := fixtureRegistry(t)
	data := `{"object":` + orderJSON + `}`
	cases := []struct {
		name     string
		ev       versioning.EventShape
		to       string
		want     versioning.EventShape
		wantData string
	}{
		{"same version", versioning.EventShape{Version: "v3", Type: "order.created", Data: json.RawMessage(data)}, "v3",
			versioning.EventShape{Version: "v3", Type: "order.created"}, data},
		{"empty target keeps it", versioning.EventShape{Version: "v3", Type: "order.created", Data: json.RawMessage(data)}, "",
			versioning.EventShape{Version: "v3", Type: "order.created"}, data},
		{"to v2: type renamed, amount flattened", versioning.EventShape{Version: "v3", Type: "order.created", Data: json.RawMessage(data)}, "v2",
			versioning.EventShape{Version: "v2", Type: "order.placed"},
			`{"object":{"id":"ord_1","object":"order","account":"acc_1","side":"buy","amount":"10.50","currency":"EUR","status":"created","created":1767225600}}`},
		{"to v1: and side renamed", versioning.EventShape{Version: "v3", Type: "order.created", Data: json.RawMessage(data)}, "v1",
			versioning.EventShape{Version: "v1", Type: "order.placed"},
			`{"object":{"id":"ord_1","object":"order","account":"acc_1","direction":"buy","amount":"10.50","currency":"EUR","status":"created","created":1767225600}}`},
		{"stored at v2, rendered at v1: only v2's changes", versioning.EventShape{Version: "v2", Type: "order.placed",
			Data: json.RawMessage(`{"object":{"object":"order","side":"sell","amount":"3","currency":"EUR"}}`)}, "v1",
			versioning.EventShape{Version: "v1", Type: "order.placed"},
			`{"object":{"object":"order","direction":"sell","amount":"3","currency":"EUR"}}`},
		{"never upgraded", versioning.EventShape{Version: "v1", Type: "order.placed", Data: json.RawMessage(`{"object":{"direction":"buy"}}`)}, "v3",
			versioning.EventShape{Version: "v1", Type: "order.placed"}, `{"object":{"direction":"buy"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reg.RenderEvent(tc.ev, tc.to)
			require.NoError(t, err)
			require.Equal(t, tc.want.Version, got.Version)
			require.Equal(t, tc.want.Type, got.Type)
			require.Equal(t, canon(t, tc.wantData), canon(t, string(got.Data)))
		})
	}
	t.Run("unknown versions", func(t *testing.T) {
		_, err := reg.RenderEvent(versioning.EventShape{Version: "v9", Type: "x", Data: json.RawMessage(`{}`)}, "v1")
		require.ErrorIs(t, err, versioning.ErrUnknownVersion)
		_, err = reg.RenderEvent(versioning.EventShape{Version: "v3", Type: "x", Data: json.RawMessage(`{}`)}, "v9")
		require.ErrorIs(t, err, versioning.ErrUnknownVersion)
	})
	t.Run("data not an object", func(t *testing.T) {
		_, err := reg.RenderEvent(versioning.EventShape{Version: "v3", Type: "x", Data: json.RawMessage(`[1]`)}, "v1")
		require.Error(t, err)
	})
	t.Run("no event change on the path keeps the bytes", func(t *testing.T) {
		reg, err := versioning.NewRegistry(
			[]versioning.Version{{Name: "v1"}, {Name: "v2"}},
			[]versioning.Change{{Name: "list_renamed", Version: "v2", Response: func(map[string]any) error { return nil }}})
		require.NoError(t, err)
		raw := json.RawMessage(`{"b":1, "a":2}`)
		got, err := reg.RenderEvent(versioning.EventShape{Version: "v2", Type: "t", Data: raw}, "v1")
		require.NoError(t, err)
		require.Equal(t, "v1", got.Version)
		require.Equal(t, string(raw), string(got.Data))
	})
}

// Within one version, changes undo in reverse registration order for responses and apply in
// registration order for requests, like migrations down and up.
func TestChangeOrderWithinVersion(t *testing.T) {
	var trail []string
	mk := func(name string) versioning.Change {
		return versioning.Change{Name: name, Version: "v2",
			Response: func(b map[string]any) error { trail = append(trail, "resp:"+name); return nil },
			Request:  func(b map[string]any) error { trail = append(trail, "req:"+name); return nil },
			Event:    func(p *versioning.Payload) error { trail = append(trail, "event:"+name); return nil },
		}
	}
	reg, err := versioning.NewRegistry([]versioning.Version{{Name: "v1"}, {Name: "v2"}}, []versioning.Change{mk("first"), mk("second")})
	require.NoError(t, err)
	_, err = reg.TransformResponse([]byte(`{}`), "v1")
	require.NoError(t, err)
	_, err = reg.TransformRequest([]byte(`{}`), "v1")
	require.NoError(t, err)
	_, err = reg.RenderEvent(versioning.EventShape{Version: "v2", Type: "t", Data: json.RawMessage(`{}`)}, "v1")
	require.NoError(t, err)
	require.Equal(t, []string{"resp:second", "resp:first", "req:first", "req:second", "event:second", "event:first"}, trail)
}

func TestTransformErrors(t *testing.T) {
	boom := errors.New("boom")
	located := apierror.Invalid(apierror.Body("/amount", "invalid_amount", "must be a decimal string"))
	reg, err := versioning.NewRegistry([]versioning.Version{{Name: "v1"}, {Name: "v2"}}, []versioning.Change{{
		Name: "breaks", Version: "v2", Object: "order",
		Response: func(map[string]any) error { return boom },
		Request:  func(map[string]any) error { return located },
		Event: func(p *versioning.Payload) error {
			p.Data = nil
			return nil
		},
	}})
	require.NoError(t, err)
	_, err = reg.TransformResponse([]byte(`{"object":"order"}`), "v1")
	require.ErrorIs(t, err, versioning.ErrTransform)
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "breaks")
	_, err = reg.TransformRequest([]byte(`{}`), "v1")
	var p *apierror.Error
	require.ErrorAs(t, err, &p, "a located problem from a request transform stays reachable")
	require.Equal(t, "invalid_amount", p.Code)
	_, err = reg.RenderEvent(versioning.EventShape{Version: "v2", Type: "t", Data: json.RawMessage(`{}`)}, "v1")
	require.ErrorIs(t, err, versioning.ErrTransform)
	t.Run("unencodable value", func(t *testing.T) {
		reg, err := versioning.NewRegistry([]versioning.Version{{Name: "v1"}, {Name: "v2"}}, []versioning.Change{{
			Name: "bad_number", Version: "v2",
			Response: func(b map[string]any) error { b["n"] = json.Number("not a number"); return nil },
		}})
		require.NoError(t, err)
		_, err = reg.TransformResponse([]byte(`{}`), "v1")
		require.ErrorIs(t, err, versioning.ErrTransform)
	})
}

func TestChangeApplyAlone(t *testing.T) {
	c := fixtureChanges()[0] // order_side_renamed
	out, err := c.ApplyResponse([]byte(`{"object":"order","side":"buy"}`))
	require.NoError(t, err)
	require.Equal(t, `{"direction":"buy","object":"order"}`, string(out))
	out, err = c.ApplyRequest([]byte(`{"direction":"buy"}`))
	require.NoError(t, err)
	require.Equal(t, `{"side":"buy"}`, string(out))
	typ, data, err := c.ApplyEvent("order.placed", []byte(`{"object":{"object":"order","side":"buy"}}`))
	require.NoError(t, err)
	require.Equal(t, "order.placed", typ)
	require.Equal(t, `{"object":{"direction":"buy","object":"order"}}`, string(data))
	_, err = c.ApplyResponse([]byte(`nope`))
	require.Error(t, err)
	_, err = c.ApplyRequest([]byte(`nope`))
	require.Error(t, err)
	_, _, err = c.ApplyEvent("t", []byte(`nope`))
	require.Error(t, err)
}
