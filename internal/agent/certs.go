package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The files vigil agent init writes into its directory.
const (
	CAFile         = "ca.crt"
	CAKeyFile      = "ca.key"
	AgentCertFile  = "agent.crt"
	AgentKeyFile   = "agent.key"
	ClientCertFile = "vigil.crt"
	ClientKeyFile  = "vigil.key"
)

// InitOptions say what vigil agent init creates.
type InitOptions struct {
	// Dir receives the files (created 0700 if missing).
	Dir string
	// Hosts are the IP addresses and DNS names the agent's certificate is
	// valid for; default 127.0.0.1 and localhost.
	Hosts []string
	// Validity of the certificates; default 5 years (the CA 10).
	Validity time.Duration
	// Now is the clock, for tests; default time.Now.
	Now func() time.Time
}

// InitFiles are the paths vigil agent init wrote.
type InitFiles struct {
	CA, CAKey, AgentCert, AgentKey, ClientCert, ClientKey string
}

// Init creates a CA (ECDSA P-256), a server certificate for the agent and
// a client certificate for Vigil, all signed by that CA, as PEM files with
// mode 0600. It refuses to overwrite any existing file: replacing a CA
// silently would lock every Vigil out, or worse, leave an old key valid.
func Init(o InitOptions) (InitFiles, error) {
	if o.Dir == "" {
		return InitFiles{}, errors.New("agent init: no directory")
	}
	if len(o.Hosts) == 0 {
		o.Hosts = []string{"127.0.0.1", "localhost"}
	}
	if o.Validity == 0 {
		o.Validity = 5 * 365 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	f := InitFiles{
		CA: filepath.Join(o.Dir, CAFile), CAKey: filepath.Join(o.Dir, CAKeyFile),
		AgentCert: filepath.Join(o.Dir, AgentCertFile), AgentKey: filepath.Join(o.Dir, AgentKeyFile),
		ClientCert: filepath.Join(o.Dir, ClientCertFile), ClientKey: filepath.Join(o.Dir, ClientKeyFile),
	}
	for _, p := range []string{f.CA, f.CAKey, f.AgentCert, f.AgentKey, f.ClientCert, f.ClientKey} {
		if _, err := os.Stat(p); err == nil {
			return InitFiles{}, fmt.Errorf("agent init: %s exists; refusing to overwrite certificates (use another --dir or remove the old files on purpose)", p)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return InitFiles{}, fmt.Errorf("agent init: %w", err)
	}
	now := o.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return InitFiles{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "vigil agent CA", Organization: []string{"vigil"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(2 * o.Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return InitFiles{}, fmt.Errorf("agent init: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return InitFiles{}, err
	}
	leaf := func(cn string, usage []x509.ExtKeyUsage, hosts []string) ([]byte, *ecdsa.PrivateKey, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		t := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn, Organization: []string{"vigil"}},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(o.Validity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usage,
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				t.IPAddresses = append(t.IPAddresses, ip)
			} else {
				t.DNSNames = append(t.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
		return der, key, err
	}
	// The agent's certificate is also its client certificate when it
	// pulls a clone's stream from another agent (peer.go); the server
	// usage tells it from Vigil's, which has the client usage alone.
	agentDER, agentKey, err := leaf("vigil-agent", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, o.Hosts)
	if err != nil {
		return InitFiles{}, fmt.Errorf("agent init: agent certificate: %w", err)
	}
	clientDER, clientKey, err := leaf("vigil", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil)
	if err != nil {
		return InitFiles{}, fmt.Errorf("agent init: client certificate: %w", err)
	}
	for _, w := range []struct {
		path string
		der  []byte
		key  *ecdsa.PrivateKey
	}{{f.CA, caDER, nil}, {f.CAKey, nil, caKey}, {f.AgentCert, agentDER, nil}, {f.AgentKey, nil, agentKey},
		{f.ClientCert, clientDER, nil}, {f.ClientKey, nil, clientKey}} {
		var block *pem.Block
		if w.key != nil {
			der, err := x509.MarshalECPrivateKey(w.key)
			if err != nil {
				return InitFiles{}, err
			}
			block = &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
		} else {
			block = &pem.Block{Type: "CERTIFICATE", Bytes: w.der}
		}
		if err := os.WriteFile(w.path, pem.EncodeToMemory(block), 0o600); err != nil {
			return InitFiles{}, fmt.Errorf("agent init: %w", err)
		}
	}
	return f, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
