package oauth_test

import (
	"context"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// BenchmarkVerify: the cost of verifying a token of the real authorization
// server (RS256, 2048-bit key, about 800 bytes) once its issuer's keys are
// at hand. "warm": a token already verified, as every request of a busy
// session after its first (the target is at most 2 us); "cold": with the
// cache off, the signature checked every time.
func BenchmarkVerify(b *testing.B) {
	as := oauthtest.Start(b)
	m := as.MachineClient("mcp:client")
	token := as.Token(m, resource, "mcp:client")
	for _, bc := range []struct {
		name  string
		cache int
	}{{"warm", 0}, {"cold", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			v := newVerifier(b, as, func(c *oauth.Config) { c.CacheEntries = bc.cache })
			ctx := context.Background()
			if _, err := v.Verify(ctx, token, resource); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := v.Verify(ctx, token, resource); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifyParallel: the warm path from every core at once (the
// cache's read lock shared).
func BenchmarkVerifyParallel(b *testing.B) {
	as := oauthtest.Start(b)
	m := as.MachineClient("mcp:client")
	token := as.Token(m, resource, "mcp:client")
	v := newVerifier(b, as, nil)
	if _, err := v.Verify(context.Background(), token, resource); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := v.Verify(ctx, token, resource); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
