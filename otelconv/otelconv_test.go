package otelconv

import "testing"

func TestNewWithDefaults(t *testing.T) {
	tel, err := New(nil)
	if err != nil || tel == nil {
		t.Fatalf("New(nil) = %v, %v", tel, err)
	}
	h := newHarness(t, nil)
	if len(h.collect(t)) != 0 {
		t.Fatalf("a Telemetry that observed nothing reported metrics")
	}
}
