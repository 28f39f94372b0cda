package mcp

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// SchemaFor returns a JSON Schema for the Go type T, for a tool's
// inputSchema. It covers what tool arguments use: structs (members named by
// their json tags, required unless omitempty, a `description:"..."` tag and
// `enum:"a,b,c"` tag read), strings, numbers, booleans, slices, maps and
// pointers. A default value is given by a `default:"..."` tag holding JSON.
func SchemaFor[T any]() json.RawMessage {
	raw, _ := json.Marshal(schemaOf(reflect.TypeFor[T](), map[reflect.Type]bool{}))
	return raw
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	rawMessageType    = reflect.TypeFor[json.RawMessage]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func schemaOf(t reflect.Type, seen map[reflect.Type]bool) map[string]any {
	for t.Kind() == reflect.Pointer {
		if t.Elem() == t {
			return map[string]any{} // type P *P: nothing to say
		}
		t = t.Elem()
	}
	// Types that encode themselves say what they look like only where we
	// know it; otherwise any JSON value.
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawMessageType:
		return map[string]any{}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return map[string]any{"type": "string", "contentEncoding": "base64"}
	case t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType):
		return map[string]any{}
	case t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType):
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	}
	// A named type may refer to itself (only a name can): describe it once
	// on each path, then stop.
	if seen[t] {
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			return map[string]any{"type": "array"}
		}
		return map[string]any{"type": "object"}
	}
	if t.Name() != "" {
		seen[t] = true
		defer delete(seen, t)
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), seen)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), seen)}
	case reflect.Struct:
		props := map[string]any{}
		var required []string
		addFields(t, seen, props, &required)
		s := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return map[string]any{}
}

// addFields adds a struct's fields to props as encoding/json sees them: the
// fields of an embedded struct without a json name are promoted.
func addFields(t reflect.Type, seen map[reflect.Type]bool, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if !seen[ft] {
					seen[ft] = true
					addFields(ft, seen, props, required)
					delete(seen, ft)
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := schemaOf(f.Type, seen)
		if d := f.Tag.Get("description"); d != "" {
			s["description"] = d
		}
		if e := f.Tag.Get("enum"); e != "" {
			s["enum"] = strings.Split(e, ",")
		}
		if d := f.Tag.Get("default"); d != "" && json.Valid([]byte(d)) {
			s["default"] = json.RawMessage(d)
		}
		props[name] = s
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") && f.Tag.Get("default") == "" {
			*required = append(*required, name)
		}
	}
}
