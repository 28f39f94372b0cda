package mcp

import "sort"

// Direction says which side sends a method.
type Direction uint8

// The directions.
const (
	// ClientToServer: sent by a client (for the hub: by its clients, and by
	// the hub to its servers).
	ClientToServer Direction = 1 << iota
	// ServerToClient: sent by a server (for the hub: by its servers, and by
	// the hub to its clients).
	ServerToClient
	// BothWays: either side may send it (ping, progress, cancellation).
	BothWays = ClientToServer | ServerToClient
)

// Era is a set of protocol revisions that share a shape: the session-based
// ones, which open with initialize, and the stateless one, 2026-07-28, where
// every request describes itself.
type Era uint8

// The eras.
const (
	// SessionEra is 2024-11-05 to 2025-11-25.
	SessionEra Era = 1 << iota
	// StatelessEra is 2026-07-28.
	StatelessEra
	// AllEras is both.
	AllEras = SessionEra | StatelessEra
)

// MethodSpec describes one MCP request or notification: who sends it, what
// capability it needs of the other side, and which revisions define it. It
// is the one table the Go helpers, the hub's dispatch and its metrics read.
type MethodSpec struct {
	Name         string
	Notification bool
	Direction    Direction
	// ServerCap is the server capability a client's request needs: "tools",
	// "resources", "prompts", "completions" or "logging"; "" for none.
	ServerCap string
	// ClientCap is the client capability a server's request needs:
	// "sampling", "elicitation" or "roots"; "" for none.
	ClientCap string
	// Eras are the revisions that define the method.
	Eras Era
}

var methodTable = func() map[string]*MethodSpec {
	specs := []MethodSpec{
		{Name: MethodInitialize, Direction: ClientToServer, Eras: SessionEra},
		{Name: MethodServerDiscover, Direction: ClientToServer, Eras: StatelessEra},
		{Name: MethodSubscriptionsListen, Direction: ClientToServer, Eras: StatelessEra},
		{Name: MethodPing, Direction: BothWays, Eras: SessionEra},
		{Name: MethodToolsList, Direction: ClientToServer, ServerCap: "tools", Eras: AllEras},
		{Name: MethodToolsCall, Direction: ClientToServer, ServerCap: "tools", Eras: AllEras},
		{Name: MethodResourcesList, Direction: ClientToServer, ServerCap: "resources", Eras: AllEras},
		{Name: MethodResourcesTemplatesList, Direction: ClientToServer, ServerCap: "resources", Eras: AllEras},
		{Name: MethodResourcesRead, Direction: ClientToServer, ServerCap: "resources", Eras: AllEras},
		{Name: MethodResourcesSubscribe, Direction: ClientToServer, ServerCap: "resources", Eras: SessionEra},
		{Name: MethodResourcesUnsubscribe, Direction: ClientToServer, ServerCap: "resources", Eras: SessionEra},
		{Name: MethodPromptsList, Direction: ClientToServer, ServerCap: "prompts", Eras: AllEras},
		{Name: MethodPromptsGet, Direction: ClientToServer, ServerCap: "prompts", Eras: AllEras},
		{Name: MethodCompletionComplete, Direction: ClientToServer, ServerCap: "completions", Eras: AllEras},
		{Name: MethodLoggingSetLevel, Direction: ClientToServer, ServerCap: "logging", Eras: SessionEra},
		{Name: MethodSamplingCreateMessage, Direction: ServerToClient, ClientCap: "sampling", Eras: SessionEra},
		{Name: MethodElicitationCreate, Direction: ServerToClient, ClientCap: "elicitation", Eras: SessionEra},
		{Name: MethodRootsList, Direction: ServerToClient, ClientCap: "roots", Eras: SessionEra},

		{Name: NotificationInitialized, Notification: true, Direction: ClientToServer, Eras: SessionEra},
		{Name: NotificationProgress, Notification: true, Direction: BothWays, Eras: AllEras},
		{Name: NotificationCancelled, Notification: true, Direction: BothWays, Eras: AllEras},
		{Name: NotificationMessage, Notification: true, Direction: ServerToClient, ServerCap: "logging", Eras: AllEras},
		{Name: NotificationResourceUpdated, Notification: true, Direction: ServerToClient, ServerCap: "resources", Eras: AllEras},
		{Name: NotificationResourcesListChanged, Notification: true, Direction: ServerToClient, ServerCap: "resources", Eras: AllEras},
		{Name: NotificationToolsListChanged, Notification: true, Direction: ServerToClient, ServerCap: "tools", Eras: AllEras},
		{Name: NotificationPromptsListChanged, Notification: true, Direction: ServerToClient, ServerCap: "prompts", Eras: AllEras},
		{Name: NotificationRootsListChanged, Notification: true, Direction: ClientToServer, ClientCap: "roots", Eras: SessionEra},
		{Name: NotificationSubscriptionsAcknowledged, Notification: true, Direction: ServerToClient, Eras: StatelessEra},
	}
	m := make(map[string]*MethodSpec, len(specs))
	for i := range specs {
		m[specs[i].Name] = &specs[i]
	}
	return m
}()

// LookupMethod returns the spec of a method MCP defines.
func LookupMethod(name string) (*MethodSpec, bool) {
	s, ok := methodTable[name]
	return s, ok
}

// Methods returns every method MCP defines, sorted by name.
func Methods() []*MethodSpec {
	out := make([]*MethodSpec, 0, len(methodTable))
	for _, s := range methodTable {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
