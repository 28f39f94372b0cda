module github.com/switchboard-mcp/switchboard

go 1.26.8

require github.com/stretchr/testify v1.12.1

require (
	github.com/coder/websocket v1.8.15 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
