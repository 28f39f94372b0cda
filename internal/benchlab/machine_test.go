package benchlab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGitCommit: a changed tree marks the commit, except for the report
// that the run itself rewrites.
func TestGitCommit(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	write := func(name, text string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(text), 0o644))
	}
	git("init", "-q")
	write("docs/benchmarks.md", "old")
	write("main.go", "package benchlab")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	ctx := context.Background()

	clean := gitCommit(ctx, root, "docs/benchmarks.md")
	assert.NotContains(t, clean, "uncommitted")
	write("docs/benchmarks.md", "new figures")
	assert.Equal(t, clean, gitCommit(ctx, root, "docs/benchmarks.md"), "the report does not count")
	assert.True(t, strings.HasSuffix(gitCommit(ctx, root, "-"), "+ uncommitted changes"), "unless there is no report")
	write("main.go", "package benchlab // changed")
	assert.True(t, strings.HasSuffix(gitCommit(ctx, root, "docs/benchmarks.md"), "+ uncommitted changes"))
}
