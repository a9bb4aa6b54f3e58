package portal

// The API's answers, as the portal reads them: the documented shapes of the producer's endpoints,
// statistics and delivery history (webhook/producer). Members the portal does not show are left out.

// endpointJSON is a webhook endpoint (GET /v1/webhook_endpoints/{id}).
type endpointJSON struct {
	ID                      string            `json:"id"`
	URL                     string            `json:"url"`
	APIVersion              string            `json:"api_version"`
	Description             string            `json:"description"`
	EnabledEvents           []string          `json:"enabled_events"`
	Metadata                map[string]string `json:"metadata"`
	Headers                 map[string]string `json:"headers"`
	Status                  string            `json:"status"`
	DisabledReason          *string           `json:"disabled_reason"`
	DisabledAt              *int64            `json:"disabled_at"`
	Created                 *int64            `json:"created"`
	PreviousSecretExpiresAt *int64            `json:"previous_secret_expires_at"`
	FailingSince            *int64            `json:"failing_since"`
	Secret                  string            `json:"secret"`
}

// displayName is what the pages call the endpoint: its description, else its URL.
func (e endpointJSON) displayName() string {
	if e.Description != "" {
		return e.Description
	}
	return e.URL
}

// Enabled reports whether the endpoint is enabled.
func (e endpointJSON) Enabled() bool { return e.Status == "enabled" }

// AllEvents reports whether the endpoint takes every event type.
func (e endpointJSON) AllEvents() bool {
	for _, t := range e.EnabledEvents {
		if t == "*" {
			return true
		}
	}
	return false
}

// hourJSON is one hour of the statistics' day.
type hourJSON struct {
	Start       int64    `json:"start"`
	Attempts    int      `json:"attempts"`
	Delivered   int      `json:"delivered"`
	SuccessRate *float64 `json:"success_rate"`
}

// windowJSON is one window of the statistics.
type windowJSON struct {
	Attempts    int      `json:"attempts"`
	Delivered   int      `json:"delivered"`
	Failed      int      `json:"failed"`
	Abandoned   int      `json:"abandoned"`
	SuccessRate *float64 `json:"success_rate"`
	LatencyMS   *struct {
		P50 int64 `json:"p50"`
		P99 int64 `json:"p99"`
	} `json:"latency_ms"`
}

// statsJSON is GET /v1/webhook_endpoints/{id}/stats.
type statsJSON struct {
	Backlog struct {
		Events    int    `json:"events"`
		OldestAge *int64 `json:"oldest_age"`
	} `json:"backlog"`
	Hour   windowJSON `json:"hour"`
	Day    windowJSON `json:"day"`
	Week   windowJSON `json:"week"`
	Hourly []hourJSON `json:"hourly"`
}

// attemptJSON is one delivery attempt (GET /v1/webhook_endpoints/{id}/deliveries).
type attemptJSON struct {
	ID            string  `json:"id"`
	Event         string  `json:"event"`
	Sequence      uint64  `json:"sequence"`
	Attempt       int     `json:"attempt"`
	Outcome       string  `json:"outcome"`
	Created       int64   `json:"created"`
	LatencyMS     int64   `json:"latency_ms"`
	StatusCode    *int    `json:"status_code"`
	ErrorClass    *string `json:"error_class"`
	Error         *string `json:"error"`
	Response      string  `json:"response"`
	NextAttemptAt *int64  `json:"next_attempt_at"`
}

// eventTypeJSON is one entry of GET /v1/event_types.
type eventTypeJSON struct {
	Type        string `json:"type"`
	Description string `json:"description"`
	Schema      string `json:"schema"`
}

// secretView is the data of the page that shows a secret once.
type secretView struct {
	Endpoint endpointJSON
	Created  bool // registered now (else rolled)
}
