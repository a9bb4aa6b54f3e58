package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

func ptr(s string) *string { return &s }

func TestCreateOrderRequestValidate(t *testing.T) {
	type loc struct{ pointer, code string }
	cases := []struct {
		name string
		in   createOrderRequest
		want []loc // nil: valid
	}{
		{"valid buy", createOrderRequest{ptr("acc_1"), ptr("buy")}, nil},
		{"valid sell, every allowed character", createOrderRequest{ptr("AZaz09_-"), ptr("sell")}, nil},
		{"64 characters", createOrderRequest{ptr(strings.Repeat("a", 64)), ptr("buy")}, nil},
		{"both missing", createOrderRequest{}, []loc{{"/account", apierror.CodeFieldMissing}, {"/side", apierror.CodeFieldMissing}}},
		{"empty account", createOrderRequest{ptr(""), ptr("buy")}, []loc{{"/account", CodeInvalidLength}}},
		{"65 characters", createOrderRequest{ptr(strings.Repeat("a", 65)), ptr("buy")}, []loc{{"/account", CodeInvalidLength}}},
		{"space", createOrderRequest{ptr("acc 1"), ptr("buy")}, []loc{{"/account", CodeInvalidFormat}}},
		{"non-ASCII letter", createOrderRequest{ptr("accé"), ptr("buy")}, []loc{{"/account", CodeInvalidFormat}}},
		{"slash", createOrderRequest{ptr("acc/1"), ptr("buy")}, []loc{{"/account", CodeInvalidFormat}}},
		{"side in capitals", createOrderRequest{ptr("acc_1"), ptr("BUY")}, []loc{{"/side", CodeInvalidEnum}}},
		{"unknown side and bad account", createOrderRequest{ptr("a!"), ptr("hold")},
			[]loc{{"/account", CodeInvalidFormat}, {"/side", CodeInvalidEnum}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.in.validate("/side")
			if tc.want == nil {
				require.NoError(t, err)
				o := newOrder(tc.in, time.Unix(1767225600, 0))
				require.True(t, strings.HasPrefix(o.ID, "ord_"))
				require.Equal(t, Order{ID: o.ID, Object: "order", Account: *tc.in.Account, Direction: *tc.in.Direction,
					Status: "created", Created: 1767225600}, o)
				return
			}
			var p *apierror.Error
			require.ErrorAs(t, err, &p)
			require.Equal(t, 400, p.Status)
			var got []loc
			for _, v := range p.Errors {
				require.Equal(t, apierror.LocationBody, v.Location)
				require.NotEmpty(t, v.Detail)
				got = append(got, loc{v.Pointer, v.Code})
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestNewIDIsUnique(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		id := orderIDs.New()
		require.Len(t, id, len("ord_")+26)
		require.False(t, seen[id])
		seen[id] = true
	}
}

// Each version's body is decoded in its own shape: v1's side and v2's direction, each unknown in the
// other version, and violations located at the member the client's version names.
func TestDecodeCreateOrderPerVersion(t *testing.T) {
	type loc struct{ pointer, code string }
	for _, tc := range []struct {
		name, version, body string
		want                []loc // nil: valid
	}{
		{"v1 side", "v1", `{"account":"acc_1","side":"buy"}`, nil},
		{"v2 direction", "v2", `{"account":"acc_1","direction":"sell"}`, nil},
		{"v1 missing side", "v1", `{"account":"acc_1"}`, []loc{{"/side", apierror.CodeFieldMissing}}},
		{"v2 missing direction", "v2", `{"account":"acc_1"}`, []loc{{"/direction", apierror.CodeFieldMissing}}},
		{"v1 bad side", "v1", `{"account":"acc_1","side":"hold"}`, []loc{{"/side", CodeInvalidEnum}}},
		{"v1 sends v2's member", "v1", `{"account":"acc_1","direction":"buy"}`, []loc{{"/direction", apierror.CodeUnknownField}}},
		{"v2 sends v1's member", "v2", `{"account":"acc_1","side":"buy"}`, []loc{{"/side", apierror.CodeUnknownField}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/"+tc.version+"/orders", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			in, err := decodeCreateOrder(r, tc.version)
			if tc.want == nil {
				require.NoError(t, err)
				require.NotNil(t, in.Direction)
				return
			}
			var p *apierror.Error
			require.ErrorAs(t, err, &p)
			var got []loc
			for _, v := range p.Errors {
				got = append(got, loc{v.Pointer, v.Code})
			}
			require.Equal(t, tc.want, got)
		})
	}
}
