package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svcplatform/conventions/webhook/webhooktest"
)

// BenchmarkListen measures svc listen end to end, per event: a verified range page shared by a
// hundred events, the forward to a local handler that verifies it, and the cursor written durably
// (fsync) before the next event — the cost that makes a restart lose nothing.
func BenchmarkListen(b *testing.B) {
	src := webhooktest.NewSource(testSecret, testKey, nil)
	for i := range b.N {
		src.Emit(testEP, "order.created", map[string]any{"id": "ord_" + string(rune('a'+i%26)), "account": "acc_1"})
	}
	api := httptest.NewServer(src)
	defer api.Close()
	rcv := newReceiver(b, 0)
	local := httptest.NewServer(rcv)
	defer local.Close()
	e, _, errb := testEnv(b, map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: api.URL, envEndpoint: testEP}, "")
	sig := make(chan os.Signal, 2)
	e.interrupts = sig
	done := make(chan int, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		done <- run([]string{"listen", "--forward-to", local.URL, "--cursor", filepath.Join(b.TempDir(), "c.json"), "--poll", "1ms"}, e)
	}()
	for {
		if got, _ := rcv.snapshot(); len(got) >= b.N {
			break
		}
		select {
		case code := <-done:
			b.Fatalf("listen stopped with %d: %s", code, errb.String())
		default:
		}
		time.Sleep(time.Millisecond) // polling for the end of the run; at most a millisecond of b.N events
	}
	b.StopTimer()
	sig <- os.Interrupt
	if code := <-done; code != exitOK {
		b.Fatalf("listen stopped with %d: %s", code, errb.String())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
