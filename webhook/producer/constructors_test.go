package producer_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

func TestHandlerConstructorsRefuseMissingArguments(t *testing.T) {
	log, eps := memstore.NewLog(), &memstore.Endpoints{}
	lic := func(*http.Request) (string, error) { return "lic_1", nil }
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"range without a log", func() error { _, err := producer.NewRangeHandler(nil, eps, lic, nil); return err }, "NewRangeHandler needs a Log"},
		{"range without endpoints", func() error { _, err := producer.NewRangeHandler(log, nil, lic, nil); return err }, "NewRangeHandler needs Endpoints"},
		{"range without a licensee", func() error { _, err := producer.NewRangeHandler(log, eps, nil, nil); return err }, "NewRangeHandler needs a licensee CallerFunc"},
		{"deliveries without a log", func() error { _, err := producer.NewDeliveriesHandler(nil, eps, lic, nil); return err }, "NewDeliveriesHandler needs a Log"},
		{"deliveries without a licensee", func() error { _, err := producer.NewDeliveriesHandler(log, eps, nil, nil); return err }, "NewDeliveriesHandler needs a licensee CallerFunc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.err() })
			require.EqualError(t, err, "producer: "+tc.want)
		})
	}
}
