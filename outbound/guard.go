package outbound

import (
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

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

// reservedRange is a range of addresses an endpoint may not reach, and
// why.
type reservedRange struct {
	prefix netip.Prefix
	why    string
}

// reserved holds the IPv4 ranges, beyond what netip's predicates name,
// that an endpoint may not reach: none of them is a public host's.
var reserved = []reservedRange{
	{netip.MustParsePrefix("255.255.255.255/32"), "the broadcast address"},
	{netip.MustParsePrefix("0.0.0.0/8"), `a "this network" address`},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	// Azure's WireServer answers every virtual machine on this public
	// address and hands out its configuration, certificates among it.
	{netip.MustParsePrefix("168.63.129.16/32"), "Azure's WireServer address"},
}

// reserved6 holds the IPv6 ranges, beyond what netip's predicates name,
// that an endpoint may not reach.
var reserved6 = []reservedRange{
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address"},
	{netip.MustParsePrefix("2001:2::/48"), "a benchmarking address"},
	// Teredo (RFC 4380) carries its client's IPv4 address obfuscated,
	// and a relay, not the sender, reaches that client: refused whatever
	// it carries.
	{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
	// 6to4 (RFC 3056, deprecated by RFC 7526) carries an IPv4 address in
	// its bits 16 to 48, reached through a relay the sender cannot vouch
	// for. It is refused whatever it carries rather than judged: an
	// endpoint on a public IPv4 address is reached by that address.
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	// Local-use NAT64 (RFC 8215) belongs to one network, whose operator
	// chooses where in the address the IPv4 address sits (RFC 6052):
	// refused, as it cannot be judged.
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
}

// embedding holds the IPv6 prefixes whose addresses reach the IPv4
// address in their last 32 bits, which is judged instead: IPv4-compatible
// (::/96, RFC 4291), SIIT's IPv4-translated (::ffff:0:0:0/96, RFC 2765)
// and the well-known NAT64 prefix (64:ff9b::/96, RFC 6052). IPv4-mapped
// addresses (::ffff:0:0/96) are unmapped before.
var embedding = []netip.Prefix{
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("::ffff:0:0:0/96"),
	netip.MustParsePrefix("64:ff9b::/96"),
}

// refusal says why an endpoint may not connect to a, or "" when it may.
// IPv4-mapped IPv6 addresses (::ffff:10.0.0.1), and the IPv6 forms that
// reach an IPv4 address (see embedding), are judged as the IPv4 address
// they carry. An address of this machine's own interfaces is refused too.
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
	ranges := reserved
	if a.Is6() {
		for _, p := range embedding {
			if p.Contains(a) {
				b := a.As16()
				return refusal(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
			}
		}
		ranges = reserved6
	}
	for _, r := range ranges {
		if r.prefix.Contains(a) {
			return r.why
		}
	}
	if ownAddr(a) {
		return "an address of this machine"
	}
	return ""
}

// interfaceAddrs lists this machine's interface addresses; tests replace
// it, under own's lock. own keeps what it last gave, read again at most
// every ownTTL.
var (
	interfaceAddrs = net.InterfaceAddrs
	own            struct {
		sync.Mutex
		addrs map[netip.Addr]bool
		read  time.Time
	}
)

const (
	// ownTTL is how long the machine's addresses are kept before they are
	// read again.
	ownTTL = time.Minute
	// maxOwnAddrs bounds how many of them are kept.
	maxOwnAddrs = 1024
)

// ownAddr says whether a is one of this machine's interface addresses:
// where usersync itself, and whatever runs beside it, listens. When they
// cannot be read, those read before are kept.
func ownAddr(a netip.Addr) bool {
	own.Lock()
	defer own.Unlock()
	if own.read.IsZero() || time.Since(own.read) >= ownTTL {
		own.read = time.Now()
		if list, err := interfaceAddrs(); err == nil {
			own.addrs = make(map[netip.Addr]bool, min(len(list), maxOwnAddrs))
			for _, n := range list {
				if len(own.addrs) == maxOwnAddrs {
					break
				}
				if ip := ipOf(n); ip.IsValid() {
					own.addrs[ip] = true
				}
			}
		}
	}
	return own.addrs[a]
}

// ipOf is the address of one of net.InterfaceAddrs's answers, unmapped
// and without a zone; the zero Addr when it holds none.
func ipOf(n net.Addr) netip.Addr {
	var ip net.IP
	switch n := n.(type) {
	case *net.IPNet:
		ip = n.IP
	case *net.IPAddr:
		ip = n.IP
	}
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
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

// plainControl is the Control hook of the dialer of plain http requests
// to an endpoint whose URL was set since usersync judges plain http (see
// CheckPlainHTTP): a public address is refused, since the message would
// cross networks unencrypted; a non-public one is judged as control judges
// it, unless allowPrivate lets it through (it is not public).
func plainControl(allowPrivate bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return errNotAnAddress
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			return errNotAnAddress
		}
		if refusal(a) == "" {
			return &refusedError{addr: a.WithZone(""), why: "a public address, over plain http (use https, or set " + allowHTTPVar + ")"}
		}
		if allowPrivate {
			return nil
		}
		return control(network, address, c)
	}
}

// allowHTTPVar is the setting that lets endpoints use plain http on
// public addresses.
const allowHTTPVar = "USERSYNC_ENDPOINTS_ALLOW_HTTP"

// CheckPlainHTTP refuses an http:// URL whose host is a public address: its
// messages, users' emails and plans in them, would cross networks
// unencrypted. A host that is a name is judged on each address it is
// dialled at (Target.PlainHTTP); a non-public address is not public (only
// USERSYNC_ENDPOINTS_ALLOW_PRIVATE lets it through, which CheckURL
// judges). Call it on a URL CheckURL accepted, unless the operator allows
// plain http (USERSYNC_ENDPOINTS_ALLOW_HTTP). The error wraps
// models.ErrInvalid and its message may be shown to the client.
func CheckPlainHTTP(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !strings.EqualFold(u.Scheme, "http") {
		return nil
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil && refusal(a) == "" {
		return models.Public(models.ErrInvalid, "url's host %s is a public address, and the url is plain http://: messages would cross networks unencrypted; use https://, or set %s",
			a.WithZone("").String(), allowHTTPVar).In("url")
	}
	return nil
}

// PlainHTTP reports whether raw is an http:// URL that may reach a public
// address: its host is a name, or a public address. Such an endpoint is
// the one a warning names when it keeps plain http (models.Endpoint.LegacyURL,
// or the endpoints file).
func PlainHTTP(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || !strings.EqualFold(u.Scheme, "http") {
		return false
	}
	a, err := netip.ParseAddr(u.Hostname())
	return err != nil || refusal(a) == ""
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
