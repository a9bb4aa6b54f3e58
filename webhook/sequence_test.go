package webhook

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

func TestParseSequence(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		err  error
	}{
		{"1", 1, nil},
		{"42", 42, nil},
		{"9223372036854775807", MaxSequence, nil},
		{"", 0, ErrMissingSequence},
		{"0", 0, ErrMalformedSequence},
		{"007", 0, ErrMalformedSequence},
		{"+7", 0, ErrMalformedSequence},
		{"-7", 0, ErrMalformedSequence},
		{" 7", 0, ErrMalformedSequence},
		{"7 ", 0, ErrMalformedSequence},
		{"7.0", 0, ErrMalformedSequence},
		{"1e3", 0, ErrMalformedSequence},
		{"0x10", 0, ErrMalformedSequence},
		{"9223372036854775808", 0, ErrMalformedSequence},
		{"18446744073709551616", 0, ErrMalformedSequence},
		{"seven", 0, ErrMalformedSequence},
	}
	for _, tc := range cases {
		t.Run(strconv.Quote(tc.in), func(t *testing.T) {
			got, err := ParseSequence(tc.in)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestCheckSequence(t *testing.T) {
	ev := &Event{Sequence: 7}
	require.NoError(t, CheckSequence("7", ev))
	require.ErrorIs(t, CheckSequence("8", ev), ErrSequenceMismatch)
	require.ErrorIs(t, CheckSequence("6", ev), ErrSequenceMismatch)
	require.ErrorIs(t, CheckSequence("", ev), ErrMissingSequence)
	require.ErrorIs(t, CheckSequence("x", ev), ErrMalformedSequence)
}

func TestDecodeEvent(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		code    string
		pointer string
	}{
		{"valid", `{"id":"evt_1","sequence":3,"type":"order.created","created":1767225600,"api_version":"v1","data":{"x":1}}`, "", ""},
		{"unknown members are ignored", `{"id":"evt_1","sequence":3,"type":"t","livemode":false}`, "", ""},
		{"not JSON", `{"id":`, apierror.CodeMalformedJSON, ""},
		{"empty", ``, apierror.CodeBodyMissing, ""},
		{"array", `[]`, apierror.CodeWrongType, ""},
		{"string sequence", `{"id":"evt_1","sequence":"3","type":"t"}`, apierror.CodeWrongType, "/sequence"},
		{"negative sequence", `{"id":"evt_1","sequence":-3,"type":"t"}`, "", "/sequence"},
		{"fractional sequence", `{"id":"evt_1","sequence":3.5,"type":"t"}`, "", "/sequence"},
		{"zero sequence", `{"id":"evt_1","sequence":0,"type":"t"}`, "invalid_sequence", "/sequence"},
		{"sequence above MaxSequence", `{"id":"evt_1","sequence":9223372036854775808,"type":"t"}`, "invalid_sequence", "/sequence"},
		{"missing id", `{"sequence":3,"type":"t"}`, apierror.CodeFieldMissing, "/id"},
		{"missing type", `{"id":"evt_1","sequence":3}`, apierror.CodeFieldMissing, "/type"},
		{"trailing data", `{"id":"evt_1","sequence":3,"type":"t"} {}`, apierror.CodeTrailingData, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := DecodeEvent([]byte(tc.body))
			if tc.code == "" && tc.pointer == "" {
				require.NoError(t, err)
				require.Equal(t, uint64(3), ev.Sequence)
				return
			}
			var p *apierror.Error
			require.True(t, errors.As(err, &p), "want *apierror.Error, got %v", err)
			require.Equal(t, http.StatusBadRequest, p.Status)
			if tc.code != "" {
				require.Equal(t, tc.code, p.Errors[0].Code)
			}
			require.Equal(t, apierror.LocationBody, p.Errors[0].Location)
			require.Equal(t, tc.pointer, p.Errors[0].Pointer)
		})
	}
}

// The envelope says it is an event; one without "object" (an older producer) is accepted, one that
// says it is something else is refused, located.
func TestDecodeEventObject(t *testing.T) {
	const rest = `"id":"evt_1","sequence":1,"type":"order.created","created":1767225600,"api_version":"v1","data":{}}`
	_, err := DecodeEvent([]byte(`{"object":"event",` + rest))
	require.NoError(t, err)
	_, err = DecodeEvent([]byte(`{` + rest))
	require.NoError(t, err)
	_, err = DecodeEvent([]byte(`{"object":"order",` + rest))
	var p *apierror.Error
	require.ErrorAs(t, err, &p)
	require.Equal(t, "/object", p.Errors[0].Pointer)

	b, err := json.Marshal(Event{ID: "evt_1", Sequence: 1, Type: "t", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), `{"object":"event","id":"evt_1",`), "%s", b)
}
