// Package peer names the client that usersync counts connections and
// webhook bodies under: the TCP peer's address (an IPv6 address by its
// /64, the block one subscriber usually gets), or, behind a trusted
// reverse proxy, the address the proxy forwarded.
package peer

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Proxies are the addresses of trusted reverse proxies: their connections
// are not counted as one client's, and the requests they pass on are
// counted under the address they name in X-Forwarded-For.
type Proxies []netip.Prefix

// maxProxies bounds the entries of a list of proxies.
const maxProxies = 64

// ParseProxies reads addresses and CIDR prefixes (10.0.0.5, 10.0.0.0/8,
// fd00::/8) separated by commas or spaces; "" is none.
func ParseProxies(s string) (Proxies, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	if len(fields) > maxProxies {
		return nil, fmt.Errorf("%d entries; at most %d (use CIDR prefixes)", len(fields), maxProxies)
	}
	var p Proxies
	for _, f := range fields {
		if strings.Contains(f, "/") {
			pf, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or a CIDR prefix such as 10.0.0.0/8", f)
			}
			p = append(p, pf.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is not an address or a CIDR prefix such as 10.0.0.0/8", f)
		}
		a = a.Unmap()
		p = append(p, netip.PrefixFrom(a, a.BitLen()))
	}
	return p, nil
}

// Trusted reports whether a is the address of a trusted proxy.
func (p Proxies) Trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, pf := range p {
		if pf.Contains(a) {
			return true
		}
	}
	return false
}

// Addr is the IP address of a host:port, or of a bare address.
func Addr(hostport string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// Key is the name a client at a is counted under: an IPv4 address, or an
// IPv6 address's /64.
func Key(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// maxHops bounds the X-Forwarded-For entries read, from the right.
const maxHops = 16

// Of is the key of the client of a request that came from remoteAddr
// (host:port): the TCP peer's, or, when that is a trusted proxy, that of
// the nearest address in forwarded (the X-Forwarded-For values, the last
// one appended by the nearest proxy) that is not itself a trusted proxy.
// A trusted proxy that forwards no readable address is the client.
func (p Proxies) Of(remoteAddr string, forwarded []string) string {
	a, ok := Addr(remoteAddr)
	if !ok {
		return remoteAddr
	}
	if len(p) == 0 || !p.Trusted(a) {
		return Key(a)
	}
	client := a
	hops := 0
	for i := len(forwarded) - 1; i >= 0 && hops < maxHops; i-- {
		entries := strings.Split(forwarded[i], ",")
		for j := len(entries) - 1; j >= 0 && hops < maxHops; j-- {
			hops++
			f, ok := Addr(strings.TrimSpace(entries[j]))
			if !ok {
				return Key(client) // not an address: nothing further left of it is the proxies' word
			}
			client = f
			if !p.Trusted(f) {
				return Key(f)
			}
		}
	}
	return Key(client)
}
