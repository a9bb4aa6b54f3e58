package otelconv

// sandboxObserver is filled in by the sandbox work.
type sandboxObserver struct{}

func (t *Telemetry) buildSandbox() error {
	t.sandbox = &sandboxObserver{}
	return nil
}
