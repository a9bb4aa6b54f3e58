package main

import (
	"fmt"
	"go/constant"
	"go/token"
	"go/types"
	"sort"
	"strconv"
	"strings"
)

// packageLines returns one line for every exported identifier of pkg, unsorted:
//
//	pkg P, const C = 100                     (untyped int, string and bool constants)
//	pkg P, const C untyped float = 1/3       (other untyped constants)
//	pkg P, const C T = "v"                   (typed constants)
//	pkg P, var V T
//	pkg P, func F[T any](T, ...string) (int, error)
//	pkg P, type A = T                        (an alias)
//	pkg P, type T struct                     (then one line per exported field)
//	pkg P, type T struct, F T2
//	pkg P, type T struct, embedded *E
//	pkg P, type I interface { M, N }         (the method names, "unexported methods" when sealed)
//	pkg P, type I interface, M(string) error
//	pkg P, type C interface { ~int | ~string } (a constraint: its type set written out)
//	pkg P, type T int                        (any other defined type: its underlying type)
//	pkg P, method (*T) M(io.Reader) error    (every exported method of T's and *T's method sets)
//
// Type parameters keep their names, and a receiver's are those its method declares. Parameter names
// are left out, since they are no part of the API, and so are the tags of a named struct type's
// fields, as in the Go repository's record: they change encodings, not what compiles. An unnamed
// struct type keeps its tags, which are part of its identity. A type of another package is qualified
// by its full import path (net/http.Handler), never by its package name alone: two packages may share
// a name (crypto/rand and math/rand, or several driver packages), and a parameter that moves from one
// to the other must change its line.
func packageLines(pkg *types.Package) []string {
	p := &printer{pkg: pkg}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const:
			p.constant(obj)
		case *types.Var:
			p.emit("var %s %s", obj.Name(), p.typ(obj.Type()))
		case *types.Func:
			p.emit("func %s%s", obj.Name(), p.signature(obj.Type().(*types.Signature), true))
		case *types.TypeName:
			p.typeName(obj)
		}
	}
	return p.lines
}

// printer writes the lines of one package.
type printer struct {
	pkg   *types.Package
	lines []string
}

func (p *printer) emit(format string, args ...any) {
	p.lines = append(p.lines, "pkg "+p.pkg.Path()+", "+fmt.Sprintf(format, args...))
}

func (p *printer) constant(c *types.Const) {
	value := constValue(c.Val())
	if b, ok := c.Type().(*types.Basic); ok && b.Info()&types.IsUntyped != 0 {
		switch b.Kind() {
		case types.UntypedInt, types.UntypedString, types.UntypedBool:
			// The value's spelling says the kind: 100, "s", true.
			p.emit("const %s = %s", c.Name(), value)
		default:
			// 1 could be an untyped int, rune or float: say which.
			p.emit("const %s %s = %s", c.Name(), b.Name(), value)
		}
		return
	}
	p.emit("const %s %s = %s", c.Name(), p.typ(c.Type()), value)
}

// constValue writes a constant's exact value: a float as the shortest decimal that is exactly it
// (0.2, where ExactString says 1/5), or as a fraction when no float64 decimal is.
func constValue(v constant.Value) string {
	if v.Kind() == constant.Float {
		f, _ := constant.Float64Val(v)
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if constant.Compare(constant.MakeFromLiteral(s, token.FLOAT, 0), token.EQL, v) {
			return s
		}
	}
	return v.ExactString()
}

func (p *printer) typeName(obj *types.TypeName) {
	if alias, ok := obj.Type().(*types.Alias); ok {
		p.emit("type %s%s = %s", obj.Name(), p.typeParams(alias.TypeParams()), p.typ(alias.Rhs()))
		return
	}
	if obj.IsAlias() { // an alias the type checker did not materialize (gotypesalias=0)
		p.emit("type %s = %s", obj.Name(), p.typ(obj.Type()))
		return
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		return
	}
	decl := obj.Name() + p.typeParams(named.TypeParams())
	switch u := named.Underlying().(type) {
	case *types.Struct:
		p.emit("type %s struct", decl)
		for i := range u.NumFields() {
			f := u.Field(i)
			switch {
			case !f.Exported():
			case f.Embedded():
				p.emit("type %s struct, embedded %s", decl, p.typ(f.Type()))
			default:
				p.emit("type %s struct, %s %s", decl, f.Name(), p.typ(f.Type()))
			}
		}
	case *types.Interface:
		p.iface(decl, u)
		return // its methods are the interface's lines
	default:
		p.emit("type %s %s", decl, p.typ(u))
	}
	p.methods(named)
}

// iface writes an interface type: a line that names its methods, then a line per exported method.
// A constraint (an interface with a type set, such as ~int | ~string) is written out whole instead
// of by method names, since its terms are its API.
func (p *printer) iface(decl string, u *types.Interface) {
	var names []string
	sealed := false
	for i := range u.NumMethods() {
		m := u.Method(i)
		if m.Exported() {
			names = append(names, m.Name())
			p.emit("type %s interface, %s%s", decl, m.Name(), p.signature(m.Type().(*types.Signature), false))
		} else {
			sealed = true
		}
	}
	if !u.IsMethodSet() {
		p.emit("type %s interface %s", decl, strings.TrimPrefix(p.typ(u), "interface"))
		return
	}
	sort.Strings(names)
	if sealed {
		names = append(names, "unexported methods")
	}
	if len(names) == 0 {
		p.emit("type %s interface {}", decl)
		return
	}
	p.emit("type %s interface { %s }", decl, strings.Join(names, ", "))
}

// methods writes the exported methods of named's method set, with a value receiver, and those that
// only *named's method set has, with a pointer receiver. Methods promoted from embedded fields are
// among them, as they are callable on the type.
func (p *printer) methods(named *types.Named) {
	value := types.NewMethodSet(named)
	seen := map[string]bool{}
	for i := range value.Len() {
		p.method(named, value.At(i), false)
		seen[value.At(i).Obj().Name()] = true
	}
	ptr := types.NewMethodSet(types.NewPointer(named))
	for i := range ptr.Len() {
		if !seen[ptr.At(i).Obj().Name()] {
			p.method(named, ptr.At(i), true)
		}
	}
}

func (p *printer) method(named *types.Named, sel *types.Selection, pointer bool) {
	m := sel.Obj().(*types.Func)
	if !m.Exported() {
		return
	}
	sig := m.Type().(*types.Signature)
	// The receiver's type parameters are named as the method declares them, so that they match
	// the names in its signature; a promoted method takes the outer type's.
	tparams := named.TypeParams()
	if len(sel.Index()) == 1 && sig.RecvTypeParams().Len() > 0 {
		tparams = sig.RecvTypeParams()
	}
	recv := named.Obj().Name()
	if tparams.Len() > 0 {
		names := make([]string, tparams.Len())
		for i := range names {
			names[i] = tparams.At(i).Obj().Name()
		}
		recv += "[" + strings.Join(names, ", ") + "]"
	}
	if pointer {
		recv = "*" + recv
	}
	p.emit("method (%s) %s%s", recv, m.Name(), p.signature(sig, false))
}

// typeParams writes a type parameter list, [K comparable, V any], or nothing.
func (p *printer) typeParams(list *types.TypeParamList) string {
	if list.Len() == 0 {
		return ""
	}
	parts := make([]string, list.Len())
	for i := range parts {
		tp := list.At(i)
		parts[i] = tp.Obj().Name() + " " + p.typ(tp.Constraint())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// signature writes a function's type parameters (when withTypeParams), parameters and results,
// without their names: [T any](T, ...string) (int, error).
func (p *printer) signature(sig *types.Signature, withTypeParams bool) string {
	var b strings.Builder
	if withTypeParams {
		b.WriteString(p.typeParams(sig.TypeParams()))
	}
	b.WriteString("(")
	params := sig.Params()
	for i := range params.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		t := params.At(i).Type()
		if sig.Variadic() && i == params.Len()-1 {
			b.WriteString("...")
			if s, ok := t.(*types.Slice); ok {
				t = s.Elem()
			}
		}
		b.WriteString(p.typ(t))
	}
	b.WriteString(")")
	switch results := sig.Results(); results.Len() {
	case 0:
	case 1:
		b.WriteString(" " + p.typ(results.At(0).Type()))
	default:
		b.WriteString(" " + p.tuple(results))
	}
	return b.String()
}

func (p *printer) tuple(t *types.Tuple) string {
	parts := make([]string, t.Len())
	for i := range parts {
		parts[i] = p.typ(t.At(i).Type())
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// typ writes a type as Go source would, with the qualification packageLines describes and without
// parameter names.
func (p *printer) typ(t types.Type) string {
	switch t := t.(type) {
	case *types.Basic:
		return t.Name()
	case *types.Pointer:
		return "*" + p.typ(t.Elem())
	case *types.Slice:
		return "[]" + p.typ(t.Elem())
	case *types.Array:
		return "[" + strconv.FormatInt(t.Len(), 10) + "]" + p.typ(t.Elem())
	case *types.Map:
		return "map[" + p.typ(t.Key()) + "]" + p.typ(t.Elem())
	case *types.Chan:
		elem := p.typ(t.Elem())
		switch t.Dir() {
		case types.SendOnly:
			return "chan<- " + elem
		case types.RecvOnly:
			return "<-chan " + elem
		}
		if c, ok := t.Elem().(*types.Chan); ok && c.Dir() == types.RecvOnly {
			return "chan (" + elem + ")" // chan <-chan T would read as chan<- (chan T)
		}
		return "chan " + elem
	case *types.Signature:
		return "func" + p.signature(t, false)
	case *types.Tuple:
		return p.tuple(t)
	case *types.Struct:
		if t.NumFields() == 0 {
			return "struct{}"
		}
		fields := make([]string, t.NumFields())
		for i := range fields {
			f := t.Field(i)
			s := p.typ(f.Type())
			if !f.Embedded() {
				s = f.Name() + " " + s
			}
			if tag := t.Tag(i); tag != "" { // part of an unnamed struct type's identity
				if strconv.CanBackquote(tag) {
					s += " `" + tag + "`"
				} else {
					s += " " + strconv.Quote(tag)
				}
			}
			fields[i] = s
		}
		return "struct{ " + strings.Join(fields, "; ") + " }"
	case *types.Interface:
		if t.IsImplicit() { // the constraint in [T ~int | ~string]
			return p.typ(t.EmbeddedType(0))
		}
		var parts []string
		for i := range t.NumEmbeddeds() {
			parts = append(parts, p.typ(t.EmbeddedType(i)))
		}
		for i := range t.NumExplicitMethods() {
			m := t.ExplicitMethod(i)
			parts = append(parts, m.Name()+p.signature(m.Type().(*types.Signature), false))
		}
		if len(parts) == 0 {
			return "interface{}"
		}
		return "interface{ " + strings.Join(parts, "; ") + " }"
	case *types.Union:
		terms := make([]string, t.Len())
		for i := range terms {
			term := t.Term(i)
			terms[i] = p.typ(term.Type())
			if term.Tilde() {
				terms[i] = "~" + terms[i]
			}
		}
		return strings.Join(terms, " | ")
	case *types.TypeParam:
		return t.Obj().Name()
	case *types.Named:
		return p.qualified(t.Obj()) + p.typeArgs(t.TypeArgs())
	case *types.Alias:
		return p.qualified(t.Obj()) + p.typeArgs(t.TypeArgs())
	}
	panic(fmt.Sprintf("apirecord: a type of kind %T (%v) it cannot write", t, t))
}

// qualified is a named type's name, after its package's import path unless it is of the package
// being written or predeclared (error, any, comparable).
func (p *printer) qualified(obj *types.TypeName) string {
	if obj.Pkg() == nil || obj.Pkg().Path() == p.pkg.Path() {
		return obj.Name()
	}
	return obj.Pkg().Path() + "." + obj.Name()
}

func (p *printer) typeArgs(list *types.TypeList) string {
	if list.Len() == 0 {
		return ""
	}
	parts := make([]string, list.Len())
	for i := range parts {
		parts[i] = p.typ(list.At(i))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
