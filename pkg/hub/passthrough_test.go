package hub

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/internal/proctest"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// No token passthrough: a client's credential (a static token, an OAuth
// access token) never reaches a server, whichever way the server is
// attached (dialing out to /mcp/server, or put on the hub by hub connect
// --upstream) and whichever face and era the client takes; and no token is
// in the hub's log, its audit trail, its metrics or its refusals. The
// servers record every byte they receive, and the test looks for each
// token in every form it could travel in.

// passthroughTokens are the static tokens of these tests, each a string
// found nowhere else, and a policy under which mcp:client may call the
// echo tools only and crm:write every tool (a step-up).
const passthroughTokens = `
tokens:
  - name: alice
    token: alice-static-credential-4f1d
    roles: [client]
  - name: echo-only
    token: echo-only-static-credential-9c2e
    roles: [client]
    tools: ["*__echo"]
  - name: servers
    token: server-static-credential-3b5a
    roles: [server]
    servers: [dialer, dialerold, remote, remoteold]
  - name: admin
    token: admin-static-credential-d00d
    roles: [admin]
policy:
  - scope: mcp:client
    roles: [client]
    tools: ["*__echo"]
  - scope: crm:write
    roles: [client]
    tools: ["*"]
`

const (
	aliceToken  = "alice-static-credential-4f1d"
	echoOnly    = "echo-only-static-credential-9c2e"
	serverToken = "server-static-credential-3b5a"
	adminToken  = "admin-static-credential-d00d"
	// clientCookie is a cookie every client sends besides its token, as a
	// browser would: no server may see it either.
	clientCookie = "client-cookie-5a7e"
)

// passthroughServers are the servers of the run: two dial out to the hub,
// two are Streamable HTTP servers behind hub connect --upstream; of each
// pair one speaks both eras (the hub speaks 2026-07-28 to it) and one the
// session revisions alone.
var passthroughServers = []string{"dialer", "dialerold", "remote", "remoteold"}

// passthroughServer returns a server named name with a tool echo, a tool
// add, a resource <name>://note and a prompt greet.
func passthroughServer(name string, sessionOnly bool) *mcp.Server {
	s := mcp.NewServer(mcp.Implementation{Name: name, Version: "1"}, nil)
	if sessionOnly {
		s = sessionServer(name, nil)
	}
	mcp.AddTypedTool(s, &mcp.Tool{Name: "echo", Description: "Send text back."},
		func(ctx context.Context, req *mcp.ToolRequest, a struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(a.Text)}}, nil
		})
	mcp.AddTypedTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(ctx context.Context, req *mcp.ToolRequest, a struct{ A, B float64 }) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(fmt.Sprint(a.A + a.B))}}, nil
		})
	s.AddResource(&mcp.Resource{URI: name + "://note", Name: "note", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, MIMEType: "text/plain", Text: "note of " + name}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: mcp.TextContent("Greet " + req.Params.Arguments["name"] + ".")}}}, nil
		})
	return s
}

// received is everything one server received, as it came.
type received struct {
	mu sync.Mutex
	b  bytes.Buffer
	// headers are the HTTP requests' headers (an upstream server's).
	headers []http.Header
}

func (r *received) add(p []byte) {
	r.mu.Lock()
	r.b.Write(p)
	r.mu.Unlock()
}

func (r *received) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.String()
}

func (r *received) requestHeaders() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// recordingConn is a net.Conn that records every byte read from it.
type recordingConn struct {
	net.Conn
	rec *received
}

func (c recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rec.add(p[:n])
	return n, err
}

// dialRecorded dials s out to th's /mcp/server as name with the servers'
// token, over a socket that records every byte s receives (the handshake's
// answer and every WebSocket frame: the hub's frames are not masked, and
// no compression is negotiated), until the test ends.
func (th *testHub) dialRecorded(s *mcp.Server, name string) *received {
	th.t.Helper()
	rec := &received{}
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return recordingConn{c, rec}, nil
	}}
	conn, err := peer.Dial(ctxFor(th.t), th.wsURL("/mcp/server?name="+name),
		&peer.DialOptions{Header: bearer(serverToken), HTTPClient: &http.Client{Transport: transport}})
	require.NoError(th.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ss := s.Serve(ctx, conn)
	th.t.Cleanup(func() {
		cancel()
		_ = ss.Wait()
		transport.CloseIdleConnections()
	})
	return rec
}

// upstreamRecorded serves s over Streamable HTTP (both eras) at /mcp, and
// records every request's method, URL, headers and body.
func upstreamRecorded(t *testing.T, s *mcp.Server) (*httptest.Server, *received) {
	rec := &received{}
	serve := func(r *http.Request, sess *mcp.StreamSession) error {
		s.Serve(sess.Context(), sess.Conn())
		return nil
	}
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{Open: serve, Stateless: serve})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var head bytes.Buffer
		fmt.Fprintf(&head, "%s %s\n", r.Method, r.URL)
		_ = r.Header.Write(&head)
		rec.mu.Lock()
		rec.headers = append(rec.headers, r.Header.Clone())
		rec.b.Write(head.Bytes())
		rec.b.Write(body)
		rec.b.WriteString("\n")
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	return srv, rec
}

// runUpstreams puts each server on th through hub connect --upstream (one
// connector, the servers' own static token), its log in log, until the
// test ends.
func (th *testHub) runUpstreams(log *proctest.Buffer, servers map[string]*httptest.Server) {
	th.t.Helper()
	var list []connect.Server
	for name, srv := range servers {
		list = append(list, connect.Server{Name: name, Upstream: srv.URL + "/mcp", Shared: true})
	}
	opts := &connect.Options{URL: th.wsURL("/mcp/server"), Header: bearer(serverToken),
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})), StopGrace: time.Second}
	opts.MinBackoff, opts.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- connect.Run(ctx, list, opts) }()
	th.t.Cleanup(func() {
		cancel()
		within(th.t, done, "the connector did not stop")
	})
}

// secretForms returns every form in which token could travel: itself, in
// base64 (a WebSocket's "bearer." subprotocol, a Basic header) and, for a
// JWT, each of its three parts.
func secretForms(token string) []string {
	forms := []string{token, base64.RawURLEncoding.EncodeToString([]byte(token)), base64.StdEncoding.EncodeToString([]byte(token))}
	if parts := strings.Split(token, "."); len(parts) == 3 {
		forms = append(forms, parts...)
	}
	return forms
}

// assertNoSecret fails for each form of each secret found in what.
func assertNoSecret(t *testing.T, what, text string, secrets map[string]string) {
	t.Helper()
	for name, s := range secrets {
		for i, form := range secretForms(s) {
			if form != "" && strings.Contains(text, form) {
				t.Errorf("%s holds the %s token (form %d of it: %.24q...)", what, name, i, form)
			}
		}
	}
}

// passthroughClient is one way a client reached the hub: /mcp, or the
// endpoint of one server (/servers/<server>/mcp), where its names are the
// server's own.
type passthroughClient struct {
	name, server string
	c            *mcp.Client
}

// serves reports whether server is reached through pc, and under which
// name it knows server's item.
func (pc passthroughClient) serves(server, item string) (string, bool) {
	switch pc.server {
	case "":
		return server + DefaultSeparator + item, true
	case server:
		return item, true
	}
	return "", false
}

// connectEveryWay connects to path with token over each face and era: a
// WebSocket (the token in the Authorization header, then in the "bearer."
// subprotocol as a browser sends it), a Streamable HTTP session, and
// stateless 2026-07-28 POSTs. Each sends clientCookie besides.
func (th *testHub) connectEveryWay(kind, path, token string) []passthroughClient {
	th.t.Helper()
	t := th.t
	server, _ := strings.CutSuffix(strings.TrimPrefix(path, "/servers/"), "/mcp")
	if path == "/mcp" {
		server = ""
	}
	cookie := http.Header{"Cookie": {"theme=" + clientCookie}}
	add := func(name string, c *mcp.Client) passthroughClient {
		t.Cleanup(func() { c.Close() })
		return passthroughClient{kind + " " + name + " " + path, server, c}
	}
	dial := func(name, url string, opts *mcp.ClientOptions) passthroughClient {
		t.Helper()
		opts.Token, opts.Header = token, cookie
		c, err := mcp.Connect(ctxFor(t), url, opts)
		require.NoError(t, err, name)
		return add(name, c)
	}
	all := []passthroughClient{
		dial("WebSocket", th.wsURL(path), sessionOpts(nil)),
		dial("HTTP session", th.srv.URL+path, sessionOpts(nil)),
		dial("HTTP stateless", th.srv.URL+path, &mcp.ClientOptions{ProtocolVersion: mcp.ModernVersion}),
	}
	ws, _, err := websocket.Dial(ctxFor(t), th.wsURL(path), &websocket.DialOptions{HTTPHeader: cookie,
		Subprotocols: []string{peer.Subprotocol, protocolTokenOf(token)}})
	require.NoError(t, err, "a WebSocket with the token in its subprotocol")
	c, err := mcp.ConnectConn(ctxFor(t), peer.NewWebSocket(ws, nil), sessionOpts(nil))
	require.NoError(t, err)
	return append(all, add("WebSocket subprotocol", c))
}

// protocolTokenOf is the WebSocket subprotocol that carries token.
func protocolTokenOf(token string) string {
	return ProtocolTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(token))
}

// connectStatic connects over a WebSocket with a static token in the other
// places the hub looks for one: ?token=, and the dashboard's cookie.
func (th *testHub) connectStatic(token string) []passthroughClient {
	th.t.Helper()
	var all []passthroughClient
	for _, way := range []struct {
		name, path string
		header     http.Header
	}{
		{"?token=", "/mcp?token=" + token, nil},
		{"cookie", "/mcp", http.Header{"Cookie": {CookieName + "=" + token}}},
	} {
		c, err := mcp.Connect(ctxFor(th.t), th.wsURL(way.path), sessionOpts(&mcp.ClientOptions{Header: way.header}))
		require.NoError(th.t, err, way.name)
		th.t.Cleanup(func() { c.Close() })
		all = append(all, passthroughClient{name: "static WebSocket " + way.name, c: c})
	}
	return all
}

// metricsWith reads /metrics with token: its status, headers and body.
func (th *testHub) metricsWith(t *testing.T, token string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, th.srv.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	return do(t, req)
}

// TestPassthrough_noClientTokenReachesAServer: clients with a static token
// and with OAuth access tokens (JWTs) call a tool, read a resource and get
// a prompt of every server: over WebSocket (the token in the header, in the
// "bearer." subprotocol, and for the static token in ?token= and in the
// dashboard's cookie) and over Streamable HTTP (a session, and stateless
// 2026-07-28 POSTs), on /mcp and on the endpoints of one server of each
// kind. Neither token, nor any part of a JWT, nor the client's cookie is in
// any byte a server received; the upstream HTTP servers got no
// Authorization and no Cookie header at all. Then requests refused for a
// bad token, a token for another resource, a missing role or a missing
// scope: no token in their answers, and the well-behaved clients go on.
// Last, the same run's hub log (at debug), connector log, audit trail and
// /metrics hold no token.
func TestPassthrough_noClientTokenReachesAServer(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	logs, connectorLogs := &proctest.Buffer{}, &proctest.Buffer{}
	auditFile := filepath.Join(t.TempDir(), "audit.log")
	audit, err := OpenAuditLog(auditFile)
	require.NoError(t, err)
	t.Cleanup(func() { audit.Close() }) // closed below to be read; again if the test fails before
	th := startHub(t, Config{
		Tokens: writeTokens(t, passthroughTokens),
		OAuth:  &OAuthConfig{Issuers: []string{as.Issuer()}},
		Audit:  audit,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	url := th.srv.URL + "/mcp"
	client := as.MachineClient("mcp:client", "crm:write")
	jwt := as.Token(client, th.resource("/mcp"), "mcp:client", "crm:write")
	narrow := as.Token(client, th.resource("/mcp"), "mcp:client")
	roleless := as.Token(as.MachineClient("crm:read"), th.resource("/mcp"), "crm:read") // no scope grants a role
	require.Len(t, strings.Split(jwt, "."), 3, "the access token is a JWT")

	got := map[string]*received{
		"dialer":    th.dialRecorded(passthroughServer("dialer", false), "dialer"),
		"dialerold": th.dialRecorded(passthroughServer("dialerold", true), "dialerold"),
	}
	remote, remoteGot := upstreamRecorded(t, passthroughServer("remote", false))
	remoteOld, remoteOldGot := upstreamRecorded(t, passthroughServer("remoteold", true))
	got["remote"], got["remoteold"] = remoteGot, remoteOldGot
	th.runUpstreams(connectorLogs, map[string]*httptest.Server{"remote": remote, "remoteold": remoteOld})
	th.waitFor("every server", func(v *view) bool {
		for _, name := range passthroughServers {
			if len(v.servers[name]) == 0 {
				return false
			}
		}
		return true
	})

	// Every client, on /mcp and on the endpoints of a dialing server and
	// of an upstream one, each with an access token for that resource.
	clientSecrets := map[string]string{"static": aliceToken, "cookie": clientCookie, "servers'": serverToken}
	clients := th.connectStatic(aliceToken)
	for _, path := range []string{"/mcp", "/servers/dialer/mcp", "/servers/remoteold/mcp"} {
		tok := jwt
		if path != "/mcp" {
			tok = as.Token(client, th.resource(path), "mcp:client", "crm:write")
		}
		clientSecrets["OAuth for "+path] = tok
		clients = append(clients, th.connectEveryWay("static", path, aliceToken)...)
		clients = append(clients, th.connectEveryWay("OAuth", path, tok)...)
	}
	ctx := ctxFor(t)
	for _, pc := range clients {
		for _, server := range passthroughServers {
			echo, ok := pc.serves(server, "echo")
			if !ok {
				continue
			}
			said := server + " from " + pc.name
			res, err := pc.c.CallTool(ctx, echo, map[string]string{"text": said}, nil)
			require.NoError(t, err, said)
			require.NotEmpty(t, res.Content, said)
			assert.Equal(t, said, res.Content[0].Text)
			read, err := pc.c.ReadResource(ctx, server+"://note")
			require.NoError(t, err, said)
			require.NotEmpty(t, read.Contents, said)
			assert.Equal(t, "note of "+server, read.Contents[0].Text)
			greet, _ := pc.serves(server, "greet")
			prompt, err := pc.c.GetPrompt(ctx, greet, map[string]string{"name": said})
			require.NoError(t, err, said)
			require.NotEmpty(t, prompt.Messages, said)
			assert.Equal(t, "Greet "+said+".", prompt.Messages[0].Content.Text)
		}
	}

	t.Run("servers", func(t *testing.T) {
		for _, server := range passthroughServers {
			text := got[server].String()
			for _, pc := range clients {
				if _, ok := pc.serves(server, "echo"); ok {
					require.Contains(t, text, server+" from "+pc.name, "%s's recording holds the calls it served", server)
				}
			}
			assertNoSecret(t, "what "+server+" received", text, clientSecrets)
		}
		for _, server := range []string{"remote", "remoteold"} {
			headers := got[server].requestHeaders()
			require.NotEmpty(t, headers)
			for _, h := range headers {
				assert.Empty(t, h.Values("Authorization"), "an Authorization header reached %s", server)
				assert.Empty(t, h.Values("Cookie"), "a Cookie header reached %s", server)
			}
		}
	})

	// Refused: the answers name no token, the refused one or another.
	bad := "unknown-static-credential-5e5e"
	tampered := jwt[:len(jwt)-4] + "AAAA" // the signature no longer verifies
	refusalSecrets := map[string]string{"bad": bad, "tampered": tampered, "narrow": narrow, "roleless": roleless, "echo-only": echoOnly}
	maps.Copy(refusalSecrets, clientSecrets)
	assertRefusal := func(what string, status int, header http.Header, body string, want int) {
		t.Helper()
		assert.Equal(t, want, status, "%s: %s", what, body)
		var h bytes.Buffer
		_ = header.Write(&h)
		assertNoSecret(t, what+"'s answer", h.String()+body, refusalSecrets)
	}
	t.Run("refusals", func(t *testing.T) {
		upgrade := func(what, path string, opts *websocket.DialOptions) {
			t.Helper()
			_, resp, err := websocket.Dial(ctxFor(t), th.wsURL(path), opts)
			require.Error(t, err, what)
			require.NotNil(t, resp, what)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assertRefusal(what, resp.StatusCode, resp.Header, string(b), http.StatusUnauthorized)
		}
		for _, tt := range []struct {
			what, path, token string
			want              int
		}{
			{"an unknown static token", "/mcp", bad, http.StatusUnauthorized},
			{"a tampered JWT", "/mcp", tampered, http.StatusUnauthorized},
			{"an access token for another resource", "/servers/dialer/mcp", jwt, http.StatusUnauthorized},
			{"a server's static token", "/mcp", serverToken, http.StatusForbidden},
			{"an access token no scope of which grants a role", "/mcp", roleless, http.StatusForbidden},
		} {
			status, h, body := post(t, th.srv.URL+tt.path, bearer(tt.token), initializeBody)
			assertRefusal(tt.what+" on POST", status, h, body, tt.want)
			if tt.want == http.StatusUnauthorized {
				upgrade(tt.what+" on a WebSocket upgrade", tt.path,
					&websocket.DialOptions{HTTPHeader: bearer(tt.token), Subprotocols: []string{peer.Subprotocol}})
				upgrade(tt.what+" in a WebSocket subprotocol", tt.path,
					&websocket.DialOptions{Subprotocols: []string{peer.Subprotocol, protocolTokenOf(tt.token)}})
			}
		}
		upgrade("an unknown static token in ?token=", "/mcp?token="+bad, nil)

		// Step-up: a session's POST and a stateless one, a scope short.
		id := openSession(t, url, narrow)
		add := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"dialer__add","arguments":{"A":2,"B":3}}}`
		status, h, body := post(t, url, sessionHeader(id, narrow), add)
		assertRefusal("a session's call a scope short", status, h, body, http.StatusForbidden)
		modern := bearer(narrow)
		modern.Set(mcp.HeaderProtocolVersion, mcp.ModernVersion)
		modern.Set(mcp.HeaderMethod, mcp.MethodToolsCall)
		modern.Set(mcp.HeaderName, "dialer__add")
		status, h, body = post(t, url, modern, modernBody(8, mcp.MethodToolsCall, `"name":"dialer__add","arguments":{"A":2,"B":3}`, "{}"))
		assertRefusal("a stateless call a scope short", status, h, body, http.StatusForbidden)
		status, h, body = post(t, url, sessionHeader(openSession(t, url, echoOnly), echoOnly), add)
		assertRefusal("a static token's call beyond its tools", status, h, body, http.StatusOK)
		assert.Contains(t, body, `"code":-32003`)

		// Over WebSocket: -32003, its message and data.
		for _, token := range []string{narrow, echoOnly} {
			c, err := mcp.Connect(ctxFor(t), th.wsURL("/mcp"), sessionOpts(&mcp.ClientOptions{Token: token}))
			require.NoError(t, err)
			_, err = c.CallTool(ctxFor(t), "dialer__add", map[string]float64{"A": 1, "B": 2}, nil)
			c.Close()
			var rpcErr *jsonrpc.Error
			require.ErrorAs(t, err, &rpcErr)
			assert.Equal(t, mcp.CodeForbidden, rpcErr.Code)
			assertNoSecret(t, "a WebSocket call's refusal", rpcErr.Message+string(rpcErr.Data), refusalSecrets)
		}

		status, h, body = th.metricsWith(t, jwt)
		assertRefusal("/metrics with a client's token", status, h, body, http.StatusForbidden)
	})

	// The well-behaved clients were not hurt by the refusals beside them.
	for _, pc := range clients {
		add, _ := pc.serves(cmp.Or(pc.server, "remote"), "add")
		res, err := pc.c.CallTool(ctx, add, map[string]float64{"A": 2, "B": 3}, nil)
		require.NoError(t, err, pc.name)
		assert.Equal(t, "5", res.Content[0].Text, pc.name)
	}

	everyToken := map[string]string{"admin": adminToken}
	maps.Copy(everyToken, refusalSecrets)
	t.Run("logs, audit and metrics", func(t *testing.T) {
		status, _, metrics := th.metricsWith(t, adminToken)
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, metrics, "switchboard_", "the metrics were read")
		assertNoSecret(t, "/metrics", metrics, everyToken)

		log := logs.String()
		require.Contains(t, log, "level=DEBUG", "the hub logged at debug")
		assertNoSecret(t, "the hub's log", log, everyToken)
		assertNoSecret(t, "the connector's log", connectorLogs.String(), everyToken)

		// Closed to read it whole; what comes after is counted as dropped.
		require.NoError(t, audit.Close())
		trail, err := os.ReadFile(auditFile)
		require.NoError(t, err)
		principals := map[string]bool{}
		var denied int
		for _, l := range strings.Split(strings.TrimSpace(string(trail)), "\n") {
			var rec auditRecord
			require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
			principals[rec.Principal] = true
			if rec.Decision == "deny" {
				denied++
			}
		}
		assert.True(t, principals["token:alice"], "the static token's calls are in the trail: %v", principals)
		assert.True(t, principals[oauthPrefix+as.Issuer()+" "+client.ID], "and the access token's: %v", principals)
		assert.GreaterOrEqual(t, denied, 12, "and the refusals: 5 POSTs and 7 upgrades at least")
		assertNoSecret(t, "the audit trail", string(trail), everyToken)
	})
}
