package pubsub_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// testStore is the part of the contract about the Store capability, which
// every backend has.
func testStore(t *testing.T, be backend) {
	const long = time.Hour
	stores := func(t *testing.T, n int) []pubsub.Store {
		var out []pubsub.Store
		for _, b := range be.newGroup(t, n) {
			s, ok := b.(pubsub.Store)
			require.True(t, ok, "%T is a Store", b)
			out = append(out, s)
		}
		return out
	}
	set := func(t *testing.T, s pubsub.Store, key, value string, ttl time.Duration) {
		t.Helper()
		require.NoError(t, s.Update(context.Background(), key, func([]byte) ([]byte, time.Duration, error) {
			return []byte(value), ttl, nil
		}))
	}
	get := func(t *testing.T, s pubsub.Store, key string) (string, error) {
		t.Helper()
		v, err := s.Get(context.Background(), key)
		return string(v), err
	}

	t.Run("set, read everywhere, replace, delete", func(t *testing.T) {
		t.Parallel()
		group := stores(t, 2)
		a, b := group[0], group[1]
		_, err := get(t, b, "record")
		require.ErrorIs(t, err, pubsub.ErrNotFound, "a key never set")

		set(t, a, "record", "one", long)
		v, err := get(t, b, "record")
		require.NoError(t, err, "read on another instance at once")
		assert.Equal(t, "one", v)

		require.NoError(t, b.Update(context.Background(), "record", func(cur []byte) ([]byte, time.Duration, error) {
			assert.Equal(t, "one", string(cur), "fn sees the current value")
			return append(cur, "+two"...), long, nil
		}))
		v, _ = get(t, a, "record")
		assert.Equal(t, "one+two", v)

		require.NoError(t, a.Update(context.Background(), "record", func(cur []byte) ([]byte, time.Duration, error) {
			return nil, 0, nil
		}))
		_, err = get(t, b, "record")
		require.ErrorIs(t, err, pubsub.ErrNotFound, "a nil value deletes")
	})

	t.Run("an error from fn changes nothing", func(t *testing.T) {
		t.Parallel()
		s := stores(t, 1)[0]
		set(t, s, "k", "kept", long)
		refused := errors.New("refused")
		err := s.Update(context.Background(), "k", func(cur []byte) ([]byte, time.Duration, error) {
			return []byte("lost"), long, refused
		})
		require.ErrorIs(t, err, refused, "Update returns fn's error")
		v, _ := get(t, s, "k")
		assert.Equal(t, "kept", v)

		err = s.Update(context.Background(), "k", func([]byte) ([]byte, time.Duration, error) {
			return []byte("lost"), 0, nil
		})
		require.Error(t, err, "a value without a ttl")
		v, _ = get(t, s, "k")
		assert.Equal(t, "kept", v)
		_, err = s.Get(context.Background(), "")
		require.Error(t, err, "an empty key")
	})

	t.Run("a value expires after its ttl, counted from its last update", func(t *testing.T) {
		t.Parallel()
		group := stores(t, 2)
		a, b := group[0], group[1]
		set(t, a, "short", "v", 150*time.Millisecond)
		set(t, a, "extended", "v", 150*time.Millisecond)
		set(t, a, "extended", "v", long)
		eventually(t, waitTimeout, "the short value expires", func() bool {
			_, err := get(t, b, "short")
			return errors.Is(err, pubsub.ErrNotFound)
		})
		v, err := get(t, b, "extended")
		require.NoError(t, err, "an update resets the expiry")
		assert.Equal(t, "v", v)
		require.NoError(t, b.Update(context.Background(), "short", func(cur []byte) ([]byte, time.Duration, error) {
			assert.Nil(t, cur, "an expired value is no value")
			return []byte("again"), long, nil
		}))
	})

	t.Run("updates are atomic across instances", func(t *testing.T) {
		t.Parallel()
		group := stores(t, 2)
		const workers, each = 4, 25
		var wg sync.WaitGroup
		for w := range workers {
			s := group[w%2]
			wg.Go(func() {
				for range each {
					err := s.Update(context.Background(), "counter", func(cur []byte) ([]byte, time.Duration, error) {
						n, _ := strconv.Atoi(string(cur))
						return strconv.AppendInt(nil, int64(n+1), 10), long, nil
					})
					assert.NoError(t, err)
				}
			})
		}
		wg.Wait()
		v, err := get(t, group[0], "counter")
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(workers*each), v, "no increment lost")
	})

	t.Run("keys are apart from leases", func(t *testing.T) {
		t.Parallel()
		b := be.newGroup(t, 1)[0]
		s := b.(pubsub.Store)
		claim(t, b, "name", "owner", long, "owner")
		_, err := get(t, s, "name")
		require.ErrorIs(t, err, pubsub.ErrNotFound, "a lease is no value")
		set(t, s, "name", "value", long)
		claim(t, b, "name", "other", long, "owner")
	})
}
