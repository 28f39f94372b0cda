package oauth

// SignForTest signs a JWT for the external tests (see signed).
var SignForTest = signed

// OnDemandClaimedForTest reports whether a token that named a key id the
// keys of v's first issuer lack has claimed its on-demand fetch.
func OnDemandClaimedForTest(v *Verifier) bool {
	is := v.order[0]
	is.mu.Lock()
	defer is.mu.Unlock()
	return !is.onDemandAt.IsZero()
}
