package sandboxtest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/sandbox/sandboxtest"
)

// exampleT stands in for the *testing.T a real test passes to NewProducer.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (t *exampleT) Helper()                           {}
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) done() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// A consumer proves its receiver recovers from faults; here the receiver is the small spec-following
// one of this package's tests, and the faults are certain to happen.
func ExampleNewProducer() {
	t := &exampleT{}
	defer t.done()
	rc := &receiver{client: &http.Client{}}
	consumer := httptest.NewServer(rc)
	defer consumer.Close()

	p := sandboxtest.NewProducer(t, consumer.URL+"/webhooks", &sandboxtest.Options{
		Faults: sandbox.Faults{Drop: 0.3, Reorder: 0.2, Duplicate: 0.2, BadSignature: 0.1},
		Rand:   rand.New(rand.NewPCG(1, 2)),
	})
	rc.baseURL, rc.apiKey, rc.secret, rc.endpointID = p.URL, p.APIKey, p.Secret, p.EndpointID

	ctx := context.Background()
	for i := range 30 {
		if _, err := p.Emit(ctx, "order.created", map[string]int{"n": i}); err != nil {
			panic(err)
		}
	}
	_ = p.SetFaults(sandbox.Faults{})
	_, _ = p.Emit(ctx, "test.end", nil)

	seqs, _, _, _ := rc.snapshot()
	inOrder := len(seqs) == 31
	for i, s := range seqs {
		inOrder = inOrder && s == uint64(i+1)
	}
	fmt.Println("faults applied:", len(p.AppliedFaults()) > 0)
	fmt.Println("processed 1..31 exactly once, in order:", inOrder)
	// Output:
	// faults applied: true
	// processed 1..31 exactly once, in order: true
}
