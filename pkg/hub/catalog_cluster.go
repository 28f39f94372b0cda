package hub

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// The catalog in force, shared through the broker. Every instance started
// with a catalog file publishes the catalog it serves on catalogTopic when
// it starts, when its file changes, and when its broker connection comes
// back. An instance that hears a newer catalog (loadedCatalog.newer: the
// later written, then the larger hash) puts it in force; one that hears an
// older catalog publishes its own, so that an instance that joins, or one
// whose message was lost, catches up at once. Catalogs are small and
// change rarely: whole catalogs go on the wire, and nothing else.
//
// Why the broker rather than each instance its own file: files do not
// change everywhere at once (a Kubernetes ConfigMap reaches each pod when
// its kubelet syncs it, a minute apart at times), and two instances
// serving two catalogs would give one client two different endpoints
// behind one load balancer. Through the broker the newest change anywhere
// is served everywhere within moments of its being seen; an instance that
// restarts with a file older than the cluster's catalog (its modification
// time says so) takes the cluster's. An instance started without a
// catalog file takes no part.

// catalogShare is the broker's side of the catalog.
type catalogShare struct {
	sub       pubsub.Subscription
	stopWatch func()
}

// catalogMessage is a catalog on the wire.
type catalogMessage struct {
	From    string    `json:"from"`
	Origin  string    `json:"origin"`
	Written time.Time `json:"written"`
	SHA256  string    `json:"sha256"`
	Source  []byte    `json:"source"`
}

// startSharing subscribes to the catalogs of the others and publishes
// this instance's.
func (ck *catalogKeeper) startSharing(ctx context.Context) error {
	h := ck.h
	sub, err := h.broker.Subscribe(ctx, catalogTopic, ck.onMessage)
	if err != nil {
		return err
	}
	share := &catalogShare{sub: sub}
	share.stopWatch = h.broker.Watch(func(up bool) {
		if up {
			// The catalogs published meanwhile may be lost, both ways:
			// publishing ours makes the newer ones come back.
			h.goOwned(func() { ck.publish(ck.current()) })
		}
	})
	ck.mu.Lock()
	ck.share = share
	ck.mu.Unlock()
	ck.publish(ck.current())
	return nil
}

// publish publishes a catalog for the others, bounded by a second.
func (ck *catalogKeeper) publish(lc *loadedCatalog) {
	h := ck.h
	if lc == nil {
		return
	}
	raw, err := json.Marshal(&catalogMessage{From: h.id, Origin: lc.origin, Written: lc.stamp, SHA256: lc.sum, Source: lc.raw})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), time.Second)
	defer cancel()
	if err := h.broker.Publish(ctx, catalogTopic, raw); err != nil {
		h.log.Warn("sharing the catalog failed; the others get it when the broker is back", "err", err)
	}
}

// onMessage hears another instance's catalog: a newer one is put in
// force, an older one answered with ours.
func (ck *catalogKeeper) onMessage(_ context.Context, _ string, payload []byte) {
	h := ck.h
	var m catalogMessage
	if len(payload) > 2*maxCatalogBytes || json.Unmarshal(payload, &m) != nil || m.From == h.id || m.From == "" {
		return
	}
	if len(m.Source) > maxCatalogBytes || catalogSum(m.Source) != m.SHA256 {
		return
	}
	theirs := &loadedCatalog{raw: m.Source, stamp: m.Written, sum: m.SHA256, origin: m.Origin}
	cur := ck.current()
	switch {
	case cur != nil && cur.sum == theirs.sum:
	case theirs.newer(cur):
		_ = ck.offer(theirs, "instance "+shortID(m.From))
	default:
		h.goOwned(func() { ck.publish(cur) }) // not on the subscription's goroutine: Publish may wait
	}
}

// stopSharing ends the broker's side.
func (ck *catalogKeeper) stopSharing() {
	ck.mu.Lock()
	share := ck.share
	ck.share = nil
	ck.mu.Unlock()
	if share == nil {
		return
	}
	share.stopWatch()
	share.sub.Close()
}
