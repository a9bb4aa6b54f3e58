package apierror_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

func TestParseQuery(t *testing.T) {
	tests := []struct {
		name, query string
		want        map[string][]string
		badName     string // the located parameter of the 400; empty when the query parses
	}{
		{"empty", "", map[string][]string{}, ""},
		{"plain", "from=1&to=5&to=6", map[string][]string{"from": {"1"}, "to": {"5", "6"}}, ""},
		{"escapes and plus", "q=a%20b+c&x%5B%5D=1", map[string][]string{"q": {"a b c"}, "x[]": {"1"}}, ""},
		{"empty pairs skipped", "&a=1&&", map[string][]string{"a": {"1"}}, ""},
		{"bad escape in a value", "from=1&to=%zz", nil, "to"},
		{"truncated escape", "to=5%2", nil, "to"},
		{"bad escape in a name", "t%zzo=5", nil, "t%zzo"},
		{"semicolon", "from=1;to=5", nil, "from"},
		{"not UTF-8", "to=%ff", nil, "to"},
		{"control characters in a bad name", "%0a%zz=1", nil, "%0a%zz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/x?"+tt.query, nil)
			vals, err := apierror.ParseQuery(r)
			if tt.badName == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, map[string][]string(vals))
				return
			}
			var p *apierror.Error
			require.ErrorAs(t, err, &p)
			require.Equal(t, http.StatusBadRequest, p.Status)
			require.Equal(t, apierror.CodeQueryMalformed, p.Code)
			require.Equal(t, apierror.LocationQuery, p.Errors[0].Location)
			require.Equal(t, tt.badName, p.Errors[0].Name)
			rec := httptest.NewRecorder()
			apierror.Write(rec, r, err)
			require.NoError(t, apierror.CheckResponse(rec.Result()))
		})
	}
}

// ParseQuery never panics, and whatever it accepts is exactly what url.ParseQuery reads from a query
// without a ';'; whatever it refuses is a located 400.
func FuzzParseQuery(f *testing.F) {
	for _, seed := range []string{"", "a=1&b=2", "to=%zz", "a;b", "%ff=1", "q=a+b%20c&&x", "=1&a="} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := &http.Request{URL: &url.URL{RawQuery: raw}}
		vals, err := apierror.ParseQuery(r)
		if err != nil {
			var p *apierror.Error
			require.ErrorAs(t, err, &p)
			require.Equal(t, http.StatusBadRequest, p.Status)
			for _, v := range p.Errors {
				require.Equal(t, apierror.LocationQuery, v.Location)
				require.NotEmpty(t, v.Name)
				require.True(t, utf8.ValidString(v.Name))
			}
			return
		}
		want, werr := url.ParseQuery(raw)
		require.NoError(t, werr, "accepted what net/url refuses: %q", raw)
		require.Equal(t, len(want), len(vals))
		for k, v := range want {
			require.Equal(t, v, vals[k])
		}
	})
}
