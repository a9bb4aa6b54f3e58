package strictjson

import (
	"reflect"
	"slices"
	"strings"
)

type field struct {
	name   string
	index  []int
	tagged bool
	typ    reflect.Type
	quoted bool // the ",string" option: the JSON value is a string that holds the Go value
}

// structInfo is a struct's JSON members in encoding/json's order, with an index by exact name.
type structInfo struct {
	list   []field
	byName map[string]int
}

// structFields lists a struct's JSON member names by the rules of encoding/json's typeFields: tags, "-",
// the fields of embedded structs promoted, a shallower field hiding deeper ones of the same name, a
// tagged one winning at equal depth, and names that stay ambiguous dropped.
func structFields(t reflect.Type) *structInfo {
	var all []field
	type level struct {
		typ   reflect.Type
		index []int
	}
	next := []level{{typ: t}}
	// Types walked at a shallower depth are not walked again; one embedded twice at the same depth is,
	// so that its fields come out ambiguous, as in encoding/json.
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current := slices.DeleteFunc(next, func(lv level) bool { return visited[lv.typ] })
		next = nil
		for _, lv := range current {
			visited[lv.typ] = true
		}
		for _, lv := range current {
			for i := range lv.typ.NumField() {
				f := lv.typ.Field(i)
				if f.Anonymous {
					et := f.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !f.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !f.IsExported() {
					continue
				}
				tag := f.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				index := append(slices.Clip(lv.index), i)
				ft := f.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name == "" && f.Anonymous && ft.Kind() == reflect.Struct {
					next = append(next, level{typ: ft, index: index})
					continue
				}
				quoted := false
				if slices.Contains(strings.Split(opts, ","), "string") {
					switch ft.Kind() {
					case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
						reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
						reflect.Float32, reflect.Float64, reflect.String:
						quoted = true
					}
				}
				tagged := name != ""
				if !tagged {
					name = f.Name
				}
				all = append(all, field{name: name, index: index, tagged: tagged, typ: f.Type, quoted: quoted})
			}
		}
	}
	// Per name: keep the shallowest; at equal depth a single tagged field wins, otherwise none does.
	slices.SortStableFunc(all, func(a, b field) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := len(a.index) - len(b.index); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	var out []field
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].name == all[i].name {
			j++
		}
		if j-i == 1 || len(all[i].index) != len(all[i+1].index) || all[i].tagged != all[i+1].tagged {
			out = append(out, all[i])
		}
		i = j
	}
	slices.SortFunc(out, func(a, b field) int { return slices.Compare(a.index, b.index) })
	info := &structInfo{list: out, byName: make(map[string]int, len(out))}
	for i, f := range out {
		info.byName[f.name] = i
	}
	return info
}

// lookup matches a key as encoding/json does: exactly first, then the first field, in field order, whose
// name matches case-insensitively.
func (s *structInfo) lookup(key string) (field, bool) {
	if i, ok := s.byName[key]; ok {
		return s.list[i], true
	}
	for _, f := range s.list {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return field{}, false
}

// jsonKind names the JSON type a Go type takes, with an article.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		if t == numberType {
			return "a number"
		}
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.Kind().String()
}
