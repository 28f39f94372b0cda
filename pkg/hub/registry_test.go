package hub

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replicaOf makes a registry entry of a server of owner, registered at
// minute since, listing templates.
func replicaOf(t *testing.T, name, owner string, since int, templates ...string) *replicaInfo {
	t.Helper()
	at := time.Date(2026, 1, 1, 0, since, 0, 0, time.UTC)
	ri := &replicaInfo{ID: "i/" + name, Name: name, Owner: owner, ConnectedAt: at, inflight: new(atomic.Int64)}
	for _, tpl := range templates {
		it, ok := newListItem(kindTemplates, name, DefaultSeparator, json.RawMessage(fmt.Sprintf(`{"uriTemplate":%q,"name":"t"}`, tpl)))
		require.True(t, ok)
		ri.lists[kindTemplates] = append(ri.lists[kindTemplates], it)
	}
	return ri
}

// Templates of two tokens that could match one URI used to be served both,
// the later one's reaching URIs the earlier one's did not cover. They are
// a conflict now: the later is not served. A token's own servers may
// overlap each other.
func TestBuildView_overlappingTemplatesOfTwoTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		first, later string
		sameToken    bool
		refused      bool
	}{
		{"weather://city/{name}", "weather://city/{+x}", false, true},
		{"weather://city/{name}", "weather://{+y}", false, true},
		{"weather://{+y}", "weather://city/{name}", false, true},
		{"{+anything}", "a://{b}", false, true},
		{"weather://city/{name}", "weather://city/{+x}", true, false},
		{"x://t1/{+rest}", "x://t2/{+rest}", false, false},
		{"a://b/{c}", "b://{c}", false, false},
	} {
		t.Run(tc.first+" then "+tc.later, func(t *testing.T) {
			t.Parallel()
			owner := "second"
			if tc.sameToken {
				owner = "first"
			}
			v := buildView([]*replicaInfo{
				replicaOf(t, "early", "first", 1, tc.first),
				replicaOf(t, "late", owner, 2, tc.later),
			}, nil)
			require.NotNil(t, v.lookup(kindTemplates, tc.first), "the earlier server keeps its template")
			if tc.refused {
				assert.Nil(t, v.lookup(kindTemplates, tc.later))
				assert.Equal(t, []conflict{{Kind: "resourceTemplate", Key: tc.later, Kept: "early", Refused: "late"}}, v.conflicts)
			} else {
				assert.NotNil(t, v.lookup(kindTemplates, tc.later))
				assert.Empty(t, v.conflicts)
			}
		})
	}
}

// The place of a server that left comes in registration order: what a
// later server lists of it is refused, what an earlier one holds stays
// with it, and the returning server (same name and token) gets its rank.
func TestBuildView_aDepartedServerKeepsItsPlace(t *testing.T) {
	t.Parallel()
	early := replicaOf(t, "early", "e", 1, "shared://e/{x}")
	late := replicaOf(t, "late", "l", 3, "weather://{+y}")
	res := &reservation{Name: "weather", Owner: "w", Since: time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC),
		Until: time.Now().Add(time.Hour), Resources: []string{"weather://report"}, Templates: []string{"weather://city/{name}", "shared://e/{x}"}}
	res.compile()
	v := buildView([]*replicaInfo{early, late}, []*reservation{res})
	assert.Nil(t, v.lookup(kindTemplates, "weather://{+y}"), "the later server's overlapping template is refused")
	server, ok := v.serverOfURI("weather://city/lyon")
	assert.True(t, ok)
	assert.Equal(t, "weather", server, "the departed server's template is kept")
	assert.Equal(t, "early", v.lookup(kindTemplates, "shared://e/{x}").server, "what an earlier server holds stays with it")
	it := v.lookup(kindResources, "weather://report")
	require.NotNil(t, it)
	assert.True(t, it.reserved)
	assert.Empty(t, it.replicas, "no one serves it meanwhile")
	for _, a := range v.lists[kindResources] {
		assert.NotEqual(t, "weather://report", a.key, "a kept URI is in no list")
	}

	// A replica registering with the same name and token takes the place's rank.
	// Only by a replica with the same name and token, which takes its rank.
	r := newRegistry(time.Hour, nil)
	r.setRemote("other", []*replicaInfo{late}, []*reservation{res})
	assert.ErrorContains(t, r.setLocal(replicaOf(t, "weather", "l", 4)), "kept for the server of another token")
	back := replicaOf(t, "weather", "w", 4, "weather://city/{name}")
	require.NoError(t, r.setLocal(back))
	assert.Equal(t, res.Since, r.localInfo(back.ID).since())
	assert.Equal(t, "weather", r.view().lookup(kindTemplates, "weather://city/{name}").server)
	assert.Nil(t, r.view().lookup(kindTemplates, "weather://{+y}"), "the later server's template stays refused")
}
