package web

import (
	"embed"
	"net/http"
)

//go:embed *.html *.js *.css
var files embed.FS

// Handler serves the dashboard and the browser client module.
func Handler() http.Handler {
	return http.FileServerFS(files)
}
