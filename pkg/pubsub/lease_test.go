package pubsub_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// testLeases is the part of the contract about Claim and Release.
func testLeases(t *testing.T, be backend) {
	const long = time.Hour

	t.Run("claim, renew, release", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		group := be.newGroup(t, 2)
		a, b := group[0], group[1]

		claim(t, a, "name", "owner-a", long, "owner-a")
		claim(t, b, "name", "owner-b", long, "owner-a")
		claim(t, a, "name", "owner-a", long, "owner-a") // renewal
		claim(t, b, "other", "owner-b", long, "owner-b")

		require.NoError(t, b.Release(ctx, "name", "owner-b"), "release by a non-holder")
		claim(t, b, "name", "owner-b", long, "owner-a")
		require.NoError(t, a.Release(ctx, "name", "owner-a"))
		claim(t, b, "name", "owner-b", long, "owner-b")
		require.NoError(t, a.Release(ctx, "name", "owner-a"), "release of a lease one no longer holds")
		claim(t, a, "name", "owner-a", long, "owner-b")
		require.NoError(t, b.Release(ctx, "never-claimed", "owner-b"))
	})

	t.Run("a lease expires after its ttl, counted from the last claim", func(t *testing.T) {
		t.Parallel()
		group := be.newGroup(t, 2)
		a, b := group[0], group[1]
		const ttl = 150 * time.Millisecond

		// witness is claimed with ttl first: once it has expired, so has
		// any ttl-long lease claimed after it.
		claim(t, a, "witness", "owner-a", ttl, "owner-a")
		claim(t, a, "renewed", "owner-a", ttl, "owner-a")
		claim(t, a, "renewed", "owner-a", long, "owner-a") // renewal extends
		claim(t, a, "shortened", "owner-a", long, "owner-a")
		claim(t, a, "shortened", "owner-a", ttl, "owner-a") // renewal resets, also downwards

		eventually(t, waitTimeout, "the witness lease expires", func() bool {
			return claimOnce(t, b, "witness", "owner-b", long) == "owner-b"
		})
		claim(t, b, "renewed", "owner-b", long, "owner-a")
		eventually(t, waitTimeout, "the shortened lease expires", func() bool {
			return claimOnce(t, b, "shortened", "owner-b", long) == "owner-b"
		})
	})

	t.Run("concurrent claims have one winner", func(t *testing.T) {
		t.Parallel()
		const claimers, rounds = 8, 10
		group := be.newGroup(t, claimers)
		for round := range rounds {
			key := fmt.Sprint("contested-", round)
			start := make(chan struct{})
			holders := make([]string, claimers)
			errs := make([]error, claimers)
			var wg sync.WaitGroup
			for i, b := range group {
				wg.Go(func() {
					<-start
					holders[i], errs[i] = b.Claim(context.Background(), key, fmt.Sprint("owner-", i), long)
				})
			}
			close(start)
			wg.Wait()
			winners := 0
			for i := range group {
				require.NoError(t, errs[i])
				assert.Equal(t, holders[0], holders[i], "claimers disagree on the holder")
				if holders[i] == fmt.Sprint("owner-", i) {
					winners++
				}
			}
			require.Equal(t, 1, winners, "round %d: holders %q", round, holders)
		}
	})

	t.Run("bad arguments", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := be.newBroker(t)
		for _, tc := range []struct {
			key, owner string
			ttl        time.Duration
		}{
			{"", "o", time.Second},
			{"k", "", time.Second},
			{"k", "o", 0},
			{"k", "o", time.Microsecond},
			{"k", "o", -time.Second},
		} {
			_, err := b.Claim(ctx, tc.key, tc.owner, tc.ttl)
			assert.Error(t, err, "Claim(%q, %q, %v)", tc.key, tc.owner, tc.ttl)
		}
		assert.Error(t, b.Release(ctx, "", "o"))
		assert.Error(t, b.Release(ctx, "k", ""))
		claim(t, b, "k", "o", time.Second, "o") // nothing was taken by the bad calls
	})

	t.Run("done context and closed broker", func(t *testing.T) {
		t.Parallel()
		b := be.newBroker(t)
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := b.Claim(done, "k", "o", long)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, b.Release(done, "k", "o"), context.Canceled)

		require.NoError(t, b.Close())
		_, err = b.Claim(context.Background(), "k", "o", long)
		assert.ErrorIs(t, err, pubsub.ErrClosed)
		assert.ErrorIs(t, b.Release(context.Background(), "k", "o"), pubsub.ErrClosed)
	})
}

// claim claims key for owner and checks who holds it then.
func claim(t *testing.T, b pubsub.Broker, key, owner string, ttl time.Duration, wantHolder string) {
	t.Helper()
	assert.Equal(t, wantHolder, claimOnce(t, b, key, owner, ttl), "holder of %q after %s claimed it", key, owner)
}

func claimOnce(t *testing.T, b pubsub.Broker, key, owner string, ttl time.Duration) string {
	t.Helper()
	holder, err := b.Claim(context.Background(), key, owner, ttl)
	require.NoError(t, err)
	return holder
}
