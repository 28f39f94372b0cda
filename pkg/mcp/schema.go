package mcp

import (
	"encoding/json"
	"reflect"
	"strings"
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

func schemaOf(t reflect.Type, seen map[reflect.Type]bool) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
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
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), seen)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), seen)}
	case reflect.Struct:
		if seen[t] {
			return map[string]any{"type": "object"} // recursive type: stop here
		}
		seen[t] = true
		defer delete(seen, t)
		props := map[string]any{}
		var required []string
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
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
			if !strings.Contains(opts, "omitempty") && f.Tag.Get("default") == "" {
				required = append(required, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return map[string]any{}
}
