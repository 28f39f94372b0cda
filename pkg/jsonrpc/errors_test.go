package jsonrpc_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

type coded struct{}

func (coded) Error() string           { return "rate limited" }
func (coded) ErrorCode() jsonrpc.Code { return -32004 }

func TestError_codeSurvivesWrapping(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("calling tool: %w", jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "unknown tool %q", "x"))
	assert.ErrorIs(t, err, jsonrpc.ErrInvalidParams)
	assert.NotErrorIs(t, err, jsonrpc.ErrInternal)
	assert.Equal(t, jsonrpc.CodeInvalidParams, jsonrpc.CodeOf(err))
	assert.Equal(t, `Invalid params: unknown tool "x"`, jsonrpc.ErrorOf(err).Message)
}

func TestErrorOf(t *testing.T) {
	t.Parallel()
	assert.Nil(t, jsonrpc.ErrorOf(nil))
	assert.Equal(t, jsonrpc.Code(0), jsonrpc.CodeOf(nil))

	e := jsonrpc.ErrorOf(fmt.Errorf("wrapped: %w", coded{}))
	assert.Equal(t, jsonrpc.Code(-32004), e.Code)
	assert.Equal(t, "rate limited", e.Message)

	_, statErr := os.Stat("/nonexistent/secret/path")
	leak := jsonrpc.ErrorOf(statErr)
	assert.Equal(t, jsonrpc.CodeInternalError, leak.Code)
	assert.NotContains(t, leak.Message, "/nonexistent", "uncoded errors must not reach the wire verbatim")
	assert.True(t, errors.Is(leak, jsonrpc.ErrInternal))
}

func TestError_WithData(t *testing.T) {
	t.Parallel()
	e := jsonrpc.NewError(-32004, "rate limited").WithData(map[string]int{"retryAfterMs": 250})
	assert.JSONEq(t, `{"retryAfterMs":250}`, string(e.Data))
	assert.Equal(t, `{"code":-32004,"message":"rate limited","data":{"retryAfterMs":250}}`, string(e.AppendJSON(nil)))
}
