package portal

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/sandbox"
)

// routes builds the portal's own mux. Every page but the login and the assets needs a session.
func (p *Portal) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(p.pattern("GET", "/assets/{file}"), p.asset)
	mux.HandleFunc(p.pattern("GET", "/login"), p.loginPage)
	mux.HandleFunc(p.pattern("POST", "/login"), p.login)
	mux.HandleFunc(p.pattern("POST", "/logout"), p.logout)
	mux.HandleFunc(p.pattern("GET", "/{$}"), p.signedIn(func(w http.ResponseWriter, r *http.Request, _ *visit) {
		http.Redirect(w, r, p.path("/endpoints"), http.StatusSeeOther)
	}))
	mux.HandleFunc(p.pattern("GET", "/endpoints"), p.signedIn(p.endpointsPage))
	mux.HandleFunc(p.pattern("POST", "/endpoints"), p.signedIn(p.createEndpoint))
	mux.HandleFunc(p.pattern("GET", "/endpoints/{id}"), p.signedIn(p.endpointPage))
	mux.HandleFunc(p.pattern("POST", "/endpoints/{id}"), p.signedIn(p.updateEndpoint))
	mux.HandleFunc(p.pattern("POST", "/endpoints/{id}/status"), p.signedIn(p.setStatus))
	mux.HandleFunc(p.pattern("GET", "/endpoints/{id}/delete"), p.signedIn(p.deletePage))
	mux.HandleFunc(p.pattern("POST", "/endpoints/{id}/delete"), p.signedIn(p.deleteEndpoint))
	mux.HandleFunc(p.pattern("POST", "/endpoints/{id}/roll"), p.signedIn(p.rollSecret))
	mux.HandleFunc(p.pattern("GET", "/endpoints/{id}/deliveries"), p.signedIn(p.deliveriesPage))
	mux.HandleFunc(p.pattern("GET", "/endpoints/{id}/events/{sequence}"), p.signedIn(p.eventPage))
	mux.HandleFunc(p.pattern("POST", "/endpoints/{id}/events/{sequence}/resend"), p.signedIn(p.resend))
	mux.HandleFunc(p.pattern("GET", "/endpoints/{id}/recover"), p.signedIn(p.recoverPage))
	mux.HandleFunc(p.pattern("POST", "/endpoints/{id}/recover"), p.signedIn(p.recover))
	mux.HandleFunc(p.pattern("POST", "/endpoints/{id}/faults"), p.signedIn(p.setFaults))
	mux.HandleFunc(p.pattern("POST", "/endpoints/{id}/test_event"), p.signedIn(p.testEvent))
	mux.HandleFunc(p.pattern("GET", "/event_types"), p.signedIn(p.eventTypesPage))
	mux.HandleFunc(p.prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		p.fail(w, r, nil, http.StatusNotFound, "Page not found", "There is no such page in the portal.")
	})
	return mux
}

// visit is one request of a signed-in visitor.
type visit struct {
	s Session
}

// signedIn serves next to requests with a live session, and the "sign in again" page to others.
func (p *Portal) signedIn(next func(http.ResponseWriter, *http.Request, *visit)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok, err := p.session(r)
		if err != nil {
			p.log.Error("portal: reading a session", "error", err)
			p.fail(w, r, nil, http.StatusServiceUnavailable, "The portal is unavailable",
				"Your session could not be checked just now. Try again in a moment.")
			return
		}
		if !ok {
			p.fail(w, r, nil, http.StatusUnauthorized, "Your session has ended",
				"Sessions last a limited time, and signing out ends them. Ask for a new portal link where you got this one.")
			return
		}
		next(w, r, &visit{s: s})
	}
}

// apiPath builds an API path from segments, each escaped: apiPath("webhook_endpoints", id).
func apiPath(segs ...string) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// --- login and logout -----------------------------------------------------------------------------

func (p *Portal) loginPage(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	if !validSecret(token) {
		p.fail(w, r, nil, http.StatusNotFound, "This link is not valid",
			"Portal links are made for one visit. Ask for a new one where you got this one.")
		return
	}
	s, err := p.store.Get(r.Context(), storeKey("link", token), p.now())
	switch {
	case errors.Is(err, ErrNotFound):
		p.fail(w, r, nil, http.StatusGone, "This link has expired or was used",
			"Portal links work once, for a few minutes. Ask for a new one where you got this one.")
		return
	case err != nil:
		p.log.Error("portal: reading a link", "error", err)
		p.fail(w, r, nil, http.StatusServiceUnavailable, "The portal is unavailable", "Try the link again in a moment.")
		return
	}
	// The link is spent by the button, not by opening it: a mail scanner or a link preview that
	// fetches it leaves it working for its person.
	p.render(w, r, http.StatusOK, "login", &view{Title: "Open the portal", Data: struct {
		Token string
		Env   string
	}{token, envName(s.Environment)}})
}

func (p *Portal) login(w http.ResponseWriter, r *http.Request) {
	token := r.PostFormValue("token")
	if !validSecret(token) {
		p.fail(w, r, nil, http.StatusNotFound, "This link is not valid",
			"Portal links are made for one visit. Ask for a new one where you got this one.")
		return
	}
	now := p.now()
	s, err := p.store.Take(r.Context(), storeKey("link", token), now)
	switch {
	case errors.Is(err, ErrNotFound):
		p.fail(w, r, nil, http.StatusGone, "This link has expired or was used",
			"Portal links work once, for a few minutes. Ask for a new one where you got this one.")
		return
	case err != nil:
		p.log.Error("portal: taking a link", "error", err)
		p.fail(w, r, nil, http.StatusServiceUnavailable, "The portal is unavailable", "Try the link again in a moment.")
		return
	}
	if c, err := r.Cookie(p.cookie); err == nil && validSecret(c.Value) {
		_ = p.store.Delete(r.Context(), storeKey("session", c.Value)) // the session this browser had
	}
	secret := newSecret()
	s.ExpiresAt = now.Add(p.sessionTTL)
	if err := p.store.Put(r.Context(), storeKey("session", secret), s, now); err != nil {
		p.log.Error("portal: storing a session", "error", err)
		p.fail(w, r, nil, http.StatusServiceUnavailable, "The portal is unavailable",
			"Your session could not be started. Ask for a new link and try again.")
		return
	}
	p.setCookie(w, secret, s.ExpiresAt)
	http.Redirect(w, r, p.path("/endpoints"), http.StatusSeeOther)
}

func (p *Portal) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(p.cookie); err == nil && validSecret(c.Value) {
		if err := p.store.Delete(r.Context(), storeKey("session", c.Value)); err != nil {
			p.log.Error("portal: deleting a session", "error", err)
			p.fail(w, r, nil, http.StatusServiceUnavailable, "Signing out failed", "Try again in a moment.")
			return
		}
	}
	p.setCookie(w, "", time.Time{})
	p.render(w, r, http.StatusOK, "message", &view{Title: "Signed out",
		Data: message{Heading: "You are signed out", Text: "Open a new portal link to come back."}})
}

// --- endpoints ------------------------------------------------------------------------------------

// endpointRow is one line of the endpoints page.
type endpointRow struct {
	Endpoint  endpointJSON
	Stats     *statsJSON
	Sparkline sparkline
}

func (p *Portal) endpointsPage(w http.ResponseWriter, r *http.Request, v *visit) {
	p.showEndpoints(w, r, v, http.StatusOK, nil, endpointForm{All: true})
}

func (p *Portal) showEndpoints(w http.ResponseWriter, r *http.Request, v *visit, status int, problem *apierror.Error, form endpointForm) {
	a := p.call(r, v.s, http.MethodGet, "/webhook_endpoints", nil, "")
	if !a.ok() {
		p.failAPI(w, r, v, a)
		return
	}
	var list struct {
		Data []endpointJSON `json:"data"`
	}
	if err := a.decode(&list); err != nil {
		p.failAPI(w, r, v, p.internal(r, err))
		return
	}
	rows := make([]endpointRow, len(list.Data))
	now := p.now()
	for i, ep := range list.Data {
		rows[i].Endpoint = ep
		sa := p.call(r, v.s, http.MethodGet, apiPath("webhook_endpoints", ep.ID, "stats"), nil, "")
		var st statsJSON
		if sa.ok() && sa.decode(&st) == nil {
			rows[i].Stats = &st
			rows[i].Sparkline = newSparkline(st.Hourly, now)
		}
	}
	types := p.eventTypes(r, v)
	section := ""
	if problem != nil {
		section = "add"
	}
	p.render(w, r, status, "endpoints", &view{Title: "Endpoints", Nav: "endpoints", s: &v.s, Problem: problemOf(problem),
		Section: section, Notice: notice(r), Data: struct {
			Rows     []endpointRow
			Form     endpointForm
			Types    []eventTypeJSON
			Versions []string
		}{rows, form, types, p.apiVersions()}})
}

func (p *Portal) apiVersions() []string {
	if p.versions == nil {
		return nil
	}
	return p.versions()
}

// eventTypes reads the catalogue; nil when it cannot be read (the forms then take any type).
func (p *Portal) eventTypes(r *http.Request, v *visit) []eventTypeJSON {
	a := p.call(r, v.s, http.MethodGet, "/event_types", nil, "")
	var list struct {
		Data []eventTypeJSON `json:"data"`
	}
	if !a.ok() || a.decode(&list) != nil {
		return nil
	}
	return list.Data
}

func (p *Portal) createEndpoint(w http.ResponseWriter, r *http.Request, v *visit) {
	form := readEndpointForm(r)
	body, problem := form.create()
	if problem != nil {
		p.showEndpoints(w, r, v, http.StatusBadRequest, problem, form)
		return
	}
	a := p.call(r, v.s, http.MethodPost, "/webhook_endpoints", body, formKey(r))
	if !a.ok() {
		if !aboutInput(a.status) {
			p.failAPI(w, r, v, a)
			return
		}
		p.showEndpoints(w, r, v, a.status, a.problem, form)
		return
	}
	if a.bodyOmitted() {
		// The same form sent again: the API replayed the registration without its body, which held
		// the secret it never stores in the clear. The secret was shown the first time.
		if id := path.Base(a.header.Get("Location")); strings.HasPrefix(id, "we_") {
			p.done(w, r, "/endpoints/"+url.PathEscape(id), "created_again")
			return
		}
		p.done(w, r, "/endpoints", "created_again")
		return
	}
	var ep endpointJSON
	if err := a.decode(&ep); err != nil {
		p.failAPI(w, r, v, p.internal(r, err))
		return
	}
	p.render(w, r, http.StatusCreated, "secret", &view{Title: "Endpoint registered", Nav: "endpoints", s: &v.s,
		Data: secretView{Endpoint: ep, Created: true}})
}

// getEndpoint reads one endpoint; false when the page was answered (the API's 404 included).
func (p *Portal) getEndpoint(w http.ResponseWriter, r *http.Request, v *visit) (endpointJSON, bool) {
	a := p.call(r, v.s, http.MethodGet, apiPath("webhook_endpoints", r.PathValue("id")), nil, "")
	var ep endpointJSON
	if !a.ok() {
		p.failAPI(w, r, v, a)
		return ep, false
	}
	if err := a.decode(&ep); err != nil {
		p.failAPI(w, r, v, p.internal(r, err))
		return ep, false
	}
	return ep, true
}

func (p *Portal) endpointPage(w http.ResponseWriter, r *http.Request, v *visit) {
	ep, ok := p.getEndpoint(w, r, v)
	if !ok {
		return
	}
	p.showEndpoint(w, r, v, http.StatusOK, ep, nil, formFrom(ep), "")
}

// showEndpoint renders one endpoint's page, its edit form holding form and problem's violations
// shown where they belong; section names the form problem is about.
func (p *Portal) showEndpoint(w http.ResponseWriter, r *http.Request, v *visit, status int, ep endpointJSON,
	problem *apierror.Error, form endpointForm, section string) {
	var st *statsJSON
	if sa := p.call(r, v.s, http.MethodGet, apiPath("webhook_endpoints", ep.ID, "stats"), nil, ""); sa.ok() {
		st = new(statsJSON)
		if sa.decode(st) != nil {
			st = nil
		}
	}
	var spark sparkline
	if st != nil {
		spark = newSparkline(st.Hourly, p.now())
	}
	types := p.eventTypes(r, v)
	p.render(w, r, status, "endpoint", &view{Title: ep.displayName(), Nav: "endpoints", s: &v.s, Problem: problemOf(problem),
		Notice: notice(r), Section: section, Data: struct {
			Endpoint  endpointJSON
			Stats     *statsJSON
			Sparkline sparkline
			Form      endpointForm
			Types     []eventTypeJSON
			TestTypes []string
			Versions  []string
			Faults    faultsForm
		}{ep, st, spark, form, types, testTypes(ep, types), p.apiVersions(), readFaultsForm(r, section == "faults")}})
}

// testTypes are the event types a test event to ep may have: those it takes. An endpoint that takes
// every type is offered the sandbox's own test type first, then the catalogue's.
func testTypes(ep endpointJSON, catalogue []eventTypeJSON) []string {
	if !ep.AllEvents() {
		return ep.EnabledEvents
	}
	out := []string{sandbox.DefaultTestEventType}
	for _, t := range catalogue {
		if t.Type != sandbox.DefaultTestEventType {
			out = append(out, t.Type)
		}
	}
	return out
}

// refused answers a form the API refused: a refusal of its input is shown on the endpoint's page
// with the form as it was sent; anything else (not found, not allowed, a failure) on the failure
// page.
func (p *Portal) refused(w http.ResponseWriter, r *http.Request, v *visit, a *answer, form *endpointForm, section string) {
	if !aboutInput(a.status) {
		p.failAPI(w, r, v, a)
		return
	}
	ep, ok := p.getEndpoint(w, r, v)
	if !ok {
		return
	}
	f := formFrom(ep)
	if form != nil {
		f = *form
	}
	p.showEndpoint(w, r, v, a.status, ep, a.problem, f, section)
}

func (p *Portal) updateEndpoint(w http.ResponseWriter, r *http.Request, v *visit) {
	ep, ok := p.getEndpoint(w, r, v)
	if !ok {
		return
	}
	form := readEndpointForm(r)
	body, problem := form.patch(ep)
	if problem != nil {
		p.showEndpoint(w, r, v, http.StatusBadRequest, ep, problem, form, "edit")
		return
	}
	a := p.call(r, v.s, http.MethodPatch, apiPath("webhook_endpoints", ep.ID), body, formKey(r))
	if !a.ok() {
		p.refused(w, r, v, a, &form, "edit")
		return
	}
	p.done(w, r, "/endpoints/"+url.PathEscape(ep.ID), "updated")
}

func (p *Portal) setStatus(w http.ResponseWriter, r *http.Request, v *visit) {
	status := r.PostFormValue("status")
	a := p.call(r, v.s, http.MethodPatch, apiPath("webhook_endpoints", r.PathValue("id")), map[string]string{"status": status}, formKey(r))
	if !a.ok() {
		p.refused(w, r, v, a, nil, "status")
		return
	}
	p.done(w, r, "/endpoints/"+url.PathEscape(r.PathValue("id")), status)
}

func (p *Portal) deletePage(w http.ResponseWriter, r *http.Request, v *visit) {
	ep, ok := p.getEndpoint(w, r, v)
	if !ok {
		return
	}
	p.render(w, r, http.StatusOK, "delete", &view{Title: "Delete " + ep.displayName(), Nav: "endpoints", s: &v.s, Data: ep})
}

func (p *Portal) deleteEndpoint(w http.ResponseWriter, r *http.Request, v *visit) {
	a := p.call(r, v.s, http.MethodDelete, apiPath("webhook_endpoints", r.PathValue("id")), nil, formKey(r))
	if !a.ok() {
		p.refused(w, r, v, a, nil, "delete")
		return
	}
	p.done(w, r, "/endpoints", "deleted")
}

// rollExpiries are the choices of how long a rolled secret keeps signing, in seconds.
var rollExpiries = []struct {
	Seconds int64
	Label   string
}{{0, "Stop now"}, {3600, "1 hour"}, {86400, "24 hours"}, {7 * 86400, "7 days"}}

func (p *Portal) rollSecret(w http.ResponseWriter, r *http.Request, v *visit) {
	body := map[string]any{}
	if s := r.PostFormValue("expires_in"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			ep, ok := p.getEndpoint(w, r, v)
			if ok {
				var fe formErrors
				fe.add("expires_in", "must be a number of seconds")
				p.showEndpoint(w, r, v, http.StatusBadRequest, ep, fe.problem(), formFrom(ep), "roll")
			}
			return
		}
		body["expires_in"] = n
	}
	a := p.call(r, v.s, http.MethodPost, apiPath("webhook_endpoints", r.PathValue("id"), "roll_secret"), body, formKey(r))
	if !a.ok() {
		p.refused(w, r, v, a, nil, "roll")
		return
	}
	if a.bodyOmitted() {
		// The same form sent again, replayed without the body that held the secret.
		p.done(w, r, "/endpoints/"+url.PathEscape(r.PathValue("id")), "rolled_again")
		return
	}
	var ep endpointJSON
	if err := a.decode(&ep); err != nil {
		p.failAPI(w, r, v, p.internal(r, err))
		return
	}
	if ep.Secret == "" {
		// The same form sent again: the API replayed the roll without its secret, which it never
		// stores in the clear. The secret was shown the first time.
		p.done(w, r, "/endpoints/"+url.PathEscape(ep.ID), "rolled_again")
		return
	}
	p.render(w, r, http.StatusOK, "secret", &view{Title: "New signing secret", Nav: "endpoints", s: &v.s,
		Data: secretView{Endpoint: ep}})
}

// --- deliveries, events, recovery ---------------------------------------------------------------------

func (p *Portal) deliveriesPage(w http.ResponseWriter, r *http.Request, v *visit) {
	ep, ok := p.getEndpoint(w, r, v)
	if !ok {
		return
	}
	in := r.URL.Query()
	q := url.Values{}
	for _, name := range []string{"outcome", "sequence", "starting_after"} {
		if s := strings.TrimSpace(in.Get(name)); s != "" {
			q.Set(name, s)
		}
	}
	filters := deliveryFilters{Outcome: q.Get("outcome"), Sequence: q.Get("sequence")}
	path := apiPath("webhook_endpoints", ep.ID, "deliveries")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	a := p.call(r, v.s, http.MethodGet, path, nil, "")
	var list struct {
		Data    []attemptJSON `json:"data"`
		HasMore bool          `json:"has_more"`
	}
	var problem *apierror.Error
	status := http.StatusOK
	switch {
	case a.ok():
		if err := a.decode(&list); err != nil {
			p.failAPI(w, r, v, p.internal(r, err))
			return
		}
	case a.status == http.StatusBadRequest:
		problem, status = a.problem, a.status
	default:
		p.failAPI(w, r, v, a)
		return
	}
	// The links are whole, not a query to append in the template: html/template escapes a value
	// placed after "?" as one query component, "=" and "&" included. Both keep the filters.
	link := func(after string) string {
		nq := url.Values{}
		if after != "" {
			nq.Set("starting_after", after)
		}
		if filters.Outcome != "" {
			nq.Set("outcome", filters.Outcome)
		}
		if filters.Sequence != "" {
			nq.Set("sequence", filters.Sequence)
		}
		u := p.path("/endpoints/" + url.PathEscape(ep.ID) + "/deliveries")
		if len(nq) > 0 {
			u += "?" + nq.Encode()
		}
		return u
	}
	next, newest := "", link("")
	if list.HasMore && len(list.Data) > 0 {
		next = link(list.Data[len(list.Data)-1].ID)
	}
	p.render(w, r, status, "deliveries", &view{Title: "Deliveries of " + ep.displayName(), Nav: "endpoints", s: &v.s,
		Problem: problemOf(problem), Data: struct {
			Endpoint endpointJSON
			Attempts []attemptJSON
			Filters  deliveryFilters
			Next     string
			Newest   string
			Paged    bool
		}{ep, list.Data, filters, next, newest, q.Get("starting_after") != ""}})
}

// deliveryFilters are the delivery page's filters as the visitor set them.
type deliveryFilters struct{ Outcome, Sequence string }

func (p *Portal) eventPage(w http.ResponseWriter, r *http.Request, v *visit) {
	ep, ok := p.getEndpoint(w, r, v)
	if !ok {
		return
	}
	p.showEvent(w, r, v, ep, http.StatusOK, nil)
}

func (p *Portal) showEvent(w http.ResponseWriter, r *http.Request, v *visit, ep endpointJSON, status int, problem *apierror.Error) {
	seq := r.PathValue("sequence")
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || n == 0 {
		p.fail(w, r, &v.s, http.StatusNotFound, "No such event", "An event's number is a whole number from 1 up.")
		return
	}
	seq = strconv.FormatUint(n, 10)
	a := p.call(r, v.s, http.MethodGet, apiPath("webhook_endpoints", ep.ID, "events")+"?from="+seq+"&to="+seq+"&limit=1", nil, "")
	if !a.ok() {
		p.failAPI(w, r, v, a)
		return
	}
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := a.decode(&list); err != nil {
		p.failAPI(w, r, v, p.internal(r, err))
		return
	}
	if len(list.Data) == 0 {
		p.fail(w, r, &v.s, http.StatusNotFound, "No such event", "This endpoint has no event "+seq+" yet.")
		return
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, list.Data[0], "", "  "); err != nil {
		pretty.Reset()
		pretty.Write(list.Data[0])
	}
	var ev struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Created int64  `json:"created"`
	}
	_ = json.Unmarshal(list.Data[0], &ev)
	var attempts struct {
		Data []attemptJSON `json:"data"`
	}
	if aa := p.call(r, v.s, http.MethodGet, apiPath("webhook_endpoints", ep.ID, "deliveries")+"?sequence="+seq, nil, ""); aa.ok() {
		_ = aa.decode(&attempts)
	}
	headers := [][2]string{{"Content-Type", "application/json"}, {"X-SVC-Sequence", seq},
		{"X-SVC-Signature", "t=…,v1=… (signed afresh at each attempt)"}}
	names := make([]string, 0, len(ep.Headers))
	for k := range ep.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		headers = append(headers, [2]string{k, ep.Headers[k]})
	}
	p.render(w, r, status, "event", &view{Title: "Event " + seq, Nav: "endpoints", s: &v.s, Problem: problemOf(problem),
		Notice: notice(r), Data: struct {
			Endpoint endpointJSON
			Sequence string
			ID, Type string
			Created  int64
			JSON     string
			Headers  [][2]string
			Attempts []attemptJSON
		}{ep, seq, ev.ID, ev.Type, ev.Created, pretty.String(), headers, attempts.Data}})
}

func (p *Portal) resend(w http.ResponseWriter, r *http.Request, v *visit) {
	id, seq := r.PathValue("id"), r.PathValue("sequence")
	a := p.call(r, v.s, http.MethodPost, apiPath("webhook_endpoints", id, "events", seq, "resend"), nil, formKey(r))
	if !a.ok() {
		if !aboutInput(a.status) && a.problem.Code != "event_not_found" {
			p.failAPI(w, r, v, a)
			return
		}
		ep, ok := p.getEndpoint(w, r, v)
		if ok {
			p.showEvent(w, r, v, ep, a.status, a.problem)
		}
		return
	}
	p.done(w, r, "/endpoints/"+url.PathEscape(id)+"/events/"+url.PathEscape(seq), "resent")
}

// recoverForm is the recover page's form as the visitor filled it.
type recoverForm struct{ From, To string }

func (p *Portal) recoverPage(w http.ResponseWriter, r *http.Request, v *visit) {
	ep, ok := p.getEndpoint(w, r, v)
	if !ok {
		return
	}
	p.render(w, r, http.StatusOK, "recover", &view{Title: "Recover events", Nav: "endpoints", s: &v.s, Notice: notice(r),
		Data: struct {
			Endpoint endpointJSON
			Form     recoverForm
		}{ep, recoverForm{}}})
}

func (p *Portal) recover(w http.ResponseWriter, r *http.Request, v *visit) {
	ep, ok := p.getEndpoint(w, r, v)
	if !ok {
		return
	}
	form := recoverForm{From: strings.TrimSpace(r.PostFormValue("from")), To: strings.TrimSpace(r.PostFormValue("to"))}
	show := func(status int, problem *apierror.Error) {
		p.render(w, r, status, "recover", &view{Title: "Recover events", Nav: "endpoints", s: &v.s, Problem: problemOf(problem),
			Data: struct {
				Endpoint endpointJSON
				Form     recoverForm
			}{ep, form}})
	}
	var fe formErrors
	body := map[string]uint64{}
	for _, f := range []struct{ name, value string }{{"from", form.From}, {"to", form.To}} {
		n, err := strconv.ParseUint(f.value, 10, 64)
		if err != nil {
			fe.add(f.name, "must be an event's sequence, a whole number from 1 up")
			continue
		}
		body[f.name] = n
	}
	if pe := fe.problem(); pe != nil {
		show(http.StatusBadRequest, pe)
		return
	}
	a := p.call(r, v.s, http.MethodPost, apiPath("webhook_endpoints", ep.ID, "recover"), body, formKey(r))
	if !a.ok() {
		if !aboutInput(a.status) {
			p.failAPI(w, r, v, a)
			return
		}
		show(a.status, a.problem)
		return
	}
	var out struct {
		Queued int `json:"queued"`
	}
	_ = a.decode(&out)
	p.done(w, r, "/endpoints/"+url.PathEscape(ep.ID)+"/recover", "recovered_"+strconv.Itoa(out.Queued))
}

// --- the sandbox ----------------------------------------------------------------------------------

// faultsForm is the sandbox's fault form as the visitor filled it.
type faultsForm struct {
	Drop, Duplicate, Reorder, BadSignature, Delay, DelayMS string
}

func readFaultsForm(r *http.Request, posted bool) faultsForm {
	if !posted {
		return faultsForm{}
	}
	return faultsForm{Drop: r.PostFormValue("drop"), Duplicate: r.PostFormValue("duplicate"), Reorder: r.PostFormValue("reorder"),
		BadSignature: r.PostFormValue("bad_signature"), Delay: r.PostFormValue("delay"), DelayMS: r.PostFormValue("delay_ms")}
}

func (p *Portal) setFaults(w http.ResponseWriter, r *http.Request, v *visit) {
	id := r.PathValue("id")
	path := "/sandbox" + apiPath("webhook_endpoints", id, "faults")
	if r.PostFormValue("action") == "clear" {
		a := p.call(r, v.s, http.MethodDelete, path, nil, formKey(r))
		if !a.ok() {
			p.refused(w, r, v, a, nil, "faults")
			return
		}
		p.done(w, r, "/endpoints/"+url.PathEscape(id), "faults_cleared")
		return
	}
	form := readFaultsForm(r, true)
	var fe formErrors
	body := map[string]any{}
	for _, f := range []struct{ name, value string }{{"drop", form.Drop}, {"duplicate", form.Duplicate}, {"reorder", form.Reorder},
		{"bad_signature", form.BadSignature}, {"delay", form.Delay}} {
		if f.value == "" {
			continue
		}
		if x, err := strconv.ParseFloat(f.value, 64); err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			fe.add(f.name, "must be a rate between 0 and 1, such as 0.25")
		} else {
			body[f.name] = x
		}
	}
	if form.DelayMS != "" {
		if n, err := strconv.ParseInt(form.DelayMS, 10, 64); err != nil {
			fe.add("delay_ms", "must be a whole number of milliseconds")
		} else {
			body["delay_ms"] = n
		}
	}
	if pe := fe.problem(); pe != nil {
		if ep, ok := p.getEndpoint(w, r, v); ok {
			p.showEndpoint(w, r, v, http.StatusBadRequest, ep, pe, formFrom(ep), "faults")
		}
		return
	}
	a := p.call(r, v.s, http.MethodPut, path, body, formKey(r))
	if !a.ok() {
		p.refused(w, r, v, a, nil, "faults")
		return
	}
	p.done(w, r, "/endpoints/"+url.PathEscape(id), "faults_set")
}

func (p *Portal) testEvent(w http.ResponseWriter, r *http.Request, v *visit) {
	id := r.PathValue("id")
	body := map[string]any{"endpoint": id}
	if t := r.PostFormValue("type"); t != "" {
		body["type"] = t
	}
	a := p.call(r, v.s, http.MethodPost, "/sandbox/events", body, formKey(r))
	if !a.ok() {
		p.refused(w, r, v, a, nil, "test_event")
		return
	}
	p.done(w, r, "/endpoints/"+url.PathEscape(id), "test_event_sent")
}

// --- the catalogue ----------------------------------------------------------------------------------

func (p *Portal) eventTypesPage(w http.ResponseWriter, r *http.Request, v *visit) {
	a := p.call(r, v.s, http.MethodGet, "/event_types", nil, "")
	var list struct {
		Data []eventTypeJSON `json:"data"`
	}
	if !a.ok() {
		p.failAPI(w, r, v, a)
		return
	}
	if err := a.decode(&list); err != nil {
		p.failAPI(w, r, v, p.internal(r, err))
		return
	}
	p.render(w, r, http.StatusOK, "event_types", &view{Title: "Event types", Nav: "event_types", s: &v.s, Data: list.Data})
}

// aboutInput reports whether a refusal with status is about the form's input, to be shown beside
// it: 400, 409, 413 and 422. Any other (401, 403, 404, 429, 5xx) leaves nothing to correct in the
// form.
func aboutInput(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// --- answers ----------------------------------------------------------------------------------------

// notices are the messages a redirect after a form may show: the query names one, and only these
// fixed texts are ever shown, so the query cannot put words on the page.
var notices = map[string]string{
	"created_again":   "This form already registered the endpoint; its signing secret was shown then.",
	"updated":         "The endpoint was updated.",
	"enabled":         "The endpoint is enabled: deliveries resume, oldest first.",
	"disabled":        "The endpoint is disabled: events are kept, and delivered once it is enabled again.",
	"deleted":         "The endpoint was deleted. Its events stay readable through the API until the retention ends.",
	"rolled_again":    "The secret was already rolled by this form; it was shown then.",
	"resent":          "The event is queued to be sent again.",
	"faults_set":      "The faults are set: the next deliveries to this endpoint get them.",
	"faults_cleared":  "The faults are cleared.",
	"test_event_sent": "A test event is on its way to this endpoint.",
}

// notice returns the fixed message the request's "done" parameter names, or "".
func notice(r *http.Request) string {
	done := r.URL.Query().Get("done")
	if n, ok := strings.CutPrefix(done, "recovered_"); ok {
		if k, err := strconv.Atoi(n); err == nil && k >= 0 {
			if k == 1 {
				return "1 event is queued to be sent again."
			}
			return strconv.Itoa(k) + " events are queued to be sent again."
		}
	}
	return notices[done]
}

// done redirects after a form that worked (303, so a reload does not send it again), naming the
// notice to show.
func (p *Portal) done(w http.ResponseWriter, r *http.Request, rel, what string) {
	http.Redirect(w, r, p.path(rel)+"?done="+url.QueryEscape(what), http.StatusSeeOther)
}

// message is the data of the message page.
type message struct{ Heading, Text string }

// fail renders the message page with status; s is the visitor's session when there is one.
func (p *Portal) fail(w http.ResponseWriter, r *http.Request, s *Session, status int, heading, text string) {
	p.render(w, r, status, "message", &view{Title: heading, s: s, Data: message{heading, text}})
}

// failAPI renders an API answer that leaves nothing to show: its problem on the message page.
func (p *Portal) failAPI(w http.ResponseWriter, r *http.Request, v *visit, a *answer) {
	pv := problemOf(a.problem)
	text := pv.Detail
	if pv.RequestID != "" {
		text += " (request " + pv.RequestID + ")"
	}
	p.render(w, r, a.status, "message", &view{Title: pv.Title, s: &v.s, Data: message{pv.Title, text}})
}

// envName is how the pages name an environment.
func envName(e apikey.Environment) string {
	if e == apikey.Sandbox {
		return "Sandbox"
	}
	return "Production"
}

// formKey is the Idempotency-Key a form carries: drawn when the form was shown, so that the same
// form sent twice is the same request to the API. A form without one (or with junk) gets a fresh key:
// it then acts at most once per sending.
func formKey(r *http.Request) string {
	k := r.PostFormValue("idempotency_key")
	if len(k) < 16 || len(k) > 64 || strings.Trim(k, "abcdefghijklmnopqrstuvwxyz234567_") != "" {
		return formKeys()
	}
	return k
}

// formatUnix formats Unix seconds for the pages, in UTC.
func formatUnix(t int64) string {
	if t == 0 {
		return ""
	}
	return time.Unix(t, 0).UTC().Format("2006-01-02 15:04:05 UTC")
}
