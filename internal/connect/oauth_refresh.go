package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/oauth2"
)

// refresher gets access tokens by the refresh token grant, from the
// refresh token in a file, and writes back the new refresh token a server
// that rotates them returns (OAuth 2.1 asks public clients' refresh tokens
// to be rotated: the old one is dead once used).
type refresher struct {
	cfg  *OAuthClient
	conf oauth2.Config // less the secret, read for each refresh
	path string
	log  *slog.Logger

	mu   sync.Mutex // one refresh at a time: a rotated token is good for one use
	read string     // the file's token when last read or written
	cur  string     // the newest refresh token held, which the file may lack if writing it failed
}

func newRefresher(cfg *OAuthClient, tokenURL string, scopes []string, log *slog.Logger) *refresher {
	return &refresher{cfg: cfg, path: cfg.RefreshTokenFile, log: log, conf: oauth2.Config{
		ClientID: cfg.ClientID, Scopes: scopes, Endpoint: oauth2.Endpoint{TokenURL: tokenURL},
	}}
}

// token refreshes. ctx carries the HTTP client (oauth2.HTTPClient).
func (r *refresher) token(ctx context.Context) (*oauth2.Token, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt, err := r.current()
	if err != nil {
		return nil, err
	}
	secret, err := r.cfg.secret()
	if err != nil {
		return nil, err
	}
	conf := r.conf
	conf.ClientSecret = secret.Reveal()
	conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams // a public client: client_id in the body, no secret
	if conf.ClientSecret != "" {
		conf.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	}
	// A source made for this one refresh: a token without an access
	// token is refreshed at once.
	tok, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
	if err != nil {
		return nil, err
	}
	if tok.RefreshToken != "" && tok.RefreshToken != rt {
		r.cur = tok.RefreshToken
		if err := writeSecretFile(r.path, tok.RefreshToken); err != nil {
			r.log.Error("the authorization server rotated the refresh token, and writing the new one to its file failed: "+
				"it is kept in memory only, and the file's token is dead (put a new one there before restarting)", "err", err)
		} else {
			r.read = tok.RefreshToken
			r.log.Debug("the authorization server rotated the refresh token; wrote the new one to its file")
		}
	}
	return tok, nil
}

// current returns the refresh token to use: the file's if someone changed
// the file since it was last read or written, else the newest held.
func (r *refresher) current() (string, error) {
	b, err := os.ReadFile(r.path)
	if err != nil {
		if r.cur != "" {
			return r.cur, nil
		}
		return "", fmt.Errorf("the refresh token file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		if r.cur != "" {
			return r.cur, nil
		}
		return "", errors.New("the refresh token file holds no token")
	}
	if line != r.read {
		r.read, r.cur = line, line
	}
	return r.cur, nil
}

// writeSecretFile replaces the file at path with content and a line break,
// atomically (a temporary file in the same folder, synced, renamed over
// it), readable by its owner only.
func writeSecretFile(path, content string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err = f.WriteString(content + "\n"); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
