package leases

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzParseDhclientConf(f *testing.F) {
	confs, _ := filepath.Glob("testdata/kubespray/*.conf")
	for _, p := range confs {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("interface \"eth0\" { prepend domain-name-servers 169.254.25.10; }\nappend domain-search \"a.\", \"b.\";\n"))
	f.Add([]byte("supersede domain-name-servers = option domain-name-servers;\ninclude \"x\";\ndefault domain-name \"\\x41\";"))
	leases, err := os.ReadFile("testdata/kubespray/loop-only-after-renew.leases")
	if err != nil {
		f.Fatal(err)
	}
	ls, err := ParseDhclient(leases, "/var/lib/dhcp/dhclient.enp1s0.leases")
	if err != nil {
		f.Fatal(err)
	}
	const path = "/etc/dhcp/dhclient.conf"
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseDhclientConf(data, path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), path+":") {
				t.Errorf("error %q does not start with %s:LINE", err, path)
			}
			return
		}
		for _, r := range c.Rules {
			if r.Path != path || r.Line < 1 {
				t.Errorf("rule without its place: %+v", r)
			}
			switch r.Option {
			case OptDomainNameServers:
				if !r.Expr && len(r.Servers) == 0 {
					t.Errorf("domain-name-servers rule without servers: %+v", r)
				}
				for _, a := range r.Servers {
					if !a.Is4() {
						t.Errorf("non-IPv4 server %v", a)
					}
				}
			case OptDomainName, OptDomainSearch:
				if !r.Expr && len(r.Domains) == 0 {
					t.Errorf("%s rule without a value: %+v", r.Option, r)
				}
			default:
				t.Errorf("rule for option %q", r.Option)
			}
			_ = r.String()
		}
		// Whatever the rules, recovering the offer terminates and returns only what a block holds.
		for _, iface := range []string{"enp1s0", "eth0"} {
			o := OfferedDNS(ls, c, iface)
			if o.Known && o.Lease.Path == "" {
				t.Errorf("known offer without its block: %+v", o)
			}
			_ = OfferedSearch(ls, c, iface)
		}
	})
}
