package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TLSServer is a Server that also accepts TLS connections, on a port of
// its own, with a self-signed certificate for 127.0.0.1.
type TLSServer struct {
	*Server
	tlsPort int
}

// StartTLS starts a server as Start does, also listening for TLS (clients
// need no certificate of their own).
func StartTLS(tb testing.TB, args ...string) *TLSServer {
	tb.Helper()
	dir := tb.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(tb, cert, key)
	port := freePort(tb)
	s := Start(tb, append([]string{
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", cert,
		"--tls-key-file", key,
		"--tls-ca-cert-file", cert,
		"--tls-auth-clients", "no",
	}, args...)...)
	return &TLSServer{Server: s, tlsPort: port}
}

// TLSURL returns the URL of the TLS port, rediss://127.0.0.1:PORT/0, which
// skips certificate verification (the certificate is self-signed).
func (s *TLSServer) TLSURL() string {
	return "rediss://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort)) + "/0?skip_verify=true"
}

func writeSelfSigned(tb testing.TB, certFile, keyFile string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
}
