package devstack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is the certificate authority made for one stand-in stack: the worker
// API serves TLS with a certificate it signs, as API Gateway's endpoint
// serves HTTPS, and the workers trust it through their CA bundle,
// BundleFile: a container gets it as its /etc/ssl/certs/ca-certificates.crt
// (Debian's bundle, which Go, OpenSSL and so Python and curl read), a
// process through SSL_CERT_FILE (Env). Its key never leaves this process.
type CA struct {
	// Dir holds CertFile and BundleFile.
	Dir string
	// CertFile is the CA's certificate, PEM.
	CertFile string
	// BundleFile is this machine's CA bundle with CertFile appended.
	BundleFile string
	// TLS serves the worker API: a certificate for the hosts NewCA was
	// given, signed by the CA.
	TLS *tls.Config
}

// CertName is the CA certificate's file name, in CA.Dir and in a
// container's /etc/ssl/certs.
const CertName = "stratus-dev-ca.pem"

// NewCA makes a CA valid for a day, writes its certificate to
// dir/CertName, and signs a serving certificate for hosts (IP addresses
// or DNS names). Errors: the key or the file could not be made.
func NewCA(dir, stack string, hosts ...string) (*CA, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	serial := func() *big.Int { n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120)); return n }
	caTmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "stratus dev aws CA (" + stack + ")"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, MaxPathLenZero: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "stratus dev aws worker API"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, CertName)
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return nil, fmt.Errorf("write the stack's CA certificate: %w", err)
	}
	bundle := filepath.Join(dir, "ca-bundle.crt")
	var system []byte
	for _, f := range systemBundles {
		if system, err = os.ReadFile(f); err == nil {
			break
		}
	}
	if len(system) > 0 && system[len(system)-1] != '\n' {
		system = append(system, '\n')
	}
	if err := os.WriteFile(bundle, append(system, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...), 0o644); err != nil {
		return nil, fmt.Errorf("write the stack's CA bundle: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}
	return &CA{Dir: dir, CertFile: file, BundleFile: bundle, TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}, nil
}

// systemBundles are where Linux distributions keep the CA bundle (Go's
// crypto/x509 list, Debian's first).
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem", "/etc/pki/tls/cacert.pem", "/etc/ssl/cert.pem",
}

// Env is what makes a process on this machine trust the CA besides the
// system's: SSL_CERT_FILE, the bundle (read by Go's crypto/x509 and by
// OpenSSL).
func (c *CA) Env() string {
	return "SSL_CERT_FILE=" + c.BundleFile
}
