package portal

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/internal/randid"
)

// endpointForm is the endpoint form as shown or as the visitor sent it.
type endpointForm struct {
	URL, Description, APIVersion string
	// All takes every event type ("*"); Events are the types ticked otherwise.
	All    bool
	Events []string
	// Headers are the custom headers, one "Name: value" a line.
	Headers string
}

// Has reports whether the form ticks event type t.
func (f endpointForm) Has(t string) bool { return slices.Contains(f.Events, t) }

func readEndpointForm(r *http.Request) endpointForm {
	_ = r.ParseForm()
	f := endpointForm{URL: strings.TrimSpace(r.PostFormValue("url")), Description: r.PostFormValue("description"),
		APIVersion: strings.TrimSpace(r.PostFormValue("api_version")), Headers: r.PostFormValue("headers")}
	for _, t := range r.PostForm["event"] {
		if t == "*" {
			f.All = true
			continue
		}
		f.Events = append(f.Events, t)
	}
	return f
}

// formFrom is the edit form of ep as it is.
func formFrom(ep endpointJSON) endpointForm {
	f := endpointForm{URL: ep.URL, Description: ep.Description, APIVersion: ep.APIVersion, All: ep.AllEvents()}
	for _, t := range ep.EnabledEvents {
		if t != "*" {
			f.Events = append(f.Events, t)
		}
	}
	names := make([]string, 0, len(ep.Headers))
	for k := range ep.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k + ": " + ep.Headers[k] + "\n")
	}
	f.Headers = b.String()
	return f
}

// events is enabled_events as the form says.
func (f endpointForm) events() []string {
	if f.All {
		return []string{"*"}
	}
	return append([]string{}, f.Events...)
}

// headers parses the headers field; the problem locates a malformed line at /headers.
func (f endpointForm) headers() (map[string]string, *apierror.Error) {
	out := map[string]string{}
	var fe formErrors
	for i, line := range strings.Split(strings.ReplaceAll(f.Headers, "\r\n", "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			fe.add("headers", "line "+strconv.Itoa(i+1)+" is not a header: write one \"Name: value\" a line")
			continue
		}
		out[name] = value
	}
	if pe := fe.problem(); pe != nil {
		return nil, pe
	}
	return out, nil
}

// create is the body of POST /webhook_endpoints the form asks for.
func (f endpointForm) create() (map[string]any, *apierror.Error) {
	hs, problem := f.headers()
	if problem != nil {
		return nil, problem
	}
	body := map[string]any{"url": f.URL, "enabled_events": f.events()}
	if f.Description != "" {
		body["description"] = f.Description
	}
	if f.APIVersion != "" {
		body["api_version"] = f.APIVersion
	}
	if len(hs) > 0 {
		body["headers"] = hs
	}
	return body, nil
}

// patch is the merge patch (PATCH /webhook_endpoints/{id}) that makes ep what the form says: every
// field sent, and each header the form no longer lists removed.
func (f endpointForm) patch(ep endpointJSON) (map[string]any, *apierror.Error) {
	hs, problem := f.headers()
	if problem != nil {
		return nil, problem
	}
	headers := map[string]any{}
	for k, v := range hs {
		headers[k] = v
	}
	for k := range ep.Headers {
		if !hasFold(hs, k) {
			headers[k] = nil
		}
	}
	body := map[string]any{"url": f.URL, "description": f.Description, "enabled_events": f.events(), "headers": headers}
	if f.APIVersion != "" {
		body["api_version"] = f.APIVersion
	}
	return body, nil
}

// hasFold reports whether m has a key equal to k without regard to case, as header names are.
func hasFold(m map[string]string, k string) bool {
	for name := range m {
		if strings.EqualFold(name, k) {
			return true
		}
	}
	return false
}

// formErrors collects what is wrong with a form before anything is sent to the API: only what the
// API could not be asked at all (a line that is not a header, a number that is not one). Every rule
// of the API itself is the API's to apply.
type formErrors struct{ list []apierror.Violation }

// add notes detail about field.
func (fe *formErrors) add(field, detail string) {
	fe.list = append(fe.list, apierror.Violation{Location: apierror.LocationBody, Pointer: "/" + field, Detail: detail})
}

// problem is the page's problem, nil when nothing was noted.
func (fe *formErrors) problem() *apierror.Error {
	if len(fe.list) == 0 {
		return nil
	}
	return &apierror.Error{Status: http.StatusBadRequest, Title: "Check the form",
		Detail: "Some fields need another look before this can be sent.", Errors: fe.list}
}

// formKeys draws a form's Idempotency-Key.
func formKeys() string { return randid.New("portal_") }
