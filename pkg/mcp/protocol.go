package mcp

import "github.com/switchboard-mcp/switchboard/pkg/jsonrpc"

// Protocol versions. The hub speaks the session-based revisions; Latest is
// what it answers a client that asks for a version it does not know.
const (
	Version20241105 = "2024-11-05"
	Version20250326 = "2025-03-26"
	Version20250618 = "2025-06-18"
	Version20251125 = "2025-11-25"
	LatestVersion   = Version20251125
)

// SupportedVersions lists the protocol versions the hub negotiates, oldest
// first.
var SupportedVersions = []string{Version20241105, Version20250326, Version20250618, Version20251125}

// IsSupportedVersion reports whether v is one of SupportedVersions.
func IsSupportedVersion(v string) bool {
	for _, s := range SupportedVersions {
		if s == v {
			return true
		}
	}
	return false
}

// NegotiateVersion returns the version to answer a client that asked for
// requested: the same version when it is supported, else the latest.
func NegotiateVersion(requested string) string {
	if IsSupportedVersion(requested) {
		return requested
	}
	return LatestVersion
}

// Method names.
const (
	MethodInitialize             = "initialize"
	MethodPing                   = "ping"
	MethodToolsList              = "tools/list"
	MethodToolsCall              = "tools/call"
	MethodResourcesList          = "resources/list"
	MethodResourcesTemplatesList = "resources/templates/list"
	MethodResourcesRead          = "resources/read"
	MethodResourcesSubscribe     = "resources/subscribe"
	MethodResourcesUnsubscribe   = "resources/unsubscribe"
	MethodPromptsList            = "prompts/list"
	MethodPromptsGet             = "prompts/get"
	MethodCompletionComplete     = "completion/complete"
	MethodLoggingSetLevel        = "logging/setLevel"
	MethodSamplingCreateMessage  = "sampling/createMessage"
	MethodElicitationCreate      = "elicitation/create"
	MethodRootsList              = "roots/list"

	NotificationInitialized          = "notifications/initialized"
	NotificationProgress             = "notifications/progress"
	NotificationCancelled            = "notifications/cancelled"
	NotificationMessage              = "notifications/message"
	NotificationResourceUpdated      = "notifications/resources/updated"
	NotificationResourcesListChanged = "notifications/resources/list_changed"
	NotificationToolsListChanged     = "notifications/tools/list_changed"
	NotificationPromptsListChanged   = "notifications/prompts/list_changed"
	NotificationRootsListChanged     = "notifications/roots/list_changed"
	// NotificationElicitationComplete tells the client that a URL-mode
	// elicitation (named by its elicitationId) was completed out of band;
	// 2025-11-25 only.
	NotificationElicitationComplete = "notifications/elicitation/complete"
	// NotificationTasksStatus reports a task's status; 2025-11-25 only.
	NotificationTasksStatus = "notifications/tasks/status"
)

// Error codes: JSON-RPC's, MCP's, and the hub's own.
const (
	CodeParseError                    = jsonrpc.CodeParseError
	CodeInvalidRequest                = jsonrpc.CodeInvalidRequest
	CodeMethodNotFound                = jsonrpc.CodeMethodNotFound
	CodeInvalidParams                 = jsonrpc.CodeInvalidParams
	CodeInternalError                 = jsonrpc.CodeInternalError
	CodeConnectionClosed jsonrpc.Code = -32000 // the server left; see peer.ErrClosed
	CodeRequestTimeout   jsonrpc.Code = -32001
	CodeResourceNotFound jsonrpc.Code = -32002
	CodeForbidden        jsonrpc.Code = -32003
	CodeRateLimited      jsonrpc.Code = -32004
	// CodeURLElicitationRequired answers a request that needs the user to
	// complete URL-mode elicitations first (its data lists them);
	// 2025-11-25.
	CodeURLElicitationRequired jsonrpc.Code = -32042
)

// Sentinel errors for the MCP and hub codes; compare with errors.Is.
var (
	ErrConnectionClosed = &jsonrpc.Error{Code: CodeConnectionClosed, Message: "Connection closed"}
	ErrRequestTimeout   = &jsonrpc.Error{Code: CodeRequestTimeout, Message: "Request timed out"}
	ErrResourceNotFound = &jsonrpc.Error{Code: CodeResourceNotFound, Message: "Resource not found"}
	ErrForbidden        = &jsonrpc.Error{Code: CodeForbidden, Message: "Forbidden"}
	ErrRateLimited      = &jsonrpc.Error{Code: CodeRateLimited, Message: "Rate limited"}
)

// Keys of _meta that the hub reads or writes.
const (
	// MetaServer names the hub server an aggregated item came from.
	MetaServer = "switchboard/server"
	// MetaRelatedRequest, on a request from a server to a client, holds the
	// id of the call the server is serving (the id the server received), so
	// that the hub routes it to the client that made that call.
	MetaRelatedRequest = "switchboard/relatedRequest"
	// MetaProgressToken is MCP's key for a request's progress token.
	MetaProgressToken = "progressToken"
)

// LoggingLevel is a syslog severity, as MCP uses them.
type LoggingLevel string

// The logging levels, from the most to the least verbose.
const (
	LevelDebug     LoggingLevel = "debug"
	LevelInfo      LoggingLevel = "info"
	LevelNotice    LoggingLevel = "notice"
	LevelWarning   LoggingLevel = "warning"
	LevelError     LoggingLevel = "error"
	LevelCritical  LoggingLevel = "critical"
	LevelAlert     LoggingLevel = "alert"
	LevelEmergency LoggingLevel = "emergency"
)

// Severity orders levels: higher is more severe; -1 for an unknown level.
func (l LoggingLevel) Severity() int {
	switch l {
	case LevelDebug:
		return 0
	case LevelInfo:
		return 1
	case LevelNotice:
		return 2
	case LevelWarning:
		return 3
	case LevelError:
		return 4
	case LevelCritical:
		return 5
	case LevelAlert:
		return 6
	case LevelEmergency:
		return 7
	}
	return -1
}
