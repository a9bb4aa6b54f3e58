package server

// SetWake replaces what the server calls once a request's events have committed (the dispatcher's
// Wake), so that a test can see when it is called and what is committed by then.
func SetWake(s *Server, wake func()) { s.wake = wake }

// WebhookEndpoint is the part of an endpoint as the API answers it (producer.EndpointsHandler) that
// the tests read.
type WebhookEndpoint struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	URL        string `json:"url"`
	Secret     string `json:"secret"`
	APIVersion string `json:"api_version"`
}
