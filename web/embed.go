package web

import (
	"embed"
	"net/http"
)

// files are the dashboard (index.html, app.js, styles.css, favicon.svg, the
// modules under ui/) and the reusable browser client switchboard.js. The
// tests under test/ (and their node_modules) are not embedded.
//
//go:embed *.html *.js *.css *.svg ui/*.js
var files embed.FS

// Handler serves the dashboard and the browser client module. The pages
// need no inline script or style, so they work under a strict
// Content-Security-Policy (the hub adds its security headers around this
// handler; index.html also carries the policy in a meta element).
func Handler() http.Handler {
	return http.FileServerFS(files)
}
