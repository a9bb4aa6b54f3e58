package otelconv

// idempotencyObserver is filled in by the idempotency work.
type idempotencyObserver struct{}

func (t *Telemetry) buildIdempotency() error {
	t.idempotency = &idempotencyObserver{}
	return nil
}
