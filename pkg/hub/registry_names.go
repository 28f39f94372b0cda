package hub

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// reservedName is the hub's own name: its built-in resources carry it in
// _meta["switchboard/server"], so no server may take it.
const reservedName = "switchboard"

// normalizeName maps a server's name to the hub's alphabet [a-z0-9-]:
// lower case, every run of other characters becomes one '-', and leading and
// trailing '-' are dropped. The result may be empty.
func normalizeName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	return b.String()
}

// A server name belongs to one owner (token) across the cluster: the first
// replica to register it takes a lease on it in the broker, atomically, and
// every instance with replicas of that name renews it at each heartbeat.
// Two tokens allowed the same name that register at the same moment on two
// instances: exactly one wins; the other is refused. While the broker is out
// of reach a name is checked against what this instance knows, and when it
// is back the renewal settles it: of two owners, the one that holds the
// lease keeps the name, and the other's replicas are closed.

// nameLeaseKey is the broker key of a server name's lease.
func nameLeaseKey(name string) string { return "server/" + name }

// nameTTL is how long a name's lease outlives its last renewal.
func (h *Hub) nameTTL() time.Duration { return missedHeartbeats * h.cfg.HeartbeatInterval }

// errNameHeld refuses a replica whose name another token holds.
func errNameHeld(name string) error {
	return fmt.Errorf("server name %q is held by another token", name)
}

// errNameReserved refuses a replica whose name is kept for a server of
// another token that left lately (registry_departures.go).
func errNameReserved(name string) error {
	return fmt.Errorf("server name %q is kept for the server of another token that left lately", name)
}

// claimName takes or renews the lease on a server name for owner.
func (h *Hub) claimName(ctx context.Context, name, owner string) error {
	holder, err := h.broker.Claim(ctx, nameLeaseKey(name), owner, h.nameTTL())
	switch {
	case err != nil:
		h.log.Warn("cannot claim a server name cluster-wide now; checked locally until the broker is back", "server", name, "err", err)
		return nil
	case holder != owner:
		return errNameHeld(name)
	}
	return nil
}

// renewNames renews the leases of the names this instance's replicas hold,
// and closes the replicas whose name another owner holds now (it took the
// name while this instance could not renew).
func (h *Hub) renewNames(ctx context.Context) {
	owners := map[string]string{} // name -> owner
	for _, ri := range h.reg.localReplicas() {
		owners[ri.Name] = ri.Owner
	}
	for name, owner := range owners {
		holder, err := h.broker.Claim(ctx, nameLeaseKey(name), owner, h.nameTTL())
		if err != nil || holder == owner {
			continue
		}
		h.log.Warn("another token holds this server name now; closing its replicas here", "server", name, "holder", holder)
		for _, ri := range h.reg.localReplicas() {
			if ri.Name == name && ri.local != nil {
				ri.local.peer.CloseWith(peer.ClosePolicyViolation, errNameHeld(name).Error())
			}
		}
	}
}

// releaseName gives up a name's lease when no replica of it is left in the
// cluster, so that another token may take it at once rather than after the
// lease's time.
func (h *Hub) releaseName(name, owner string) {
	if len(h.reg.view().servers[name]) > 0 {
		return
	}
	h.goOwned(func() {
		ctx, cancel := context.WithTimeout(h.ctx, time.Second)
		defer cancel()
		if err := h.broker.Release(ctx, nameLeaseKey(name), owner); err != nil {
			h.log.Debug("releasing a server name failed", "server", name, "err", err)
		}
	})
}
