package mcp_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

func TestNegotiateVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		requested string
		supported bool
		want      string
	}{
		{mcp.Version20241105, true, mcp.Version20241105},
		{mcp.Version20250326, true, mcp.Version20250326},
		{mcp.Version20250618, true, mcp.Version20250618},
		{mcp.Version20251125, true, mcp.Version20251125},
		{"", false, mcp.LatestVersion},
		{"2024-10-07", false, mcp.LatestVersion},
		{"2099-01-01", false, mcp.LatestVersion},
		{" 2025-06-18", false, mcp.LatestVersion},
		{"2025-06-18\n", false, mcp.LatestVersion},
		{"latest", false, mcp.LatestVersion},
	}
	for _, tt := range tests {
		t.Run(tt.requested, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.supported, mcp.IsSupportedVersion(tt.requested))
			assert.Equal(t, tt.want, mcp.NegotiateVersion(tt.requested))
		})
	}
}

func TestSupportedVersions(t *testing.T) {
	t.Parallel()
	assert.True(t, slices.IsSorted(mcp.SupportedVersions), "oldest first")
	assert.Equal(t, mcp.LatestVersion, mcp.SupportedVersions[len(mcp.SupportedVersions)-1])
	assert.True(t, mcp.IsSupportedVersion(mcp.LatestVersion))
}

func TestLoggingLevel_Severity(t *testing.T) {
	t.Parallel()
	ordered := []mcp.LoggingLevel{
		mcp.LevelDebug, mcp.LevelInfo, mcp.LevelNotice, mcp.LevelWarning,
		mcp.LevelError, mcp.LevelCritical, mcp.LevelAlert, mcp.LevelEmergency,
	}
	for i, l := range ordered {
		assert.Equal(t, i, l.Severity(), "%s", l)
		if i > 0 {
			assert.Greater(t, l.Severity(), ordered[i-1].Severity(), "%s is more severe than %s", l, ordered[i-1])
		}
	}
	for _, l := range []mcp.LoggingLevel{"", "DEBUG", "warn", "fatal", "trace"} {
		assert.Equal(t, -1, l.Severity(), "unknown level %q", l)
	}
}

func TestErrorCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *jsonrpc.Error
		code jsonrpc.Code
	}{
		{mcp.ErrConnectionClosed, -32000},
		{mcp.ErrRequestTimeout, -32001},
		{mcp.ErrResourceNotFound, -32002},
		{mcp.ErrForbidden, -32003},
		{mcp.ErrRateLimited, -32004},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.code, tt.err.Code, tt.err.Message)
		assert.True(t, errors.Is(tt.err.WithData("x"), tt.err), "errors.Is matches by code")
	}
	assert.Equal(t, jsonrpc.Code(-32602), mcp.CodeInvalidParams)
	assert.Equal(t, jsonrpc.Code(-32601), mcp.CodeMethodNotFound)
}
