package strictjson

import (
	"reflect"
	"strings"
	"sync"
)

// Kinds of destination the scan distinguishes.
const (
	shapeAny    = iota // interface{}, json.RawMessage, a custom unmarshaler, a ",string" field: names are not checked
	shapeStruct        // member names must match a field exactly
	shapeMap           // any member name; values of one type
	shapeList          // slice or array
	shapeScalar        // anything else: encoding/json reports a wrong type
)

// shape is what the scan needs to know of a destination type.
type shape struct {
	kind   int
	fields map[string]*shape // shapeStruct: exact member name → its shape
	names  []string          // shapeStruct: the member names, for the case-variant check
	elem   *shape            // shapeMap and shapeList
}

var (
	anyShape    = &shape{kind: shapeAny}
	scalarShape = &shape{kind: shapeScalar}
	shapeCache  sync.Map // reflect.Type → *shape
	shapeMu     sync.Mutex
)

// shapeOf returns the cached shape of t, building it (and those of the types it holds) once.
func shapeOf(t reflect.Type) *shape {
	if s, ok := shapeCache.Load(t); ok {
		return s.(*shape)
	}
	shapeMu.Lock()
	defer shapeMu.Unlock()
	building := map[reflect.Type]*shape{}
	s := buildShape(t, building)
	for bt, bs := range building {
		shapeCache.Store(bt, bs)
	}
	return s
}

func buildShape(t reflect.Type, building map[reflect.Type]*shape) *shape {
	for t.Kind() == reflect.Pointer {
		if t != numberType && (t.Implements(unmarshalerType) || t.Implements(textUnmarshalerType)) {
			return anyShape
		}
		t = t.Elem()
	}
	if s, ok := shapeCache.Load(t); ok {
		return s.(*shape)
	}
	if s, ok := building[t]; ok {
		return s // a recursive type: the shape is being filled in
	}
	if t != numberType && (reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)) {
		return anyShape
	}
	switch t.Kind() {
	case reflect.Interface:
		return anyShape
	case reflect.Struct:
		s := &shape{kind: shapeStruct}
		building[t] = s
		info := structFields(t)
		s.fields = make(map[string]*shape, len(info.list))
		for _, f := range info.list {
			fs := anyShape
			if !f.quoted {
				fs = buildShape(f.typ, building)
			}
			s.fields[f.name] = fs
			s.names = append(s.names, f.name)
		}
		return s
	case reflect.Map:
		s := &shape{kind: shapeMap}
		building[t] = s
		s.elem = buildShape(t.Elem(), building)
		return s
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(unmarshalerType) &&
			!reflect.PointerTo(t.Elem()).Implements(textUnmarshalerType) {
			return scalarShape // []byte is a base64 string
		}
		s := &shape{kind: shapeList}
		building[t] = s
		s.elem = buildShape(t.Elem(), building)
		return s
	case reflect.Array:
		s := &shape{kind: shapeList}
		building[t] = s
		s.elem = buildShape(t.Elem(), building)
		return s
	}
	return scalarShape
}

// foldMatch reports whether name matches one of the struct's member names when case is ignored, as
// encoding/json would match it.
func (s *shape) foldMatch(name string) bool {
	for _, n := range s.names {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}
