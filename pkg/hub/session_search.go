package hub

import (
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/internal/search"
	"github.com/switchboard-mcp/switchboard/pkg/catalog"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Search mode (discovery: search on a virtual server, Config.Discovery for
// /mcp): tools/list offers two meta-tools, search_tools and call_tool
// (registry_catalog.go lists them). The hub answers search_tools itself,
// from the endpoint's index (internal/search), which every instance keeps
// of the view it builds, one server at a time as servers come and go. A
// search never returns a tool the session's principal may not call: whole
// servers it may not use are skipped, and each tool that would make the
// results is checked as a call of it would be, under its client-facing
// name. call_tool, and a found tool called by its name directly, take the
// call path (routing_virtual.go).

// searchTools answers search_tools on the session's endpoint.
func (s *session) searchTools(params json.RawMessage) (any, error) {
	h := s.hub
	args, _ := jsonrpc.Member(params, "arguments")
	a, err := catalog.ParseSearchArgs(args)
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%s", err.Error())
	}
	v := h.reg.view()
	var idx *toolIndex
	var filter search.Filter
	sep := h.cfg.Separator
	if vl := v.virtualOf(s.scope); vl != nil {
		idx = vl.search
		filter.Tool = func(t *search.Tool) bool {
			_, ok := vl.view.Tool(t.Name)
			return ok && s.who.mayCall(vl.vs.Name+sep+t.Name)
		}
	} else if v.cat != nil {
		idx = v.cat.search
		if !s.who.isAdmin() {
			filter.Server = func(server string) bool { return s.who.mayUseServer(server, sep) }
		}
		filter.Tool = func(t *search.Tool) bool {
			canon := v.canonical(kindTools, t.Name)
			return v.lookup(kindTools, canon) != nil && s.who.mayCall(canon)
		}
	}
	var found []catalog.Found
	if idx != nil {
		for _, r := range idx.idx.Search(a.Query, a.Limit, filter) {
			found = append(found, catalog.Found{Name: r.Tool.Name, Description: r.Tool.Description, InputSchema: r.Tool.InputSchema})
		}
	}
	return catalog.SearchResult(found), nil
}

// serverOfURI finds the server of a resource on the session's endpoint:
// on a virtual server's, the member its resource picks give it to; on any
// other, the server that serves it.
func (s *session) serverOfURI(v *view, uri string) (string, bool) {
	if vl := v.virtualOf(s.scope); vl != nil {
		return vl.view.ServerOfURI(uri)
	}
	return v.serverOfURI(uri)
}
