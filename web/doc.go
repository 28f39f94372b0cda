// Package web embeds the Switchboard dashboard and switchboard.js, the
// dependency-free browser client module it is built on (usable by any page:
// see README.md), with jsonrpc.js, the JSON-RPC layer switchboard.js
// imports. The dashboard is plain ES modules with no build step: index.html
// and app.js, which wires one module per panel of the page (panels/*.js) to
// the client; the panels are built from ui/*.js (DOM helpers, rendering,
// schema forms, dialogs); styles.css styles them. Its tests (Node's test
// runner and playwright-core driving Debian's chromium) are in test/.
package web
