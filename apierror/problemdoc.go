package apierror

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ProblemDoc documents one problem code — a problem's code or a violation's, the two share one
// namespace — for the page its type URI names (ProblemDocs.Handler). It is a plain value. The zero
// value documents nothing, and NewProblemDocs refuses it.
type ProblemDoc struct {
	// Code is the snake_case code documented ("order_not_found").
	Code string
	// Statuses are the HTTP statuses of the problems that carry the code, each 400 to 599: one for
	// most codes, several for a violation code that appears in problems of different statuses.
	Statuses []int
	// Title is a short summary of the problem type, the same for every occurrence.
	Title string
	// Description says what happened: what the client sent, or what the server met.
	Description string
	// Fix says what the client should do about it.
	Fix string
}

// ErrInvalidProblemDoc is wrapped by every error NewProblemDocs returns: an entry that is incomplete
// or repeats a code.
var ErrInvalidProblemDoc = errors.New("apierror: invalid problem documentation")

// ProblemDocs is the documentation of every problem code a service writes: the library's
// (LibraryProblemDocs) and the service's own, checked once when NewProblemDocs builds it. Handler
// serves it at the address of the problems' type URIs, so that a type URI resolves to a page.
//
// A ProblemDocs never changes once built and is safe for concurrent use. The zero value, and nil,
// document nothing: Lookup finds no code and Handler serves an empty index.
type ProblemDocs struct {
	docs   []ProblemDoc // sorted by Code, each Statuses sorted
	byCode map[string]int
}

// NewProblemDocs builds the registry of docs, which need not be sorted. Every entry must have a
// snake_case Code that no other entry has, at least one status, each 400 to 599 and none twice, and a
// Title, Description and Fix that are not blank; the error, which wraps ErrInvalidProblemDoc, names
// every entry that breaks a rule, by its index and code. A service builds its registry from the
// library's entries and its own:
//
//	docs, err := apierror.NewProblemDocs(append(apierror.LibraryProblemDocs(), orderDocs...)...)
//
// The entries are copied: changing docs afterwards changes nothing in the registry.
func NewProblemDocs(docs ...ProblemDoc) (*ProblemDocs, error) {
	d := &ProblemDocs{docs: make([]ProblemDoc, 0, len(docs)), byCode: make(map[string]int, len(docs))}
	var errs []error
	first := make(map[string]int, len(docs))
	for i, doc := range docs {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%w: entry %d (code %s): %s", ErrInvalidProblemDoc, i,
				strconv.Quote(doc.Code), fmt.Sprintf(format, args...)))
		}
		ok := true
		if !snakeCase(doc.Code) {
			bad("the code is not a snake_case identifier")
			ok = false
		} else if j, dup := first[doc.Code]; dup {
			bad("the code is documented already, by entry %d", j)
			ok = false
		} else {
			first[doc.Code] = i
		}
		if len(doc.Statuses) == 0 {
			bad("no status")
			ok = false
		}
		for k, s := range doc.Statuses {
			switch {
			case s < 400 || s > 599:
				bad("status %d is not a 4xx or 5xx", s)
				ok = false
			case slices.Contains(doc.Statuses[:k], s):
				bad("status %d is listed twice", s)
				ok = false
			}
		}
		for _, f := range [...]struct{ name, text string }{
			{"title", doc.Title}, {"description", doc.Description}, {"fix", doc.Fix},
		} {
			if strings.TrimSpace(f.text) == "" {
				bad("the %s is empty", f.name)
				ok = false
			}
		}
		if ok {
			doc.Statuses = slices.Sorted(slices.Values(doc.Statuses))
			d.docs = append(d.docs, doc)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(d.docs, func(a, b ProblemDoc) int { return strings.Compare(a.Code, b.Code) })
	for i, doc := range d.docs {
		d.byCode[doc.Code] = i
	}
	return d, nil
}

// Lookup returns the documentation of code, and whether there is any.
func (d *ProblemDocs) Lookup(code string) (ProblemDoc, bool) {
	if d == nil {
		return ProblemDoc{}, false
	}
	i, ok := d.byCode[code]
	if !ok {
		return ProblemDoc{}, false
	}
	return cloneDoc(d.docs[i]), true
}

// All returns every entry, sorted by code: a copy, which the caller may change.
func (d *ProblemDocs) All() []ProblemDoc {
	if d == nil {
		return nil
	}
	out := make([]ProblemDoc, len(d.docs))
	for i, doc := range d.docs {
		out[i] = cloneDoc(doc)
	}
	return out
}

// cloneDoc copies doc so that no caller shares the registry's Statuses.
func cloneDoc(doc ProblemDoc) ProblemDoc {
	doc.Statuses = slices.Clone(doc.Statuses)
	return doc
}
