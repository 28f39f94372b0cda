package web_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/web"
)

// importRE finds the relative imports of an ES module, static and dynamic.
var importRE = regexp.MustCompile(`(?m)(?:^import\b[^'"]*|\bimport\()\s*['"](\.{1,2}/[^'"]+)['"]`)

// TestHandler_servesEveryFile checks that every file of the dashboard on
// disk is embedded and served as itself with a type a browser accepts, and
// that every relative import of a module names a served file: a module left
// out of the go:embed patterns breaks the page only in a browser otherwise.
func TestHandler_servesEveryFile(t *testing.T) {
	srv := httptest.NewServer(web.Handler())
	t.Cleanup(srv.Close)

	types := map[string]string{
		".js":   "text/javascript",
		".html": "text/html",
		".css":  "text/css",
		".svg":  "image/svg+xml",
	}
	get := func(name string) (*http.Response, []byte) {
		t.Helper()
		res, err := http.Get(srv.URL + "/" + name)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, body
	}

	var names []string
	err := fs.WalkDir(os.DirFS("."), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && name == "test" {
			return fs.SkipDir // the tests and their node_modules are not served
		}
		if _, ok := types[path.Ext(name)]; ok && !d.IsDir() {
			names = append(names, name)
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, names, "app.js", "the test runs in web/")

	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(name)
			require.NoError(t, err)
			res, body := get(name)
			require.Equal(t, http.StatusOK, res.StatusCode, "%s is not embedded", name)
			assert.Equal(t, string(want), string(body))
			assert.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), types[path.Ext(name)]),
				"%s served as %q", name, res.Header.Get("Content-Type"))
			if path.Ext(name) != ".js" {
				return
			}
			for _, m := range importRE.FindAllStringSubmatch(string(want), -1) {
				dep := path.Join(path.Dir(name), m[1])
				res, _ := get(dep)
				assert.Equal(t, http.StatusOK, res.StatusCode, "%s imports %s, which is not served", name, dep)
			}
		})
	}
}
