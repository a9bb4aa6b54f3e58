package otelconv

// apierrorObserver is filled in by the apierror work.
type apierrorObserver struct{}

func (t *Telemetry) buildAPIError() error {
	t.apierror = &apierrorObserver{}
	return nil
}
