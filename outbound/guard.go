package outbound

import (
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/usersync/usersync/models"
)

// MaxURLBytes bounds an endpoint's URL.
const MaxURLBytes = 2048

// refusedError is the guard's refusal of an address: the dialer's Control
// hook returns it before the socket connects.
type refusedError struct {
	addr netip.Addr
	why  string
}

func (e *refusedError) Error() string { return "refused: " + e.addr.String() + " is " + e.why }

// errNotAnAddress: the dialer was asked to connect to something that is
// not an ip:port (it never is: the transport dials resolved addresses).
var errNotAnAddress = errors.New("refused: not an IP address")

// reserved holds the IPv4 ranges, beyond what netip's predicates name,
// that an endpoint may not reach: none of them is a public host's.
var reserved = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("255.255.255.255/32"), "the broadcast address"},
	{netip.MustParsePrefix("0.0.0.0/8"), `a "this network" address`},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
}

// nat64 is the well-known NAT64 prefix (RFC 6052): its addresses reach the
// IPv4 address in their last 32 bits, which is judged instead.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// refusal says why an endpoint may not connect to a, or "" when it may.
// IPv4-mapped IPv6 addresses (::ffff:10.0.0.1) are judged as the IPv4
// address they are.
func refusal(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	switch {
	case !a.IsValid():
		return "not an address"
	case a.IsUnspecified():
		return "an unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		return "a private address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	}
	if a.Is4() {
		for _, r := range reserved {
			if r.prefix.Contains(a) {
				return r.why
			}
		}
		return ""
	}
	if nat64.Contains(a) {
		b := a.As16()
		return refusal(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	return ""
}

// control is the dialer's Control hook: it runs once the address to
// connect to is known and before the socket connects, so the address
// judged is the one dialled, whatever a name resolved to (DNS rebinding
// gains nothing).
func control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return errNotAnAddress
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return errNotAnAddress
	}
	if why := refusal(a); why != "" {
		return &refusedError{addr: a.WithZone(""), why: why}
	}
	return nil
}

// CheckURL checks an endpoint's URL: http or https, a host, no userinfo,
// no fragment, at most MaxURLBytes, a port (when given) in 1..65535. A
// host that is an IP address is judged as the sender judges the
// addresses it dials (unless allowPrivate); a name is judged at each
// delivery, on the addresses it resolves to then. The error wraps
// models.ErrInvalid and its message may be shown to the client.
func CheckURL(raw string, allowPrivate bool) error {
	bad := func(format string, args ...any) error {
		return models.Public(models.ErrInvalid, format, args...).In("url")
	}
	if raw == "" {
		return bad("url is required")
	}
	if len(raw) > MaxURLBytes {
		return bad("url is longer than %d bytes", MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("url is not a valid URL")
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return bad("url must start with https:// or http://")
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("url must name a host")
	}
	if u.User != nil {
		return bad("url must not carry a user name or password")
	}
	// A '#' can only be the fragment's mark (url.Parse refuses it
	// elsewhere); an empty fragment ("…/#") leaves u.Fragment empty.
	if strings.Contains(raw, "#") {
		return bad("url must not have a fragment (#...)")
	}
	host := u.Hostname()
	if host == "" {
		return bad("url must name a host")
	}
	if strings.HasSuffix(u.Host, ":") {
		return bad("url's port is empty")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad("url's port must be 1 to 65535")
		}
	}
	if allowPrivate {
		return nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return bad("url's host is this machine; endpoints on loopback or private addresses are refused unless USERSYNC_ENDPOINTS_ALLOW_PRIVATE is set")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if why := refusal(a); why != "" {
			return bad("url's host %s is %s; endpoints on such addresses are refused unless USERSYNC_ENDPOINTS_ALLOW_PRIVATE is set", a.WithZone("").String(), why)
		}
	}
	return nil
}
