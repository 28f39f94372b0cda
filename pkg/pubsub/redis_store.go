package pubsub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Store of a Redis broker: each value is the Redis key
// KeyPrefix+"kv:"+key, which Redis expires by itself. An Update is
// optimistic: WATCH the key, GET it, let fn compute, and SET (or DEL) it in
// a MULTI that Redis runs only if nobody changed the key meanwhile; a lost
// race reads again. A key lives in one hash slot, so the same holds for a
// cluster, on the key's master.

var _ Store = (*Redis)(nil)

// Get returns the value of key, or ErrNotFound. Like Claim, it fails at
// once with ErrUnavailable while the broker knows Redis is unreachable,
// and within CommandTimeout otherwise.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkStore(key); err != nil {
		return nil, err
	}
	k := r.storeKey(key)
	if err := r.usable(ctx, "get", k); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.CommandTimeout)
	defer cancel()
	val, err := r.client.Get(cctx, k).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
	case err != nil:
		return nil, r.commandError(ctx, "get", err)
	}
	return val, nil
}

// Update changes the value of key with fn, as Store.Update describes. The
// whole of it, however many tries, is bounded by CommandTimeout.
func (r *Redis) Update(ctx context.Context, key string, fn func(cur []byte) ([]byte, time.Duration, error)) error {
	if err := checkStore(key); err != nil {
		return err
	}
	k := r.storeKey(key)
	if err := r.usable(ctx, "update", k); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.CommandTimeout)
	defer cancel()
	for range maxUpdateTries {
		var fnErr error
		err := r.client.Watch(cctx, func(tx *redis.Tx) error {
			cur, err := tx.Get(cctx, k).Bytes()
			switch {
			case errors.Is(err, redis.Nil):
				cur = nil
			case err != nil:
				return err
			}
			next, ttl, err := fn(cur)
			if err == nil {
				err = checkTTL(next, ttl)
			}
			if err != nil {
				fnErr = err
				return err
			}
			_, err = tx.TxPipelined(cctx, func(p redis.Pipeliner) error {
				if next == nil {
					p.Del(cctx, k)
				} else {
					p.Set(cctx, k, next, ttl)
				}
				return nil
			})
			return err
		}, k)
		switch {
		case fnErr != nil:
			return fnErr
		case errors.Is(err, redis.TxFailedErr):
			continue // someone else's update won: read again
		case err != nil:
			return r.commandError(ctx, "update", err)
		}
		return nil
	}
	return fmt.Errorf("pubsub: update %q: %w", key, errContended)
}

func (r *Redis) storeKey(key string) string {
	return r.opts.KeyPrefix + "kv:" + key
}
