package mcp

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// A tool's arguments and its structured result are most of the bytes of MCP
// traffic, and they usually arrive as raw JSON. encoding/json re-validates
// and compacts every raw byte it embeds, at several times the cost of one
// validating scan, so these two types encode the rest of themselves with
// encoding/json and splice the raw member in (see jsonrpc.Appender).

var (
	_ jsonrpc.Appender = (*CallToolParams)(nil)
	_ jsonrpc.Appender = (*CallToolResult)(nil)
)

// AppendJSON appends the params' JSON encoding to b, copying raw Arguments
// as they are once they are known to be valid JSON.
func (p *CallToolParams) AppendJSON(b []byte) ([]byte, error) {
	rest := *p
	rest.Arguments = nil
	return appendWithRaw(b, &rest, "arguments", p.Arguments)
}

// AppendJSON appends the result's JSON encoding to b, copying a
// StructuredContent of type json.RawMessage as it is once it is known to be
// valid JSON. The most common results, text blocks and raw structured
// content, are encoded without encoding/json at all.
func (r *CallToolResult) AppendJSON(b []byte) ([]byte, error) {
	raw, ok := r.StructuredContent.(json.RawMessage)
	if !ok && r.StructuredContent != nil {
		return appendMarshal(b, r)
	}
	if r.Meta == nil && r.InputRequests == nil && r.RequestState == "" && !slices.ContainsFunc(r.Content, notPlainText) {
		if len(raw) > 0 && !jsonrpc.Valid(raw) {
			return nil, fmt.Errorf("mcp: structuredContent is not valid JSON")
		}
		b = append(b, `{"content":[`...)
		for i, c := range r.Content {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"text","text":`...)
			b = append(jsonrpc.AppendString(b, c.Text), '}')
		}
		b = append(b, ']')
		if len(raw) > 0 {
			b = append(append(b, `,"structuredContent":`...), raw...)
		}
		if r.IsError {
			b = append(b, `,"isError":true`...)
		}
		return append(b, '}'), nil
	}
	rest := *r
	rest.StructuredContent = nil
	return appendWithRaw(b, &rest, "structuredContent", raw)
}

// SizeHint is about the size of the result's encoding, its text and raw
// structured content counted, its other members guessed: what a peer sizes
// the answer's frame from (it encodes the result straight into it).
func (r *CallToolResult) SizeHint() int {
	n := 64
	if raw, ok := r.StructuredContent.(json.RawMessage); ok {
		n += len(raw)
	}
	for _, c := range r.Content {
		n += 32 + len(c.Text) + len(c.Data)
	}
	return n
}

// notPlainText reports whether c is anything but a text block with text
// alone.
func notPlainText(c Content) bool {
	return c.Type != "text" || c.Data != "" || c.MIMEType != "" || c.URI != "" || c.Name != "" ||
		c.Title != "" || c.Description != "" || c.Resource != nil || c.Annotations != nil || c.Meta != nil
}

// appendWithRaw appends the object rest encodes to, with the member key set
// to raw (left out when raw is empty, as omitempty would).
func appendWithRaw(b []byte, rest any, key string, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return appendMarshal(b, rest)
	}
	if !jsonrpc.Valid(raw) {
		return nil, fmt.Errorf("mcp: %s is not valid JSON", key)
	}
	obj, err := json.Marshal(rest)
	if err != nil {
		return nil, err
	}
	b = slices.Grow(b, len(obj)+len(key)+len(raw)+4)
	b = append(b, obj[:len(obj)-1]...) // without its '}'
	if len(obj) > 2 {
		b = append(b, ',')
	}
	b = jsonrpc.AppendString(b, key)
	b = append(b, ':')
	b = append(b, raw...)
	return append(b, '}'), nil
}

func appendMarshal(b []byte, v any) ([]byte, error) {
	obj, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return obj, nil
	}
	return append(b, obj...), nil
}
