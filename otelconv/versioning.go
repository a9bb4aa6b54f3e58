package otelconv

// versioningObserver is filled in by the versioning work.
type versioningObserver struct{}

func (t *Telemetry) buildVersioning() error {
	t.versioning = &versioningObserver{}
	return nil
}
