package outbound

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

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
