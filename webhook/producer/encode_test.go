package producer

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
)

func TestAppendEventMatchesEncodingJSON(t *testing.T) {
	for _, ev := range []webhook.Event{
		{ID: "evt_1", Sequence: 1, Type: "order.created", Created: 1767225600, APIVersion: "v1", Data: json.RawMessage(`{"a":1}`)},
		{ID: "evt_\"quoted\"\\", Sequence: 1<<63 - 1, Type: "<script>&</script>", Created: -5, APIVersion: "\u2028\u2029", Data: json.RawMessage(`[1,"x",null]`)},
		{ID: "\x00\x01\b\f\n\r\t\x1f\x7f", Type: "caf\xc3\xa9 \xff\xfe", Data: json.RawMessage(`"s"`)},
		{},
	} {
		want, err := json.Marshal(ev)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendEvent(nil, &ev)))
	}
	list := webhook.EventList{Object: "list", Data: []webhook.Event{{ID: "a", Data: json.RawMessage(`{}`)}, {ID: "b", Data: json.RawMessage(`1`)}}, HasMore: true}
	want, err := json.Marshal(list)
	require.NoError(t, err)
	require.Equal(t, string(want), string(encodeList(list.Data, true)))
	want, err = json.Marshal(webhook.EventList{Object: "list", Data: []webhook.Event{}})
	require.NoError(t, err)
	require.Equal(t, string(want), string(encodeList(nil, false)))
}
