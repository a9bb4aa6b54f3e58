package otelconv

// producerObserver is filled in by the producer work.
type producerObserver struct{}

func (t *Telemetry) buildProducer() error {
	t.producer = &producerObserver{}
	return nil
}
