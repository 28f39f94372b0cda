package web

import (
	"embed"
	"net/http"
)

// files are the dashboard (index.html, app.js, styles.css, favicon.svg, one
// module per panel under panels/, the building blocks under ui/) and the
// reusable browser client switchboard.js with its JSON-RPC layer jsonrpc.js.
// The tests under test/ (and their node_modules) are not embedded;
// embed_test.go checks that every file on disk is served.
//
//go:embed *.html *.js *.css *.svg ui/*.js panels/*.js
var files embed.FS

// Handler serves the dashboard and the browser client module. The pages
// need no inline script or style, so they work under a strict
// Content-Security-Policy (the hub adds its security headers around this
// handler; index.html also carries the policy in a meta element).
func Handler() http.Handler {
	return http.FileServerFS(files)
}
