package hub

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/switchboard-mcp/switchboard/pkg/catalog"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The call path of a virtual server's endpoint (/servers/<virtual>/mcp):
// a name the client calls is looked up in the virtual server's view
// (pkg/catalog's reverse map), which gives its member server and the
// server's own name; tokens are checked against the client-facing name
// (<virtual><sep><name>), as on any server's endpoint. The params are
// edited as bytes, as for any call: the server's own name spliced in (a
// 2026-07-28 server's Mcp-Name header, which its client sets from the
// name, says the server's name too), and the fixed arguments added after
// the client's. A client that sends a fixed argument gets -32602, and the
// call goes nowhere. From there on the call is any call: picked, forwarded,
// answered.

// resolveVirtual finds the target of a tools/call or prompts/get on a
// virtual server's endpoint. A tool the virtual server lists, called
// directly (listed), has its Mcp-Param-* headers checked against its schema
// as listed there, fixed arguments out.
func (h *Hub) resolveVirtual(s *session, v *view, vl *virtualLists, k listKind, name string, rawName []byte, params json.RawMessage, listed bool) (*target, error) {
	facing := vl.vs.Name + h.cfg.Separator + name
	var it *catalog.Item
	var ok bool
	switch k {
	case kindTools:
		if !s.who.mayCall(facing) {
			return nil, forbidden(s.who, "call tool "+strconv.Quote(name))
		}
		it, ok = vl.view.Tool(name)
	default:
		if !s.who.mayGetPrompt(facing) {
			return nil, forbidden(s.who, "get prompt "+strconv.Quote(name))
		}
		it, ok = vl.view.Prompt(name)
	}
	var agg *aggItem
	if ok {
		agg = v.lookup(k, it.Server+h.cfg.Separator+it.Orig)
	}
	if agg == nil {
		return nil, errUnknownItem(k.conflictKind(), name)
	}
	if k == kindTools && listed {
		args, _ := jsonrpc.Member(params, "arguments")
		if err := s.checkParamHeaders(it.Raw, args); err != nil { // as the virtual server lists it
			return nil, err
		}
	}
	out, err := renamed(params, rawName, it.Orig, 1)
	if err != nil {
		return nil, err
	}
	if k == kindTools && len(it.Fixed()) > 0 {
		args, _ := jsonrpc.Member(out, "arguments")
		with, err := it.Arguments(args)
		if err != nil {
			return nil, errArguments(err)
		}
		if out, err = jsonrpc.SetMember(out, "arguments", with); err != nil {
			return nil, errParamsNotObject
		}
	}
	return &target{server: it.Server, replicas: agg.replicas, body: out, item: it.Orig}, nil
}

// errArguments answers arguments a virtual server refuses: a fixed one
// sent anyway, or arguments that are not an object.
func errArguments(err error) error {
	if errors.Is(err, catalog.ErrFixedArgument) || errors.Is(err, catalog.ErrArgumentsNotObject) {
		return jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%s", err.Error())
	}
	return errParamsNotObject
}

// resolveCallTool finds the target of call_tool {name, arguments} in
// search mode: the tool named, called by that name with those arguments,
// as if the client had called it directly (its _meta, progress token and
// all, goes with it).
func (h *Hub) resolveCallTool(s *session, v *view, params json.RawMessage) (*target, error) {
	args, _ := jsonrpc.Member(params, "arguments")
	name, inner, err := catalog.ParseCallArgs(args)
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%s", err.Error())
	}
	o, err := mcp.ParseObject(params)
	if err != nil {
		return nil, err
	}
	o.Set("name", name)
	if inner == nil {
		delete(o, "arguments")
	} else {
		o["arguments"] = inner
	}
	return h.resolveNamed(s, v, kindTools, o.Raw(), false)
}

// virtualResourceServer finds the member server of a resource a client
// reads or subscribes to on a virtual server's endpoint: one the virtual
// server offers (by its resource picks), that the token may use there.
func (h *Hub) virtualResourceServer(s *session, vl *virtualLists, uri string) (string, error) {
	server, ok := vl.view.ServerOfURI(uri)
	if !ok {
		return "", errResourceNotFound(uri)
	}
	if !s.who.mayRead(vl.vs.Name, uri, h.cfg.Separator) {
		return "", forbidden(s.who, "use resource "+strconv.Quote(uri))
	}
	return server, nil
}

// completeVirtualPrompt finds the target of completion/complete for a
// prompt of a virtual server: its member, under the member's own name.
func (h *Hub) completeVirtualPrompt(s *session, v *view, vl *virtualLists, params, ref mcp.Object, name string) (*target, error) {
	if !s.who.admits(vl.vs.Name + h.cfg.Separator + name) {
		return nil, forbidden(s.who, "complete prompt "+strconv.Quote(name))
	}
	it, ok := vl.view.Prompt(name)
	var agg *aggItem
	if ok {
		agg = v.lookup(kindPrompts, it.Server+h.cfg.Separator+it.Orig)
	}
	if agg == nil {
		return nil, errUnknownItem("prompt", name)
	}
	ref.Set("name", it.Orig)
	params["ref"] = ref.Raw()
	return &target{server: it.Server, replicas: agg.replicas, body: params.Raw()}, nil
}

// completeVirtualTemplate finds the target of completion/complete for a
// resource template a virtual server lists; nil and no error when it
// lists no such template.
func (h *Hub) completeVirtualTemplate(s *session, v *view, vl *virtualLists, raw json.RawMessage, tmpl string) (*target, error) {
	for _, it := range vl.lists[kindTemplates] {
		if it.orig != tmpl {
			continue
		}
		if !s.who.sees(kindTemplates, it, h.cfg.Separator) {
			return nil, forbidden(s.who, "use resource template "+strconv.Quote(tmpl))
		}
		agg := v.lookup(kindTemplates, tmpl)
		if agg == nil || agg.server != it.server {
			return nil, nil
		}
		return &target{server: it.server, replicas: agg.replicas, body: raw}, nil
	}
	return nil, nil
}

// virtualInitialize answers initialize (and server/discover) on a virtual
// server's endpoint: its name, title and instructions from the catalog,
// and what a curated server offers (tools, prompts and resources, each
// with list_changed, since its members come and go; subscriptions and
// completions, routed to the members).
func (h *Hub) virtualInitialize(vl *virtualLists, version string) *mcp.InitializeResult {
	return &mcp.InitializeResult{
		ProtocolVersion: version,
		Capabilities:    aggregateCapabilities(),
		ServerInfo:      mcp.Implementation{Name: vl.vs.Name, Title: vl.vs.Title, Version: Version},
		Instructions:    vl.vs.Instructions,
	}
}
