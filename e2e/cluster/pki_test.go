package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
)

func TestPKIIssuesVerifiableCertificates(t *testing.T) {
	p, err := NewPKI(t.TempDir(), []net.IP{net.ParseIP("10.96.0.1")}, []string{"extra.local"})
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.LoadX509KeyPair(p.ServingCert, p.ServingKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(serving.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "10.96.0.1", "localhost", "kubernetes.default.svc", "extra.local"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: p.CAPool()}); err != nil {
			t.Errorf("serving certificate not valid for %s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "10.0.0.9", Roots: p.CAPool()}); err == nil {
		t.Errorf("serving certificate valid for an address it was not issued for")
	}

	tests := []struct {
		id         Identity
		wantGroups []string
	}{
		{AdminIdentity, []string{"system:masters"}},
		{BerthSchedulerIdentity, nil},
	}
	for _, tc := range tests {
		certFile, keyFile, err := p.ClientCert(tc.id)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(pair.Certificate[0])
		if c.Subject.CommonName != tc.id.User {
			t.Errorf("CN = %q, want %q", c.Subject.CommonName, tc.id.User)
		}
		if len(c.Subject.Organization) != len(tc.wantGroups) {
			t.Errorf("%s: groups = %v, want %v", tc.id.User, c.Subject.Organization, tc.wantGroups)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: p.CAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: client certificate does not verify: %v", tc.id.User, err)
		}
	}
	info, err := os.Stat(p.SAKey)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		t.Errorf("service-account key is readable by others: %v", info.Mode())
	}
}
