package sandboxtest_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svcplatform/conventions/webhook"
)

// receiver is a small webhook consumer written from the spec, the kind a consumer developer proves
// with sandboxtest: it verifies every delivery's signature and sequence header, processes events in
// sequence order exactly once, fetches the missing range when it sees a gap, and answers 503 when it
// cannot, so that nothing is skipped silently.
type receiver struct {
	baseURL, apiKey, secret, endpointID string
	client                              *http.Client

	mu         sync.Mutex
	last       uint64
	processed  []webhook.Event
	rejected   int // deliveries refused for their signature or sequence header
	duplicates int
	fetches    int
	down       bool // answer every delivery 503, as a consumer in an outage
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if !verify(r.Header.Get(webhook.HeaderSignature), body, rc.secret, time.Now()) {
		rc.rejected++
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	var ev webhook.Event
	if err := json.Unmarshal(body, &ev); err != nil || r.Header.Get(webhook.HeaderSequence) != strconv.FormatUint(ev.Sequence, 10) {
		rc.rejected++
		http.Error(w, "sequence header and body disagree", http.StatusBadRequest)
		return
	}
	switch {
	case ev.Sequence <= rc.last:
		rc.duplicates++
	case ev.Sequence == rc.last+1:
		rc.process(ev)
	default:
		missing, err := rc.fetch(rc.last+1, ev.Sequence-1)
		if err != nil {
			http.Error(w, "gap not recovered", http.StatusServiceUnavailable)
			return
		}
		for _, m := range missing {
			rc.process(m)
		}
		rc.process(ev)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) process(ev webhook.Event) {
	rc.processed = append(rc.processed, ev)
	rc.last = ev.Sequence
}

// fetch retrieves [from, to] by range, page by page, verifying each page's signature.
func (rc *receiver) fetch(from, to uint64) ([]webhook.Event, error) {
	rc.fetches++
	var out []webhook.Event
	for from <= to {
		url := fmt.Sprintf("%s/v1/webhook_endpoints/%s/events?from=%d&to=%d&limit=2", rc.baseURL, rc.endpointID, from, to)
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+rc.apiKey)
		resp, err := rc.client.Do(req)
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("range: status %d", resp.StatusCode)
		}
		if !verify(resp.Header.Get(webhook.HeaderSignature), body, rc.secret, time.Now()) {
			return nil, errors.New("range: bad signature")
		}
		var list webhook.EventList
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, err
		}
		if len(list.Data) == 0 {
			return nil, errors.New("range: events missing")
		}
		for _, ev := range list.Data {
			if ev.Sequence != from {
				return nil, fmt.Errorf("range: got %d, want %d", ev.Sequence, from)
			}
			out = append(out, ev)
			from++
		}
	}
	return out, nil
}

func (rc *receiver) snapshot() (seqs []uint64, rejected, duplicates, fetches int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, ev := range rc.processed {
		seqs = append(seqs, ev.Sequence)
	}
	return seqs, rc.rejected, rc.duplicates, rc.fetches
}

func (rc *receiver) setDown(down bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.down = down
}

// verify checks X-SVC-Signature: HMAC-SHA256 over "<t>.<body>" keyed with the secret string, any v1
// matching in constant time, t within 300 s either way.
func verify(header string, body []byte, secret string, now time.Time) bool {
	var ts int64 = -1
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return false
			}
			ts = n
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if ts < 0 || len(sigs) == 0 {
		return false
	}
	if d := now.Sub(time.Unix(ts, 0)); d > 300*time.Second || d < -300*time.Second {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return true
		}
	}
	return false
}
