// Package web embeds the Switchboard dashboard and switchboard.js, the
// dependency-free browser client module it is built on (usable by any page:
// see README.md). The dashboard is plain ES modules with no build step:
// index.html, app.js and ui/*.js, styled by styles.css. Its tests (Node's
// test runner and playwright-core driving Debian's chromium) are in test/.
package web
