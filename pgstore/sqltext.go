package pgstore

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The SQL of the event log and of every migration lives in .sql files (sql/, migrations/) with
// placeholders for the names a user configures: {{events}}, {{table_lit}}, …. The values are made
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

// invalidation sets the names of a cached store's invalidation triggers (migration 2 of credentials
// and pins): {{notify_fn}}, their function, beside table; {{notify_trigger}} and
// {{truncate_trigger}}, the triggers, named as CREATE TRIGGER wants them (a trigger belongs to its
// table), with {{…_lit}}, their names as pg_trigger.tgname holds them (cut to PostgreSQL's 63
// bytes), as literals; {{channel_lit}}, the channel the function notifies on (cacheChannel), as a
// literal.
func (n sqlNames) invalidation(table, channel string) {
	n.table("notify_fn", table+"_invalidate")
	for key, name := range map[string]string{"notify_trigger": table + "_invalidate", "truncate_trigger": table + "_invalidate_truncate"} {
		n.m[key], n.m[key+"_lit"] = quoteIdent(name), quoteLiteral(pgName(name))
	}
	n.m["channel_lit"] = quoteLiteral(channel)
}

// trigger sets {{key}} to a trigger's quoted name, unqualified as CREATE TRIGGER wants it (a
// trigger belongs to its table), and {{key_lit}} to that name as pg_trigger.tgname holds it (cut to
// 63 bytes), as a literal.
func (n sqlNames) trigger(key, name string) {
	n.m[key], n.m[key+"_lit"] = quoteIdent(name), quoteLiteral(pgName(name))
}

// pgName is name as PostgreSQL stores it: cut to 63 bytes (NAMEDATALEN - 1), never inside a
// character.
func pgName(name string) string {
	const maxName = 63
	if len(name) <= maxName {
		return name
	}
	cut := maxName
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut]
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
		var b strings.Builder
		_, uses, err := writeSQL(&b, tmpl, tag, names, false)
		if err != nil {
			return "", err
		}
		if out := b.String(); uses == 0 || strings.Count(out, tag) == uses {
			return out, nil
		}
	}
}

// writeSQL writes tmpl to w with each {{name}} replaced by names[name] and {{do}} by tag, leaving out
// the lines that are only a comment when strip is set (a statement's file explains it; the server
// need not receive the explanation with every query, which under the simple protocol, behind a
// transaction-mode pooler, means every execution). It reports how many bytes it wrote and how many
// tags; with a nil w it only counts, so that a caller can size its buffer first. Placeholders do not
// span lines.
func writeSQL(w *strings.Builder, tmpl, tag string, names map[string]string, strip bool) (size, uses int, err error) {
	write := func(s string) {
		size += len(s)
		if w != nil {
			w.WriteString(s)
		}
	}
	for tmpl != "" {
		line := tmpl
		if i := strings.IndexByte(tmpl, '\n'); i >= 0 {
			line = tmpl[:i+1]
		}
		tmpl = tmpl[len(line):]
		if strip && strings.HasPrefix(strings.TrimLeft(line, " \t"), "--") {
			continue
		}
		for {
			start := strings.Index(line, "{{")
			if start < 0 {
				write(line)
				break
			}
			end := strings.Index(line[start:], "}}")
			if end < 0 {
				return 0, 0, fmt.Errorf("pgstore: SQL template: unclosed {{ in %.40q", line[start:])
			}
			key := line[start+2 : start+end]
			v, ok := names[key]
			if key == "do" {
				v, ok = tag, true
				uses++
			}
			if !ok {
				return 0, 0, fmt.Errorf("pgstore: SQL template: no value for {{%s}}", key)
			}
			write(line[:start])
			write(v)
			line = line[start+end+2:]
		}
	}
	return size, uses, nil
}

// namedSQL returns the statement that follows the line "-- name: <name>" in file, up to the next
// such line or the end, without its trailing line breaks.
func namedSQL(file, name string) (string, bool) {
	const marker = "-- name: "
	for rest := file; ; {
		i := strings.Index(rest, marker)
		if i < 0 {
			return "", false
		}
		atLineStart := i == 0 || rest[i-1] == '\n'
		rest = rest[i+len(marker):]
		eol := strings.IndexByte(rest, '\n')
		if eol < 0 {
			return "", false
		}
		if !atLineStart || strings.TrimRight(rest[:eol], " \r") != name {
			continue
		}
		body := rest[eol+1:]
		if j := strings.Index(body, "\n"+marker); j >= 0 {
			body = body[:j+1]
		}
		return strings.TrimRight(body, "\n"), true
	}
}
