package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// Errors of a call's arguments; the hub answers them with -32602 (invalid
// params) and the error's text, which names nothing but the argument.
var (
	// ErrFixedArgument is a client sending an argument the catalog fixes.
	ErrFixedArgument = errors.New("the argument is fixed by the virtual server")
	// ErrArgumentsNotObject is arguments that are not a JSON object.
	ErrArgumentsNotObject = errors.New("arguments must be a JSON object")
)

// setFixed takes the fixed arguments (a JSON object) out of the tool's
// input schema o["inputSchema"]: out of its properties and its required
// list. The rest of the schema passes through.
func (it *Item) setFixed(o mcp.Object, fixed json.RawMessage) error {
	var members []byte
	for k, v := range jsonrpc.Members(fixed) {
		it.fixedKeys = append(it.fixedKeys, string(k))
		if len(members) > 0 {
			members = append(members, ',')
		}
		members = jsonrpc.AppendString(members, string(k))
		members = append(members, ':')
		members = append(members, v...)
	}
	slices.Sort(it.fixedKeys)
	it.fixed = members
	if len(it.fixedKeys) == 0 {
		return nil
	}
	raw, ok := o["inputSchema"]
	if !ok {
		return nil
	}
	schema, err := mcp.ParseObject(raw)
	if err != nil {
		return fmt.Errorf("inputSchema: %w", err)
	}
	if props, ok := schema["properties"]; ok {
		p, err := mcp.ParseObject(props)
		if err != nil {
			return fmt.Errorf("inputSchema.properties: %w", err)
		}
		for _, k := range it.fixedKeys {
			delete(p, k)
		}
		schema["properties"] = p.Raw()
	}
	if req, ok := schema["required"]; ok {
		var names []string
		if json.Unmarshal(req, &names) == nil {
			names = slices.DeleteFunc(names, func(n string) bool { return slices.Contains(it.fixedKeys, n) })
			if len(names) == 0 {
				delete(schema, "required")
			} else {
				schema.Set("required", names)
			}
		}
	}
	o["inputSchema"] = schema.Raw()
	return nil
}

// declares reports whether a tool's input schema lists the parameter.
func declares(tool json.RawMessage, param string) bool {
	schema, _ := jsonrpc.Member(tool, "inputSchema")
	props, _ := jsonrpc.Member(schema, "properties")
	_, ok := jsonrpc.Member(props, param)
	return ok
}

// Fixed returns the names of the arguments the catalog fixes for this
// tool, sorted; none for a tool without them.
func (it *Item) Fixed() []string { return it.fixedKeys }

// Arguments returns the arguments a call sends its server: the client's
// (raw JSON as the decoder left it: an object, null or absent) with the
// fixed arguments added. A client that sends a fixed argument gets an error
// wrapping ErrFixedArgument; arguments that are not an object,
// ErrArgumentsNotObject. Without fixed arguments the client's pass
// through untouched. The client's arguments are scanned once and copied
// once, never decoded.
func (it *Item) Arguments(args json.RawMessage) (json.RawMessage, error) {
	body := trimSpace(args)
	absent := len(body) == 0 || string(body) == "null"
	if !absent && (body[0] != '{' || body[len(body)-1] != '}') {
		return nil, ErrArgumentsNotObject
	}
	if len(it.fixed) == 0 {
		return args, nil
	}
	if absent {
		out := make([]byte, 0, len(it.fixed)+2)
		out = append(out, '{')
		out = append(out, it.fixed...)
		return append(out, '}'), nil
	}
	empty := true
	for k := range jsonrpc.Members(body) {
		empty = false
		if _, found := slices.BinarySearch(it.fixedKeys, string(k)); found {
			return nil, fmt.Errorf("%w: %q", ErrFixedArgument, string(k))
		}
	}
	out := make([]byte, 0, len(body)+len(it.fixed)+1)
	if empty {
		out = append(out, '{')
	} else {
		out = append(out, body[:len(body)-1]...) // up to the closing brace
		out = append(out, ',')
	}
	out = append(out, it.fixed...)
	return append(out, '}'), nil
}

// trimSpace trims JSON white space from both ends.
func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
