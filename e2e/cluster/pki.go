package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// Identity is a client certificate the harness issues: CN is the user, Groups the O fields.
type Identity struct {
	User   string
	Groups []string
}

// Well-known identities. Control-plane components get the users the built-in RBAC roles
// already bind; berth-scheduler gets a user of its own so its RBAC is tested as a second
// scheduler's would be.
var (
	AdminIdentity             = Identity{User: "berth-admin", Groups: []string{"system:masters"}}
	ControllerManagerIdentity = Identity{User: "system:kube-controller-manager"}
	SchedulerIdentity         = Identity{User: "system:kube-scheduler"}
	KWOKIdentity              = Identity{User: "berth-kwok", Groups: []string{"system:masters"}}
	BerthSchedulerIdentity    = Identity{User: "berth-scheduler"}
	KubeletClientIdentity     = Identity{User: "kube-apiserver-kubelet-client", Groups: []string{"system:masters"}}
)

// PKI holds the files of a cluster's certificate authority and the certificates signed by it.
type PKI struct {
	Dir    string
	CACert string
	CAKey  string
	// Serving certificate of kube-apiserver.
	ServingCert, ServingKey string
	// Service-account token signing key pair.
	SAKey, SAPub string

	caCert *x509.Certificate
	caKey  crypto.Signer
}

// NewPKI creates a CA, the apiserver's serving certificate (valid for the given IPs and DNS
// names plus loopback) and the service-account signing keys under dir.
func NewPKI(dir string, ips []net.IP, dnsNames []string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "berth-local-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	p.caCert, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p.caKey = caKey
	if p.CACert, p.CAKey, err = p.write("ca", der, caKey); err != nil {
		return nil, err
	}

	ips = append([]net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}, ips...)
	dnsNames = append([]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local"}, dnsNames...)
	if p.ServingCert, p.ServingKey, err = p.issue("apiserver", pkix.Name{CommonName: "kube-apiserver"},
		x509.ExtKeyUsageServerAuth, ips, dnsNames); err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}
	p.SAKey = filepath.Join(dir, "sa.key")
	p.SAPub = filepath.Join(dir, "sa.pub")
	if err := writePEM(p.SAKey, "PRIVATE KEY", keyDER); err != nil {
		return nil, err
	}
	if err := writePEM(p.SAPub, "PUBLIC KEY", pubDER); err != nil {
		return nil, err
	}
	return p, nil
}

// ClientCert issues (once) a client certificate for id and returns its cert and key paths.
func (p *PKI) ClientCert(id Identity) (certFile, keyFile string, err error) {
	name := "client-" + sanitize(id.User)
	certFile, keyFile = filepath.Join(p.Dir, name+".crt"), filepath.Join(p.Dir, name+".key")
	if _, err := os.Stat(certFile); err == nil {
		return certFile, keyFile, nil
	}
	return p.issue(name, pkix.Name{CommonName: id.User, Organization: id.Groups}, x509.ExtKeyUsageClientAuth, nil, nil)
}

// CAPool returns a pool holding the cluster CA.
func (p *PKI) CAPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	return pool
}

func (p *PKI) issue(name string, subject pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, dnsNames []string) (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
		DNSNames:     dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return "", "", fmt.Errorf("issuing %s certificate: %w", name, err)
	}
	return p.write(name, der, key)
}

func (p *PKI) write(name string, certDER []byte, key crypto.Signer) (string, string, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile := filepath.Join(p.Dir, name+".crt"), filepath.Join(p.Dir, name+".key")
	if err := writePEM(certFile, "CERTIFICATE", certDER); err != nil {
		return "", "", err
	}
	if err := writePEM(keyFile, "PRIVATE KEY", keyDER); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func sanitize(s string) string {
	out := []byte(s)
	for i, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			out[i] = '-'
		}
	}
	return string(out)
}
