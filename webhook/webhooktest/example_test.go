package webhooktest_test

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/webhooktest"
)

// A consumer's own handler, tested with signed deliveries, including one signed with the wrong secret.
func ExampleNewRequest() {
	secret := webhook.NewSecret()
	now := time.Unix(1767225600, 0)
	v, _ := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return now }})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := v.Verify(r.Header.Get(webhook.HeaderSignature), body); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})

	ev := webhooktest.NewEvent(1, "order.created", map[string]string{"order": "ord_1"}, now)
	fmt.Println(webhooktest.Deliver(handler, ev, now, secret).Code)
	fmt.Println(webhooktest.Deliver(handler, ev, now, webhook.NewSecret()).Code)
	fmt.Println(webhooktest.Deliver(handler, ev, now.Add(-time.Hour), secret).Code)
	// Output:
	// 204
	// 401
	// 401
}
