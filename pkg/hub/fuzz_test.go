package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// FuzzParseTokens: a tokens file of any content, its static tokens and
// its policy, is accepted or refused with an error, never a panic; what is
// accepted is usable: a static entry has a name and roles, the policy
// keeps its default scopes unless the file replaces them, and it maps any
// token to a grant.
func FuzzParseTokens(f *testing.F) {
	f.Add([]byte("tokens:\n  - name: a\n    token: x\n    roles: [client]\n    tools: ['demo__*']\n"))
	f.Add([]byte(`{"tokens":[{"name":"s","sha256":"` + "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8" + `","roles":["server"],"servers":["w*"]}]}`))
	f.Add([]byte("tokens: [{name: a, token: x, roles: [admin], maxConnections: -3}]"))
	f.Add([]byte("{"))
	f.Add([]byte("policy:\n  - scope: mcp:client\n    roles: [client]\n    tools: ['demo__*']\n  - claim: groups\n    value: support\n    roles: [client]\n    tools: ['crm__*']\n"))
	f.Add([]byte("policy: [{claim: azp, value: conn, issuer: 'https://i', roles: [server], servers: [w]}, {scope: mcp:admin, roles: []}]"))
	f.Add([]byte(`{"policy":[{"scope":"x","claim":"roles","value":"Hub.Admin","roles":["admin"],"resources":["a://*"]}]}`))
	tok := &oauth.Principal{Issuer: "https://i", Subject: "Alice", ClientID: "conn", Scopes: []string{"mcp:client", "x"},
		Claims: map[string]any{"groups": []any{"support", 3}, "roles": "Hub.Admin", "azp": "conn"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		set, pol, err := parseTokens(b)
		if err != nil {
			return
		}
		names := map[string]bool{}
		for _, p := range set {
			if p.name == "" || names[p.name] || len(p.g().roles) == 0 {
				t.Fatalf("accepted an invalid entry: %+v", p)
			}
			names[p.name] = true
			p.mayCall("demo__echo")
			p.mayRegister("demo")
			p.fixedServerName()
		}
		g := pol.grantOf(tok)
		g.mayCall("crm__x")
		g.mayRead("crm", "crm://a", "__")
		pol.stepUp(tok, mayCall("crm__x"))
		for _, r := range []Role{RoleClient, RoleDashboard, RoleServer, RoleAdmin} {
			pol.scopeFor(r)
		}
		if len(pol.rules) < len(defaultScopes) && !bytes.Contains(b, []byte("mcp:")) {
			t.Fatalf("lost a default scope: %+v", pol.scopes)
		}
	})
}

// FuzzClientCaps: any capabilities object parses, and check never panics.
func FuzzClientCaps(f *testing.F) {
	f.Add([]byte(`{"sampling":{"tools":{}},"elicitation":{"url":{}},"roots":{"listChanged":true}}`), []byte(`{"mode":"url","tools":[1]}`))
	f.Add([]byte(`{"elicitation":{}}`), []byte(`{}`))
	f.Add([]byte(`null`), []byte(`[]`))
	f.Add([]byte(`{"sampling":null,"elicitation":5,"roots":null}`), []byte(`{}`))
	f.Add([]byte(`{"sampling":{},"sampling":{"tools":1},"elicitation":{"url":{}},"elicitation":{}}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, caps, params []byte) {
		c := parseClientCaps(caps)
		if json.Valid(caps) {
			if want := parseClientCapsByMap(caps); c != want {
				t.Fatalf("parseClientCaps(%s) = %+v, decoded into a map: %+v", caps, c, want)
			}
		}
		p, err := mcp.ParseObject(params)
		if err != nil {
			p = mcp.Object{}
		}
		for _, m := range []string{mcp.MethodSamplingCreateMessage, mcp.MethodElicitationCreate, mcp.MethodRootsList, mcp.MethodPing} {
			c.check(m, p)
		}
	})
}

// parseClientCapsByMap is how the capabilities were read before they were
// read in one pass: through a map, by encoding/json.
func parseClientCapsByMap(raw json.RawMessage) clientCaps {
	var c clientCaps
	caps, err := mcp.ParseObject(raw)
	if err != nil {
		return c
	}
	if s, err := mcp.ParseObject(caps["sampling"]); err == nil && caps["sampling"] != nil {
		c.Sampling = true
		_, c.SamplingTools = s["tools"]
	}
	if e, err := mcp.ParseObject(caps["elicitation"]); err == nil && caps["elicitation"] != nil {
		_, form := e["form"]
		_, url := e["url"]
		c.ElicitForm, c.ElicitURL = form || !url, url
	}
	_, c.Roots = caps["roots"]
	return c
}

// FuzzListItem: whatever a server lists, the hub keeps it only with its
// key, and the aggregated form is JSON.
func FuzzListItem(f *testing.F) {
	f.Add([]byte(`{"name":"t","inputSchema":{"type":"object"},"_meta":{"x":1}}`))
	f.Add([]byte(`{"uri":"demo://x","name":"x"}`))
	f.Add([]byte(`{"_meta":"not an object","name":"y"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		for k := range numKinds {
			it, ok := newListItem(k, "srv", "__", raw)
			if !ok {
				continue
			}
			if it.key == "" || !json.Valid(it.agg) {
				t.Fatalf("kept an item without a key or with invalid JSON: %+v", it)
			}
		}
	})
}

// FuzzClusterMessage feeds arbitrary payloads to the cluster's handlers, as
// a hostile or broken instance sharing the broker could: nothing panics and
// the hub keeps working.
func FuzzClusterMessage(f *testing.F) {
	f.Add([]byte(`{"k":"hb","f":"other","v":3,"n":2}`))
	f.Add([]byte(`{"k":"snap","f":"other","v":1,"s":{"replicas":[{"id":"other/1","name":"x","lists":[[{"name":"t"}],null,null,null]}]}}`))
	f.Add([]byte(`{"k":"res","f":"other","c":1,"err":{"code":-32000,"message":"x"}}`))
	f.Add([]byte(`{"k":"sreq","f":"other","c":9,"o":1,"m":"sampling/createMessage","p":{}}`))
	f.Add([]byte(`{"k":"call","f":"other","c":2,"r":"nobody","m":"tools/call","p":{"name":"x"}}`))
	f.Add([]byte(`{"k":"bye","f":"other"}`))
	f.Add([]byte("{\"k\":\"call\",\"f\":\"other\",\"c\":3,\"r\":\"nobody\",\"m\":\"tools/call\",\"b\":\"p\"}\n{\"name\":\"x\"}"))
	f.Add([]byte("{\"k\":\"res\",\"f\":\"other\",\"c\":1,\"b\":\"res\"}\n{\"content\":[]"))
	f.Add([]byte(`{"k":"cntf","f":"other","cl":"nobody/1","m":"notifications/elicitation/complete","p":{"elicitationId":"e"}}`))
	f.Add([]byte(`{"k":"task","f":"other","c":4,"ow":"token:x","m":"tasks/cancel","p":{"taskId":"AAAAAAAAAAAAAAAAAAAAAA"}}`))
	f.Add([]byte(`{"k":"task","f":"other","c":5,"m":"tasks/update","p":{"taskId":"x","inputResponses":[]}}`))
	f.Add([]byte(`not json`))
	h, err := New(Config{Logger: testLogger()})
	if err != nil {
		f.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, payload []byte) {
		h.cluster.onRegistry(ctx, topicRegistry, payload)
		h.cluster.onInbox(ctx, topicInboxPrefix+h.id, payload)
		h.reg.view() // still consistent enough to read
	})
}

// FuzzElicitationIDs checks that reading the ids of URL-mode elicitations,
// from elicitation/create params and from the data of a -32042 error (both
// a server's), never panics and finds ids of URL mode only.
func FuzzElicitationIDs(f *testing.F) {
	f.Add([]byte(`{"mode":"url","message":"m","url":"https://x","elicitationId":"e1"}`))
	f.Add([]byte(`{"elicitations":[{"mode":"url","elicitationId":"e2"},{"mode":"form","elicitationId":"e3"},{"mode":"url"}]}`))
	f.Add([]byte(`{"mode":"url","elicitationId":7,"elicitations":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if o, err := mcp.ParseObject(raw); err == nil {
			if mode, _ := o.String("mode"); mode != "url" && urlElicitationID(o) != "" {
				t.Fatalf("an id from params not of mode url: %s", raw)
			}
		}
		for _, id := range requiredElicitations(raw) {
			if id == "" {
				t.Fatalf("an empty id from %s", raw)
			}
		}
	})
}

// FuzzCatalogMessage feeds arbitrary payloads to the catalog's handler, as
// a hostile or broken instance sharing the broker could: nothing panics,
// and the catalog in force is always one that parses and says what its
// hash says.
func FuzzCatalogMessage(f *testing.F) {
	f.Add([]byte(`{"from":"other","origin":"other","written":"2030-01-01T00:00:00Z","sha256":"x","source":"dmlydHVhbFNlcnZlcnM6IFtd"}`))
	f.Add([]byte(`{"from":"other","written":"2030-01-01T00:00:00Z","source":null}`))
	f.Add([]byte(`{"from":""}`))
	f.Add([]byte(`not json`))
	file := filepath.Join(f.TempDir(), "catalog.yaml")
	if err := os.WriteFile(file, []byte("virtualServers: [{name: kept}]\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	h, err := New(Config{Logger: testLogger(), CatalogFile: file, CatalogPoll: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	defer h.Close()
	f.Fuzz(func(t *testing.T, payload []byte) {
		h.catalog.onMessage(context.Background(), catalogTopic, payload)
		lc := h.catalog.current()
		if lc == nil || lc.cat == nil || catalogSum(lc.raw) != lc.sum {
			t.Fatalf("the catalog in force is %+v", lc)
		}
	})
}

// FuzzTaskRecord: whatever the Store holds under a task's key (a record of
// another version, or garbage), reading it never panics, and what is
// taken for a record names a task and survives being written again.
func FuzzTaskRecord(f *testing.F) {
	id := newTaskID()
	f.Add([]byte(`{"id":"` + id + `","owner":"token:a","server":"s","instance":"i","replica":"i/1","upstream":"up-1","expires":"2030-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"id":"` + id + `","owner":"anonymous","server":"s","instance":"i","replica":"i/1","task":{"taskId":"` + id +
		`","status":"completed","createdAt":"x","lastUpdatedAt":"y","ttlMs":null,"result":{"content":[]}},"expires":"2030-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"id":"` + id + `","server":"s","instance":"i","expires":"2030-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"id":"short"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		rec, err := decodeTaskRecord(raw)
		if err != nil {
			return
		}
		if !validTaskID(rec.ID) || rec.held() && rec.Task == nil {
			t.Fatalf("took %q for a record", raw)
		}
		again, err := json.Marshal(rec)
		if err != nil {
			t.Fatalf("a record read does not encode: %v", err)
		}
		if _, err := decodeTaskRecord(again); err != nil {
			t.Fatalf("a record read and written again no longer reads: %v: %s", err, again)
		}
	})
}

// FuzzTaskParams: a client's params, whatever they hold, edited to declare
// the tasks extension or not, stay JSON, and declare it exactly when they
// should.
func FuzzTaskParams(f *testing.F) {
	f.Add([]byte(`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{},"other":{}}}}}`))
	f.Add([]byte(`{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":[]}}}`))
	f.Add([]byte(`{"name":"x","_meta":{"progressToken":1}}`))
	f.Add([]byte(`{"taskId":"t","_meta":null}`))
	f.Add([]byte(`[1]`))
	c := &taskFollower{whose: "anonymous"}
	f.Fuzz(func(t *testing.T, params []byte) {
		declared := withTasksDeclared(c, params)
		stripped := editCapabilities(declared, func(ext mcp.Object) { delete(ext, mcp.ExtensionTasks) })
		withToken, _ := withProgressToken(params)
		if !json.Valid(params) {
			return
		}
		for _, out := range [][]byte{declared, stripped, withToken} {
			if !json.Valid(out) {
				t.Fatalf("%q became invalid JSON: %q", params, out)
			}
		}
		if _, err := mcp.ParseRequestMeta(declared); err == nil && !declaresTasksIn(declared) {
			t.Fatalf("%q does not declare the extension after declaring it: %q", params, declared)
		}
		if declaresTasksIn(stripped) {
			t.Fatalf("%q still declares the extension after losing it: %q", declared, stripped)
		}
	})
}

// FuzzRequestMeta: whatever params a session client sends (valid JSON, as
// the decoder leaves them), the _meta requestMeta writes as bytes is valid
// JSON and says what setting each member on its own says.
func FuzzRequestMeta(f *testing.F) {
	f.Add([]byte(`{"name":"x","arguments":{}}`), uint8(5), "info")
	f.Add([]byte(`{"_meta":{"progressToken":1},"name":"x"}`), uint8(0), "")
	f.Add([]byte(` { "_meta" : { } } `), uint8(63), "debug")
	f.Add([]byte(`{"_meta":{"io.modelcontextprotocol\/clientInfo":1}}`), uint8(1), "")
	f.Add([]byte(`[1]`), uint8(2), "x\"y")
	f.Fuzz(func(t *testing.T, params []byte, caps uint8, level string) {
		if !json.Valid(params) {
			return
		}
		var c caller = metaCaller{declared: capsTable[int(caps)%len(capsTable)], level: mcp.LoggingLevel(level)}
		if caps%7 == 0 {
			c = nil // the hub's own request
		}
		in := json.RawMessage(params)
		if len(in) == 0 || in[0] != '{' {
			in = json.RawMessage(`{}`)
		}
		got := requestMeta(c, params)
		if !json.Valid(got) {
			t.Fatalf("requestMeta(%s) = %s: not JSON", params, got)
		}
		meta, ok := jsonrpc.Member(in, "_meta")
		if !ok || len(meta) == 0 || meta[0] != '{' {
			meta = []byte(`{}`)
		}
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(requestMetaEdited(c, in, meta), &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("requestMeta(%s) = %s; member by member: %s", params, got, requestMetaEdited(c, in, meta))
		}
	})
}
