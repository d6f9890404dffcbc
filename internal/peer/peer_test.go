package peer

import (
	"net/netip"
	"testing"
)

func TestOf_TheTCPPeerUnlessItIsATrustedProxy(t *testing.T) {
	proxies, err := ParseProxies("10.0.0.0/8, 192.168.1.7 fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		remote    string
		forwarded []string
		want      string
	}{
		{"203.0.113.9:4000", []string{"198.51.100.1"}, "203.0.113.9"},                  // not a proxy: its header is the client's word
		{"10.1.2.3:4000", []string{"198.51.100.1"}, "198.51.100.1"},                    // a proxy: the address it forwarded
		{"10.1.2.3:4000", []string{"6.6.6.6, 198.51.100.1, 10.9.9.9"}, "198.51.100.1"}, // the nearest untrusted one, not the client's own claim
		{"10.1.2.3:4000", []string{"6.6.6.6", "198.51.100.1"}, "198.51.100.1"},         // several header lines: the last is the nearest
		{"10.1.2.3:4000", nil, "10.1.2.3"},                                             // a proxy forwarding nothing
		{"10.1.2.3:4000", []string{"garbage"}, "10.1.2.3"},
		{"192.168.1.7:80", []string{"[2001:db8:1:2:3::4]"}, "192.168.1.7"}, // not an address: the proxy
		{"192.168.1.7:80", []string{"2001:db8:1:2:3::4"}, "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:3::4]:80", nil, "2001:db8:1:2::/64"},
		{"[::ffff:10.1.2.3]:80", []string{"198.51.100.1"}, "198.51.100.1"},
	} {
		if got := proxies.Of(c.remote, c.forwarded); got != c.want {
			t.Errorf("Of(%q, %q) = %q, want %q", c.remote, c.forwarded, got, c.want)
		}
	}
	if got := Proxies(nil).Of("10.1.2.3:4000", []string{"198.51.100.1"}); got != "10.1.2.3" {
		t.Errorf("with no trusted proxy, Of = %q, want the TCP peer", got)
	}
}

func TestParseProxies_RefusesWhatIsNotAnAddress(t *testing.T) {
	for _, s := range []string{"10.0.0.0/33", "proxy.local", "10.0.0.1:80", "fe80::1%eth0"} {
		if _, err := ParseProxies(s); err == nil {
			t.Errorf("ParseProxies(%q) accepted it", s)
		}
	}
	p, err := ParseProxies("")
	if err != nil || len(p) != 0 {
		t.Errorf("ParseProxies(\"\") = %v, %v; want none", p, err)
	}
	if p, _ := ParseProxies("10.0.0.5"); !p.Trusted(netip.MustParseAddr("10.0.0.5")) || p.Trusted(netip.MustParseAddr("10.0.0.6")) {
		t.Error("one address trusts more or less than itself")
	}
}
