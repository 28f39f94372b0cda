package search_test

import (
	"encoding/json"
	"fmt"
	"path"

	"github.com/switchboard-mcp/switchboard/internal/search"
)

// Two servers' tools indexed, and a search by a principal allowed only
// GitHub's tools whose names match "github__*issue*".
func ExampleIndex_Search() {
	x := search.New()
	x.SetServer("github", []search.Tool{
		{Name: "github__create_issue", Server: "github", Description: "Create a new issue in a GitHub repository",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"}}}`)},
		{Name: "github__list_issues", Server: "github", Description: "List issues in a GitHub repository"},
		{Name: "github__delete_repository", Server: "github", Description: "Delete a repository"},
	})
	x.SetServer("jira", []search.Tool{
		{Name: "jira__create_ticket", Server: "jira", Description: "Open a new ticket in a Jira project"},
	})

	for _, r := range x.Search("open a ticket for this bug", 3, search.Filter{}) {
		fmt.Println(r.Tool.Name)
	}
	allowed := search.Filter{
		Server: func(s string) bool { return s == "github" },
		Tool:   func(t *search.Tool) bool { ok, _ := path.Match("github__*issue*", t.Name); return ok },
	}
	for _, r := range x.Search("open a ticket for this bug", 3, allowed) {
		fmt.Println("allowed:", r.Tool.Name)
	}
	// Output:
	// jira__create_ticket
	// github__create_issue
	// github__list_issues
	// allowed: github__create_issue
	// allowed: github__list_issues
}
