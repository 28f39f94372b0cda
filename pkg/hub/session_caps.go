package hub

import (
	"bytes"
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// clientCaps are what a client declared it can do for servers, as far as
// routing a server's request to it is concerned. They travel with a call to
// the instance of its server.
type clientCaps struct {
	Sampling      bool `json:"s,omitempty"`
	SamplingTools bool `json:"st,omitempty"`
	ElicitForm    bool `json:"ef,omitempty"`
	ElicitURL     bool `json:"eu,omitempty"`
	Roots         bool `json:"r,omitempty"`
	// Tasks: it negotiated the tasks extension (a modern client's
	// request), so that a call may be answered with a task.
	Tasks bool `json:"t,omitempty"`
}

// capsTable holds every combination of clientCaps once, so that the
// envelopes that carry them (one with every call between instances) point
// into it instead of allocating a copy each.
var capsTable = func() (t [64]clientCaps) {
	for i := range t {
		t[i] = clientCaps{Sampling: i&1 != 0, SamplingTools: i&2 != 0, ElicitForm: i&4 != 0, ElicitURL: i&8 != 0, Roots: i&16 != 0,
			Tasks: i&32 != 0}
	}
	return t
}()

// shared returns c's copy in capsTable. Nothing may write through it.
func (c clientCaps) shared() *clientCaps { return &capsTable[c.index()] }

// index is c's place in capsTable.
func (c clientCaps) index() int {
	i := 0
	for bit, on := range [...]bool{c.Sampling, c.SamplingTools, c.ElicitForm, c.ElicitURL, c.Roots, c.Tasks} {
		if on {
			i |= 1 << bit
		}
	}
	return i
}

// parseClientCaps reads the capabilities of an initialize request (or of
// a 2026-07-28 request's _meta), in one pass over its members: sampling and
// elicitation count when they are objects, roots whatever its value. (A
// modern client's every call reads them: a map by encoding/json cost five
// allocations each time.)
func parseClientCaps(raw json.RawMessage) clientCaps {
	var c clientCaps
	for name, v := range jsonrpc.Members(raw) {
		switch string(name) {
		case "sampling":
			c.Sampling, c.SamplingTools = false, false
			if isObject(v) {
				c.Sampling = true
				_, c.SamplingTools = jsonrpc.Member(v, "tools")
			}
		case "elicitation":
			c.ElicitForm, c.ElicitURL = false, false
			if isObject(v) {
				_, form := jsonrpc.Member(v, "form")
				_, url := jsonrpc.Member(v, "url")
				// An empty object predates modes and means form.
				c.ElicitForm, c.ElicitURL = form || !url, url
			}
		case "roots":
			c.Roots = true
		}
	}
	return c
}

// isObject reports whether the raw JSON value v is an object.
func isObject(v []byte) bool {
	v = bytes.TrimLeft(v, " \t\r\n")
	return len(v) > 0 && v[0] == '{'
}

// check answers whether a server's request may go to this client: nil, or
// an error saying which capability the client lacks. The method table says
// which capability each request needs; the params say which part of it.
func (c clientCaps) check(method string, params mcp.Object) error {
	spec, ok := mcp.LookupMethod(method)
	if !ok {
		return nil
	}
	missing := ""
	switch spec.ClientCap {
	case "sampling":
		switch {
		case !c.Sampling:
			missing = "sampling"
		case hasValue(params, "tools") && !c.SamplingTools:
			missing = "sampling.tools"
		}
	case "elicitation":
		mode, _ := params.String("mode")
		switch {
		case mode == "url" && !c.ElicitURL:
			missing = "elicitation.url"
		case mode != "url" && !c.ElicitForm:
			missing = "elicitation (form)"
		}
	case "roots":
		if !c.Roots {
			missing = "roots"
		}
	}
	if missing != "" {
		return errMissingCapability(missing, method)
	}
	return nil
}

func hasValue(o mcp.Object, key string) bool {
	v, ok := o[key]
	return ok && string(v) != "null"
}
