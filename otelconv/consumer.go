package otelconv

// consumerObserver is filled in by the consumer work.
type consumerObserver struct{}

func (t *Telemetry) buildConsumer() error {
	t.consumer = &consumerObserver{}
	return nil
}
