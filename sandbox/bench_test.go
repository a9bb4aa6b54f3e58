package sandbox

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/webhook/producer"
)

// okTransport answers every request 200 without a network.
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

func BenchmarkFaultTransport(b *testing.B) {
	var ft FaultTable
	_ = ft.Set("we_faulty", Faults{Drop: 0.1, Duplicate: 0.1, BadSignature: 0.1})
	tr := must(NewFaultTransport(okTransport{}, &ft, nil))
	defer tr.Close()
	body := strings.Repeat("x", 512)
	for _, ep := range []string{"we_clean", "we_faulty"} {
		b.Run(ep, func(b *testing.B) {
			ctx := producer.NewEndpointIDContext(context.Background(), ep)
			b.ReportAllocs()
			for b.Loop() {
				r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://consumer.test/hooks", strings.NewReader(body))
				r.Header.Set("X-SVC-Signature", "t=1,v1="+strings.Repeat("ab", 32))
				resp, err := tr.RoundTrip(r)
				if err != nil {
					b.Fatal(err)
				}
				_ = resp.Body.Close()
			}
		})
	}
}
