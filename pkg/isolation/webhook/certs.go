package webhook

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Keys of the serving Secret. tls.crt/tls.key are what cert-manager writes too, so the
// external mode reads the same keys.
const (
	KeyCert     = "tls.crt"
	KeyKey      = "tls.key"
	KeyCACert   = "ca.crt"
	KeyCAKey    = "ca.key"
	KeyCABundle = "ca-bundle.crt"
)

// backdate lets a certificate be valid on an API server whose clock is a little behind.
const backdate = 5 * time.Minute

// CertOptions say what certificates the operator issues.
type CertOptions struct {
	// Hosts are the serving certificate's DNS names and IP addresses (the Service's
	// <name>.<namespace>.svc, or 127.0.0.1 for a URL webhook).
	Hosts []string
	// CAValidity and CertValidity are the lifetimes; each is renewed when less than a third
	// of it is left (the serving certificate also when its CA would expire first).
	CAValidity, CertValidity time.Duration
}

// Material is the parsed content of the serving Secret.
type Material struct {
	CA     *x509.Certificate
	CAKey  *ecdsa.PrivateKey
	Leaf   tls.Certificate
	Bundle []*x509.Certificate
}

// Ensure returns the Secret data to store for now: data itself when its certificates are
// good, else new ones, and why they changed (empty when unchanged). A CA being renewed stays
// in the bundle until it expires, so the API server trusts both while serving certificates
// switch; the caller injects the bundle into the webhook configuration before storing data.
func Ensure(data map[string][]byte, o CertOptions, now time.Time) (map[string][]byte, []string, error) {
	var why []string
	ca, caKey, err := parseCA(data)
	var oldCA *x509.Certificate
	switch {
	case err != nil:
		why = append(why, "no usable CA ("+err.Error()+")")
	case !now.Before(ca.NotAfter):
		why = append(why, fmt.Sprintf("CA expired at %s", ca.NotAfter.UTC().Format(time.RFC3339)))
	case renewDue(ca, now):
		why = append(why, fmt.Sprintf("CA expires at %s (less than a third of its lifetime left)", ca.NotAfter.UTC().Format(time.RFC3339)))
		oldCA = ca
	}
	out := map[string][]byte{}
	if len(why) > 0 {
		if ca, caKey, err = newCA(o.CAValidity, now); err != nil {
			return nil, nil, err
		}
		out[KeyCACert], out[KeyCAKey] = encodeCert(ca), encodeKey(caKey)
	} else {
		out[KeyCACert], out[KeyCAKey] = data[KeyCACert], data[KeyCAKey]
	}

	// The bundle: the signing CA, plus earlier CAs still valid (renewed ones).
	bundle := []*x509.Certificate{ca}
	if oldCA != nil {
		bundle = append(bundle, oldCA)
	}
	for _, c := range parseCerts(data[KeyCABundle]) {
		if now.Before(c.NotAfter) && !slices.ContainsFunc(bundle, func(b *x509.Certificate) bool { return b.Equal(c) }) {
			bundle = append(bundle, c)
		}
	}
	var bb bytes.Buffer
	for _, c := range bundle {
		bb.Write(encodeCert(c))
	}
	out[KeyCABundle] = bb.Bytes()
	if !bytes.Equal(out[KeyCABundle], data[KeyCABundle]) && len(why) == 0 {
		why = append(why, "CA bundle updated (expired CA dropped or bundle missing)")
	}

	leafWhy := leafProblem(data, ca, o, now)
	if leafWhy == "" {
		out[KeyCert], out[KeyKey] = data[KeyCert], data[KeyKey]
		if len(why) == 0 {
			return data, nil, nil
		}
		return out, why, nil
	}
	why = append(why, leafWhy)
	cert, key, err := newLeaf(ca, caKey, o, now)
	if err != nil {
		return nil, nil, err
	}
	out[KeyCert], out[KeyKey] = cert, key
	return out, why, nil
}

// renewDue: less than a third of the lifetime the operator gave c is left. NotBefore is
// backdated at issuance, which is not lifetime.
func renewDue(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore.Add(backdate))
	return c.NotAfter.Sub(now) < life/3
}

// leafProblem says why the serving certificate must be reissued ("" if it is fine).
func leafProblem(data map[string][]byte, ca *x509.Certificate, o CertOptions, now time.Time) string {
	pair, err := tls.X509KeyPair(data[KeyCert], data[KeyKey])
	if err != nil {
		if len(data[KeyCert]) == 0 {
			return "no serving certificate"
		}
		return "unusable serving certificate (" + err.Error() + ")"
	}
	leaf := pair.Leaf
	switch {
	case !now.Before(leaf.NotAfter):
		return fmt.Sprintf("serving certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	case renewDue(leaf, now):
		return fmt.Sprintf("serving certificate expires at %s (less than a third of its lifetime left)", leaf.NotAfter.UTC().Format(time.RFC3339))
	case leaf.CheckSignatureFrom(ca) != nil:
		return "serving certificate not signed by the current CA"
	}
	for _, h := range o.Hosts {
		if leaf.VerifyHostname(h) != nil {
			return "serving certificate does not name " + h
		}
	}
	return ""
}

// Load parses a Secret's data for serving: the key pair and the CA bundle.
func Load(data map[string][]byte, now time.Time) (*Material, error) {
	pair, err := tls.X509KeyPair(data[KeyCert], data[KeyKey])
	if err != nil {
		return nil, fmt.Errorf("serving key pair (%s, %s): %w", KeyCert, KeyKey, err)
	}
	if !now.Before(pair.Leaf.NotAfter) {
		return nil, fmt.Errorf("serving certificate expired at %s", pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(pair.Leaf.NotBefore) {
		return nil, fmt.Errorf("serving certificate not valid before %s", pair.Leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	m := &Material{Leaf: pair, Bundle: parseCerts(data[KeyCABundle])}
	if len(m.Bundle) == 0 {
		m.Bundle = parseCerts(data[KeyCACert])
	}
	return m, nil
}

func parseCA(data map[string][]byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certs := parseCerts(data[KeyCACert])
	if len(certs) != 1 {
		return nil, nil, errors.New(KeyCACert + " must hold one certificate")
	}
	b, _ := pem.Decode(data[KeyCAKey])
	if b == nil {
		return nil, nil, errors.New(KeyCAKey + " is not PEM")
	}
	key, err := x509.ParseECPrivateKey(b.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", KeyCAKey, err)
	}
	if !certs[0].IsCA || !key.PublicKey.Equal(certs[0].PublicKey) {
		return nil, nil, errors.New(KeyCACert + " is not a CA for " + KeyCAKey)
	}
	return certs[0], key, nil
}

func parseCerts(p []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, p = pem.Decode(p)
		if b == nil {
			return out
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// newKey is a fresh P-256 key and a random serial number for its certificate.
func newKey() (*ecdsa.PrivateKey, *big.Int, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return key, sn, err
}

func newCA(validity time.Duration, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, sn, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("berth-isolation-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	return c, key, err
}

func newLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, o CertOptions, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, sn, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(o.CertValidity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: "berth-isolation-webhook"},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if len(o.Hosts) > 0 {
		tmpl.Subject.CommonName = o.Hosts[0]
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), encodeKey(key), nil
}

func encodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func encodeKey(k *ecdsa.PrivateKey) []byte {
	der, _ := x509.MarshalECPrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}
