package outbound

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

func TestRefusal_EveryNonPublicAddressIsRefused(t *testing.T) {
	refused := map[string]string{
		"127.0.0.1":                   "a loopback address",
		"127.255.255.254":             "a loopback address",
		"::1":                         "a loopback address",
		"10.0.0.1":                    "a private address",
		"172.16.0.1":                  "a private address",
		"172.31.255.255":              "a private address",
		"192.168.1.1":                 "a private address",
		"fc00::1":                     "a private address",
		"fd12:3456::1":                "a private address",
		"169.254.169.254":             "a link-local address",
		"fe80::1":                     "a link-local address",
		"fe80::1%eth0":                "a link-local address",
		"0.0.0.0":                     "an unspecified address",
		"::":                          "an unspecified address",
		"224.0.0.1":                   "a multicast address",
		"239.255.255.250":             "a multicast address",
		"ff02::1":                     "a multicast address",
		"ff05::2":                     "a multicast address",
		"100.64.0.1":                  "a shared (carrier-grade NAT) address",
		"100.127.255.255":             "a shared (carrier-grade NAT) address",
		"0.1.2.3":                     `a "this network" address`,
		"192.0.0.8":                   "an IETF protocol assignment address",
		"198.18.0.1":                  "a benchmarking address",
		"198.19.255.255":              "a benchmarking address",
		"240.0.0.1":                   "a reserved address",
		"255.255.255.255":             "the broadcast address",
		"::ffff:127.0.0.1":            "a loopback address",
		"::ffff:10.0.0.1":             "a private address",
		"::ffff:169.254.169.254":      "a link-local address",
		"::ffff:100.64.0.1":           "a shared (carrier-grade NAT) address",
		"::ffff:0.0.0.0":              "an unspecified address",
		"64:ff9b::a9fe:a9fe":          "a link-local address", // NAT64 of 169.254.169.254
		"64:ff9b::7f00:1":             "a loopback address",
		"::ffff:255.255.255.255":      "the broadcast address",
		"::ffff:198.18.0.1":           "a benchmarking address",
		"::ffff:240.0.0.1":            "a reserved address",
		"::ffff:192.0.0.1":            "an IETF protocol assignment address",
		"::ffff:224.0.0.1":            "a multicast address",
		"::ffff:192.168.0.1":          "a private address",
		"::ffff:172.20.0.1":           "a private address",
		"::ffff:0.0.0.1":              `a "this network" address`,
		"fe80::ffff:a9fe:a9fe":        "a link-local address",
		"febf:ffff:ffff:ffff:ffff::1": "a link-local address",
		"fdff:ffff:ffff:ffff:ffff::1": "a private address",
		"ff0e::1":                     "a multicast address",
	}
	for s, want := range refused {
		if got := refusal(netip.MustParseAddr(s)); got != want {
			t.Errorf("%s: %q, want %q", s, got, want)
		}
	}
	public := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "172.15.255.255", "172.32.0.1", "100.63.255.255", "100.128.0.1",
		"198.17.255.255", "198.20.0.1", "192.0.1.1", "192.169.0.1", "223.255.255.255", "169.253.255.255",
		"2606:4700:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808",
	}
	for _, s := range public {
		if got := refusal(netip.MustParseAddr(s)); got != "" {
			t.Errorf("%s is refused as %q", s, got)
		}
	}
}

func TestControl_JudgesTheAddressBeingConnected(t *testing.T) {
	cases := map[string]string{
		"10.0.0.1:443":            "refused: 10.0.0.1 is a private address",
		"[::ffff:127.0.0.1]:80":   "refused: ::ffff:127.0.0.1 is a loopback address",
		"[fe80::1%eth0]:80":       "refused: fe80::1 is a link-local address",
		"169.254.169.254:80":      "refused: 169.254.169.254 is a link-local address",
		"[2001::1]:443":           "refused: 2001::1 is a Teredo address",
		"[::ffff:0:a00:1]:443":    "refused: ::ffff:0:a00:1 is a private address",
		"not-an-address":          "refused: not an IP address",
		"hooks.example.com:443":   "refused: not an IP address",
		"93.184.216.34:443":       "",
		"[2606:4700:4700::1]:443": "",
	}
	for addr, want := range cases {
		err := control("tcp", addr, nil)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
	}
}

func TestCheckURL_AcceptsOnlyAnHTTPEndpoint(t *testing.T) {
	ok := []string{
		"https://hooks.example.com/usersync",
		"http://hooks.example.com:8080/in?tenant=1",
		"HTTPS://Hooks.Example.com",
		"https://93.184.216.34/in",
		"https://[2606:4700:4700::1111]:8443/in",
		"https://hooks.example.com:65535/",
		"https://hooks.example.com:1/",
		"https://" + strings.Repeat("a", MaxURLBytes-len("https://")),
	}
	for _, u := range ok {
		if err := CheckURL(u, false); err != nil {
			t.Errorf("%.80s: %v", u, err)
		}
	}
	bad := map[string]string{
		"": "required",
		"https://" + strings.Repeat("a", MaxURLBytes-len("https://")+1): "longer than 2048",
		"ftp://hooks.example.com/":                                      "https:// or http://",
		"hooks.example.com/in":                                          "https:// or http://",
		"//hooks.example.com/in":                                        "https:// or http://",
		"javascript:alert(1)":                                           "https:// or http://",
		"https:hooks.example.com":                                       "host",
		"https://":                                                      "host",
		"https:///in":                                                   "host",
		"https://:443/in":                                               "host",
		"https://user:pw@hooks.example.com/":                            "user name or password",
		"https://user@hooks.example.com/":                               "user name or password",
		"https://hooks.example.com/#frag":                               "fragment",
		"https://hooks.example.com/#":                                   "fragment",
		"https://hooks.example.com:0/":                                  "port",
		"https://hooks.example.com:65536/":                              "port",
		"https://hooks.example.com:99999999999999/":                     "port",
		"https://hooks.example.com:/":                                   "port",
		"https://hooks.example.com:x/":                                  "not a valid URL",
		"https://hooks example.com/":                                    "not a valid URL",
		"https://hooks.example.com/\n":                                  "not a valid URL",
		"http://10.0.0.1/":                                              "10.0.0.1 is a private address",
		"http://127.0.0.1:8080/":                                        "127.0.0.1 is a loopback address",
		"http://169.254.169.254/latest/meta-data/":                      "169.254.169.254 is a link-local address",
		"http://[::1]/":                                                 "::1 is a loopback address",
		"http://[::ffff:127.0.0.1]/":                                    "loopback",
		"http://[::ffff:a9fe:a9fe]/":                                    "link-local",
		"http://[fe80::1%25eth0]/":                                      "fe80::1 is a link-local address",
		"http://0.0.0.0/":                                               "unspecified",
		"http://100.64.1.1/":                                            "carrier-grade NAT",
		"http://[::ffff:0:7f00:1]/":                                     "loopback",
		"http://[::a9fe:a9fe]/":                                         "link-local",
		"http://[2002:a9fe:a9fe::1]/":                                   "6to4",
		"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/":                "Teredo",
		"http://[fd00:ec2::254]/latest/meta-data/":                      "fd00:ec2::254 is a private address",
		"http://168.63.129.16/machine?comp=goalstate":                   "Azure's WireServer",
		"http://[fec0::1]/":                                             "site-local",
		"http://localhost:3000/":                                        "this machine",
		"http://LOCALHOST./":                                            "this machine",
		"http://app.localhost/":                                         "this machine",
	}
	for u, want := range bad {
		err := CheckURL(u, false)
		var pe *models.PublicError
		if !errors.Is(err, models.ErrInvalid) || !errors.As(err, &pe) || pe.Field != "url" {
			t.Errorf("%.80q: %v, want an invalid url", u, err)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%.80q: %q, want it to say %q", u, err, want)
		}
	}
}

func TestCheckURL_AllowPrivateAcceptsPrivateHosts(t *testing.T) {
	for _, u := range []string{"http://10.0.0.1/", "http://127.0.0.1:8080/in", "http://[::1]/", "http://localhost:3000/", "http://169.254.169.254/"} {
		if err := CheckURL(u, true); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	if err := CheckURL("ftp://10.0.0.1/", true); err == nil {
		t.Error("allowPrivate accepts another scheme")
	}
}

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://hooks.example.com/in", "http://10.0.0.1/", "http://[::ffff:127.0.0.1]:80/", "https://u:p@h/",
		"http://h:0/", "https://h/#f", "http://[fe80::1%25eth0]/", "http://localhost./", "http://[64:ff9b::a00:1]/", "%", "http://[",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		strict := CheckURL(raw, false)
		loose := CheckURL(raw, true)
		for _, err := range []error{strict, loose} {
			if err != nil && !errors.Is(err, models.ErrInvalid) {
				t.Fatalf("%q: %v does not wrap ErrInvalid", raw, err)
			}
		}
		if strict == nil && loose != nil {
			t.Fatalf("%q passes without private hosts but not with them: %v", raw, loose)
		}
		if loose == nil && len(raw) > MaxURLBytes {
			t.Fatalf("a URL of %d bytes passes", len(raw))
		}
	})
}

// TestRefusal_AnIPv4AddressInsideAnIPv6OneIsStillRefused covers the IPv6
// forms that carry or reach an IPv4 address, the reserved IPv6 ranges and
// the cloud platforms' own addresses.
func TestRefusal_AnIPv4AddressInsideAnIPv6OneIsStillRefused(t *testing.T) {
	refused := []struct{ addr, why string }{
		// IPv4-compatible (::/96): the IPv4 address is judged.
		{"::127.0.0.1", "loopback"},
		{"::10.0.0.1", "private"},
		{"::169.254.169.254", "link-local"},
		{"::100.64.0.1", "carrier-grade NAT"},
		{"::0.0.0.2", "this network"},
		{"::", "unspecified"},
		{"::1", "loopback"},
		// SIIT (::ffff:0:0:0/96): the IPv4 address is judged.
		{"::ffff:0:127.0.0.1", "loopback"},
		{"::ffff:0:10.1.2.3", "private"},
		{"::ffff:0:169.254.169.254", "link-local"},
		{"::ffff:0:0.0.0.0", "unspecified"},
		{"::ffff:0:0.0.0.1", "this network"},
		// 6to4 (2002::/16): refused whatever the IPv4 address.
		{"2002:7f00:1::1", "6to4"},
		{"2002:a00:1::", "6to4"},
		{"2002:a9fe:a9fe::1", "6to4"},
		{"2002:808:808::1", "6to4"},
		// Teredo (2001::/32): refused outright.
		{"2001::1", "Teredo"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", "Teredo"},
		// NAT64: the well-known prefix is judged, the local-use one refused.
		{"64:ff9b::10.0.0.1", "private"},
		{"64:ff9b::100.64.0.1", "carrier-grade NAT"},
		{"64:ff9b::192.0.2.1", "documentation"},
		{"64:ff9b:1::808:808", "local-use NAT64"},
		{"64:ff9b:1::a00:1", "local-use NAT64"},
		{"64:ff9b:1:ffff::1", "local-use NAT64"},
		// Site-local (fec0::/10).
		{"fec0::1", "site-local"},
		{"feff:ffff::1", "site-local"},
		// Discard-only (100::/64).
		{"100::", "discard-only"},
		{"100::ffff:ffff:ffff:ffff", "discard-only"},
		// Unique local (fc00::/7), AWS's IPv6 metadata among them.
		{"fc00::1", "private"},
		{"fdff::1", "private"},
		{"fd00:ec2::254", "private"},
		// Documentation.
		{"2001:db8::1", "documentation"},
		{"2001:db8:ffff::1", "documentation"},
		{"3fff::1", "documentation"},
		{"192.0.2.1", "documentation"},
		{"198.51.100.200", "documentation"},
		{"203.0.113.9", "documentation"},
		{"::ffff:203.0.113.9", "documentation"},
		// Benchmarking (2001:2::/48), as 198.18.0.0/15 is.
		{"2001:2::1", "benchmarking"},
		// Cloud platforms' own addresses.
		{"169.254.169.254", "link-local"},
		{"::ffff:169.254.169.254", "link-local"},
		{"168.63.129.16", "WireServer"},
		{"::ffff:168.63.129.16", "WireServer"},
		{"64:ff9b::168.63.129.16", "WireServer"},
	}
	for _, c := range refused {
		got := refusal(netip.MustParseAddr(c.addr))
		if !strings.Contains(got, c.why) {
			t.Errorf("%s: %q, want it to say %q", c.addr, got, c.why)
		}
	}
	public := []string{
		"1.1.1.1", "8.8.8.8", "168.63.129.17", "203.0.114.1", "198.51.101.1",
		"2606:4700::1111", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e",
		"::8.8.8.8", "::ffff:0:8.8.8.8", "64:ff9b::1.1.1.1",
		"2001:1::1", "2001:db9::1", "2003::1", "101::1", "fbff::1", "64:ff9b:2::1",
	}
	for _, s := range public {
		if got := refusal(netip.MustParseAddr(s)); got != "" {
			t.Errorf("%s is refused as %q", s, got)
		}
	}
}

// useInterfaceAddrs makes f the machine's interface addresses for t, and
// forgets those read before.
func useInterfaceAddrs(t *testing.T, f func() ([]net.Addr, error)) {
	t.Helper()
	own.Lock()
	saved := interfaceAddrs
	interfaceAddrs, own.addrs, own.read = f, nil, time.Time{}
	own.Unlock()
	t.Cleanup(func() {
		own.Lock()
		interfaceAddrs, own.addrs, own.read = saved, nil, time.Time{}
		own.Unlock()
	})
}

func TestRefusal_AnAddressOfThisMachineIsRefused(t *testing.T) {
	useInterfaceAddrs(t, func() ([]net.Addr, error) {
		return []net.Addr{
			&net.IPNet{IP: net.ParseIP("93.184.216.99"), Mask: net.CIDRMask(24, 32)},
			&net.IPNet{IP: net.ParseIP("2606:4700::99"), Mask: net.CIDRMask(64, 128)},
			&net.IPAddr{IP: net.ParseIP("8.8.4.4")},
			&net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)},
		}, nil
	})
	for _, s := range []string{"93.184.216.99", "::ffff:93.184.216.99", "64:ff9b::93.184.216.99", "2606:4700::99", "8.8.4.4"} {
		if got := refusal(netip.MustParseAddr(s)); got != "an address of this machine" {
			t.Errorf("%s: %q, want an address of this machine", s, got)
		}
	}
	// Only the address itself, not its network.
	for _, s := range []string{"93.184.216.98", "2606:4700::98", "8.8.8.8"} {
		if got := refusal(netip.MustParseAddr(s)); got != "" {
			t.Errorf("%s is refused as %q", s, got)
		}
	}
	if got := refusal(netip.MustParseAddr("127.0.0.1")); got != "a loopback address" {
		t.Errorf("127.0.0.1: %q, want a loopback address", got)
	}
	err := control("tcp", "93.184.216.99:443", nil)
	if err == nil || err.Error() != "refused: 93.184.216.99 is an address of this machine" {
		t.Errorf("control: %v", err)
	}
	if err := CheckURL("https://[2606:4700::99]:8443/in", false); err == nil || !strings.Contains(err.Error(), "this machine") {
		t.Errorf("CheckURL: %v", err)
	}
	if err := CheckURL("https://[2606:4700::99]:8443/in", true); err != nil {
		t.Errorf("CheckURL with private addresses allowed: %v", err)
	}
}

func TestRefusal_TheMachineAddressesAreReadAtMostOnceAMinute(t *testing.T) {
	reads := 0
	list := []net.Addr{&net.IPAddr{IP: net.ParseIP("93.184.216.99")}}
	var fail error
	useInterfaceAddrs(t, func() ([]net.Addr, error) {
		reads++
		return list, fail
	})
	for range 100 {
		refusal(netip.MustParseAddr("8.8.8.8"))
	}
	if reads != 1 {
		t.Fatalf("%d reads, want 1", reads)
	}

	// A minute on, they are read again.
	list = []net.Addr{&net.IPAddr{IP: net.ParseIP("93.184.216.100")}}
	own.Lock()
	own.read = own.read.Add(-ownTTL)
	own.Unlock()
	if refusal(netip.MustParseAddr("93.184.216.99")) != "" || refusal(netip.MustParseAddr("93.184.216.100")) == "" || reads != 2 {
		t.Errorf("after a minute: %d reads, or the new addresses are not the ones judged", reads)
	}

	// When they cannot be read, those read before are kept.
	list, fail = nil, errors.New("no netlink")
	own.Lock()
	own.read = own.read.Add(-ownTTL)
	own.Unlock()
	if refusal(netip.MustParseAddr("93.184.216.100")) == "" || reads != 3 {
		t.Errorf("a failed read: %d reads, or the addresses read before are forgotten", reads)
	}

	// However many there are, at most maxOwnAddrs are kept.
	list, fail = nil, nil
	for i := range maxOwnAddrs + 10 {
		list = append(list, &net.IPAddr{IP: net.IPv4(93, 184, byte(i>>8), byte(i))})
	}
	own.Lock()
	own.read = own.read.Add(-ownTTL)
	own.Unlock()
	refusal(netip.MustParseAddr("8.8.8.8"))
	own.Lock()
	n := len(own.addrs)
	own.Unlock()
	if n != maxOwnAddrs {
		t.Errorf("%d addresses kept, want %d", n, maxOwnAddrs)
	}
}

// TestCheckPlainHTTP_RefusesAPublicAddressOverPlainHTTPOnly: a public IP
// on http:// is refused, naming the setting that allows it; https, a
// non-public address and a name (judged where it is dialled) are not.
func TestCheckPlainHTTP_RefusesAPublicAddressOverPlainHTTPOnly(t *testing.T) {
	for raw, refused := range map[string]bool{
		"http://93.184.216.34/hooks":       true,
		"HTTP://93.184.216.34:8080/":       true,
		"http://[2606:2800:220:1::1]/":     true,
		"https://93.184.216.34/hooks":      false,
		"http://10.0.0.1/hooks":            false,
		"http://127.0.0.1:9000/hooks":      false,
		"http://hooks.example.com/":        false,
		"https://hooks.example.com/hooks/": false,
	} {
		err := CheckPlainHTTP(raw)
		if (err != nil) != refused {
			t.Errorf("CheckPlainHTTP(%q) = %v, want refused %v", raw, err, refused)
		}
		if err != nil && (!errors.Is(err, models.ErrInvalid) || !strings.Contains(err.Error(), "USERSYNC_ENDPOINTS_ALLOW_HTTP")) {
			t.Errorf("CheckPlainHTTP(%q) = %v, want invalid, naming the setting", raw, err)
		}
	}
}

// TestPlainHTTP_IsAnHTTPURLThatMayReachAPublicAddress: what a warning
// names when an endpoint keeps plain http.
func TestPlainHTTP_IsAnHTTPURLThatMayReachAPublicAddress(t *testing.T) {
	for raw, want := range map[string]bool{
		"http://hooks.example.com/":   true,
		"http://93.184.216.34/":       true,
		"http://127.0.0.1:9000/hooks": false,
		"http://10.1.2.3/":            false,
		"https://hooks.example.com/":  false,
	} {
		if got := PlainHTTP(raw); got != want {
			t.Errorf("PlainHTTP(%q) = %v, want %v", raw, got, want)
		}
	}
}
