package pgstore

import (
	"fmt"
	"strconv"
	"strings"
)

// The SQL of every migration lives in .sql files (migrations/) with placeholders for the names a
// user configures: {{events}}, {{table_lit}}, …. The values are made
// here, by quoting, never taken as written: a name becomes a quoted identifier (quoteIdent, qualify)
// or a quoted literal of one (quoteLiteral), so no configured name can change what a statement does.

// sqlNames holds the values of a template's placeholders for one schema.
type sqlNames struct {
	schema string
	m      map[string]string
}

func newSQLNames(schema string) sqlNames { return sqlNames{schema: schema, m: make(map[string]string)} }

// table sets {{key}} to the relation's qualified, quoted name and {{key_lit}} to that name as a
// literal, for the catalog functions (to_regclass, ::regclass) that parse it.
func (n sqlNames) table(key, name string) {
	q := qualify(n.schema, name)
	n.m[key], n.m[key+"_lit"] = q, quoteLiteral(q)
}

// index sets {{key}} to the index's quoted name, unqualified as CREATE INDEX wants it (an index
// lives in its table's schema), and {{key_lit}} to its qualified name as a literal.
func (n sqlNames) index(key, name string) {
	n.m[key], n.m[key+"_lit"] = quoteIdent(name), quoteLiteral(qualify(n.schema, name))
}

// quoteLiteral quotes s as an SQL string literal (standard_conforming_strings, PostgreSQL's default
// since 9.1, makes backslashes plain characters).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// renderSQL returns tmpl with each {{name}} replaced by names[name]. {{do}} is the dollar-quote tag
// of a DO block's body, chosen so that it occurs nowhere else in the result, which holds names a user
// chose: no name can end the body early. A placeholder that names nothing is an error (a bug of this
// package, which its tests find by rendering every file).
func renderSQL(tmpl string, names map[string]string) (string, error) {
	for i := 0; ; i++ {
		tag := "$pgstore$"
		if i > 0 {
			tag = "$pgstore" + strconv.Itoa(i) + "$"
		}
		out, uses, err := substituteSQL(tmpl, names, tag)
		if err != nil {
			return "", err
		}
		if uses == 0 || strings.Count(out, tag) == uses {
			return out, nil
		}
	}
}

// substituteSQL replaces the placeholders of tmpl, {{do}} by tag, and counts the tags it wrote.
func substituteSQL(tmpl string, names map[string]string, tag string) (string, int, error) {
	var (
		b    strings.Builder
		uses int
	)
	b.Grow(len(tmpl) + len(tmpl)/4)
	for {
		start := strings.Index(tmpl, "{{")
		if start < 0 {
			b.WriteString(tmpl)
			return b.String(), uses, nil
		}
		end := strings.Index(tmpl[start:], "}}")
		if end < 0 {
			return "", 0, fmt.Errorf("pgstore: SQL template: unclosed {{ in %.40q", tmpl[start:])
		}
		key := tmpl[start+2 : start+end]
		v, ok := names[key]
		if key == "do" {
			v, ok = tag, true
			uses++
		}
		if !ok {
			return "", 0, fmt.Errorf("pgstore: SQL template: no value for {{%s}}", key)
		}
		b.WriteString(tmpl[:start])
		b.WriteString(v)
		tmpl = tmpl[start+end+2:]
	}
}

// stripSQLComments drops the lines of s that are only a comment: the statements' files explain
// them, and the server need not receive the explanation with every query (under the simple
// protocol, behind a transaction-mode pooler, the text is sent with every execution).
func stripSQLComments(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for line := range strings.Lines(s) {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
	}
	return strings.TrimRight(b.String(), "\n")
}
