package networkmanager

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const kubesprayDNSConf = `[global-dns-domain-*]
servers = 169.254.25.10,10.66.0.53

[global-dns]
searches = default.svc.cluster.local,svc.cluster.local
options = ndots:2,timeout:2,attempts:2
`

// TestLoadConfigOrder is the order and shadowing NM 1.42.4 showed with --print-config (measured:
// "(lib: 10-lib.conf, 90-lib.conf) (run: 50-same.conf, 95-run.conf) (etc: .hidden.conf,
// 05-etc.conf, 40-shadow.conf)"; TestPrintConfigAgrees checks the same tree against the daemon).
func TestLoadConfigOrder(t *testing.T) {
	node := orderFixture()
	c, err := LoadConfig(node)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{
		"/usr/lib/NetworkManager/conf.d/10-lib.conf",
		"/usr/lib/NetworkManager/conf.d/90-lib.conf",
		"/run/NetworkManager/conf.d/50-same.conf",
		"/run/NetworkManager/conf.d/95-run.conf",
		"/etc/NetworkManager/NetworkManager.conf",
		"/etc/NetworkManager/conf.d/.hidden.conf",
		"/etc/NetworkManager/conf.d/05-etc.conf",
		"/etc/NetworkManager/conf.d/40-shadow.conf",
	}
	if diff := cmp.Diff(wantFiles, c.Files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	v, _ := c.Get("global-dns-domain-*", "servers")
	if want := (Value{Raw: "10.0.0.7", Source: Source{"/etc/NetworkManager/conf.d/40-shadow.conf", 2}}); v != want {
		t.Errorf("servers = %+v, want %+v", v, want)
	}
	if diff := cmp.Diff([]string{"lib10", "lib90", "runsame", "run95", "main", "hidden", "etc05", "etc40"}, c.Keys("order")); diff != "" {
		t.Errorf("keys of [order] (-want +got):\n%s", diff)
	}
}

func orderFixture() MapFS {
	w := func(server, key string) string {
		return "[global-dns-domain-*]\nservers=" + server + "\n[order]\n" + key + "=" + server + "\n"
	}
	return MapFS{
		"/usr/lib/NetworkManager/conf.d/10-lib.conf":  w("10.0.0.1", "lib10"),
		"/usr/lib/NetworkManager/conf.d/90-lib.conf":  w("10.0.0.2", "lib90"),
		"/usr/lib/NetworkManager/conf.d/50-same.conf": w("10.0.0.3", "libsame"),
		"/run/NetworkManager/conf.d/50-same.conf":     w("10.0.0.4", "runsame"),
		"/run/NetworkManager/conf.d/95-run.conf":      w("10.0.0.5", "run95"),
		"/run/NetworkManager/conf.d/40-shadow.conf":   w("10.0.0.6", "run40"),
		"/etc/NetworkManager/conf.d/40-shadow.conf":   w("10.0.0.7", "etc40"),
		"/etc/NetworkManager/conf.d/05-etc.conf":      w("10.0.0.8", "etc05"),
		"/etc/NetworkManager/conf.d/.hidden.conf":     w("10.0.0.9", "hidden"),
		"/etc/NetworkManager/conf.d/noext":            w("10.0.0.10", "noext"),
		"/etc/NetworkManager/NetworkManager.conf":     "[main]\nplugins=keyfile\n[order]\nmain=main\n[global-dns-domain-*]\nservers=10.0.0.11\n",
	}
}

func TestGlobalDNS(t *testing.T) {
	tests := []struct {
		name string
		node MapFS
		want *GlobalDNS
	}{
		{name: "none", node: MapFS{MainConfPath: "[main]\ndns=default\n"}},
		{name: "kubespray", node: MapFS{EtcConfDir + "/dns.conf": kubesprayDNSConf},
			want: &GlobalDNS{Searches: []string{"default.svc.cluster.local", "svc.cluster.local"}, SearchesFrom: Source{EtcConfDir + "/dns.conf", 5},
				Options: []string{"ndots:2", "timeout:2", "attempts:2"}, OptionsFrom: Source{EtcConfDir + "/dns.conf", 6},
				Domains: []GlobalDNSDomain{{Name: "*", Servers: []string{"169.254.25.10", "10.66.0.53"}, ServersFrom: Source{EtcConfDir + "/dns.conf", 2}}}}},
		{name: "zz-nodedns overrides servers and searches key by key, keeps options", node: MapFS{
			EtcConfDir + "/dns.conf":        kubesprayDNSConf,
			EtcConfDir + "/zz-nodedns.conf": "[global-dns-domain-*]\nservers=10.66.0.53\n\n[global-dns]\nsearches=\n"},
			want: &GlobalDNS{SearchesFrom: Source{NodeDNSConfPath, 5},
				Options: []string{"ndots:2", "timeout:2", "attempts:2"}, OptionsFrom: Source{EtcConfDir + "/dns.conf", 6},
				Domains: []GlobalDNSDomain{{Name: "*", Servers: []string{"10.66.0.53"}, ServersFrom: Source{NodeDNSConfPath, 2}}}}},
		{name: "invalid servers, blanks and repeats dropped; bad options dropped", node: MapFS{EtcConfDir + "/a.conf": "[global-dns-domain-*]\nservers= 10.0.0.1 , bogus,,10.0.0.1,fe80::1%eth0,2001:db8::1\n[global-dns]\noptions=ndots:x,rotate,:1,timeout:3\nsearches=a, ,a,~b\n"},
			want: &GlobalDNS{Searches: []string{"a", "~b"}, SearchesFrom: Source{EtcConfDir + "/a.conf", 5},
				Options: []string{"rotate", "timeout:3"}, OptionsFrom: Source{EtcConfDir + "/a.conf", 4},
				Domains: []GlobalDNSDomain{{Name: "*", Servers: []string{"10.0.0.1", "2001:db8::1"}, ServersFrom: Source{EtcConfDir + "/a.conf", 2}}}}},
		{name: "a domain without * makes NM ignore it all", node: MapFS{EtcConfDir + "/a.conf": "[global-dns-domain-corp]\nservers=10.0.0.1\n"}},
		{name: "a * without a valid server is dropped: the rest is kept", node: MapFS{EtcConfDir + "/a.conf": "[global-dns-domain-*]\nservers=x\n[global-dns]\nsearches=corp\n"},
			want: &GlobalDNS{Searches: []string{"corp"}, SearchesFrom: Source{EtcConfDir + "/a.conf", 4}}},
		{name: "a bad escape makes the key absent", node: MapFS{EtcConfDir + "/a.conf": "[global-dns-domain-*]\nservers=10.0.0.1\\x\n[global-dns]\nsearches=corp\n"},
			want: &GlobalDNS{Searches: []string{"corp"}, SearchesFrom: Source{EtcConfDir + "/a.conf", 4}}},
		{name: "set over D-Bus", node: MapFS{InternConfPath: "# Internal configuration file.\n\n[.intern.global-dns]\nsearches=corp.example\noptions=\n\n[.intern.global-dns-domain-*]\nservers=169.254.25.10,10.66.0.53\noptions=\n"},
			want: &GlobalDNS{Internal: true, Searches: []string{"corp.example"}, SearchesFrom: Source{InternConfPath, 4},
				Domains: []GlobalDNSDomain{{Name: "*", Servers: []string{"169.254.25.10", "10.66.0.53"}, ServersFrom: Source{InternConfPath, 8}}}}},
		{name: "a config file's global DNS hides the one set over D-Bus", node: MapFS{
			InternConfPath:         "[.intern.global-dns-domain-*]\nservers=169.254.25.10\n",
			EtcConfDir + "/a.conf": "[global-dns-domain-*]\nservers=10.66.0.53\n"},
			want: &GlobalDNS{Domains: []GlobalDNSDomain{{Name: "*", Servers: []string{"10.66.0.53"}, ServersFrom: Source{EtcConfDir + "/a.conf", 2}}}}},
		{name: "an empty [global-dns] group sets nothing", node: MapFS{
			InternConfPath:         "[.intern.global-dns-domain-*]\nservers=169.254.25.10\n",
			EtcConfDir + "/a.conf": "[global-dns]\n"},
			want: &GlobalDNS{Internal: true, Domains: []GlobalDNSDomain{{Name: "*", Servers: []string{"169.254.25.10"}, ServersFrom: Source{InternConfPath, 2}}}}},
		{name: "servers+= is dropped by NM", node: MapFS{EtcConfDir + "/a.conf": "[global-dns-domain-*]\nservers=10.0.0.1\n", EtcConfDir + "/b.conf": "[global-dns-domain-*]\nservers+=169.254.25.10\n"},
			want: &GlobalDNS{Domains: []GlobalDNSDomain{{Name: "*", Servers: []string{"10.0.0.1"}, ServersFrom: Source{EtcConfDir + "/a.conf", 2}}}}},
		{name: "a disabled snippet is skipped", node: MapFS{EtcConfDir + "/a.conf": "[.config]\nenable=false\n[global-dns-domain-*]\nservers=10.0.0.1\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadConfig(tt.node)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.GlobalDNS()); diff != "" {
				t.Errorf("GlobalDNS (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		node MapFS
		want ParseError
	}{
		{"bad conf.d file", MapFS{EtcConfDir + "/50-bad.conf": "[global-dns-domain-*]\nservers=10.66.0.53\nthis is not a key\n"},
			ParseError{Path: EtcConfDir + "/50-bad.conf", Line: 3, Reason: "Key file contains line “this is not a key” which is not a key-value pair, group, or comment"}},
		{"bad main file", MapFS{MainConfPath: "dns=none\n"}, ParseError{Path: MainConfPath, Line: 1, Reason: "Key file does not start with a group"}},
		{"a directory named .conf", MapFS{EtcConfDir + "/60-dir.conf/x": "", EtcConfDir + "/a.conf": "[main]\n"}, ParseError{Path: EtcConfDir + "/60-dir.conf", Reason: "Not a regular file"}},
		{"a bad lib file shadowed by etc is never read", MapFS{SystemConfDir + "/a.conf": "bad\n", EtcConfDir + "/a.conf": "[main]\n", RunConfDir + "/b.conf": "also bad\n"},
			ParseError{Path: RunConfDir + "/b.conf", Line: 1, Reason: "Key file contains line “also bad” which is not a key-value pair, group, or comment"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(tt.node)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *ParseError", err)
			}
			if diff := cmp.Diff(tt.want, *pe, cmp.AllowUnexported(ParseError{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// A bad nm-system-settings.conf is skipped with a warning; NetworkManager.conf is read.
	c, err := LoadConfig(MapFS{OldMainConfPath: "bad\n", MainConfPath: "[main]\ndns=none\n"})
	if err != nil {
		t.Fatal(err)
	}
	if mode, src := c.DNSMode(); mode != "none" || src != (Source{MainConfPath, 2}) || len(c.Warnings) != 1 {
		t.Errorf("DNSMode = %q from %v, warnings %v", mode, src, c.Warnings)
	}
}

func TestConfigExtend(t *testing.T) {
	c, err := LoadConfig(MapFS{
		MainConfPath:             "[main]\nplugins=keyfile,ifcfg-rh\n[keyfile]\nunmanaged-devices=interface-name:a\n",
		EtcConfDir + "/k8s.conf": "[keyfile]\nunmanaged-devices+=interface-name:kube-ipvs0;interface-name:nodelocaldns\n[main]\nplugins-=ifcfg-rh\nplugins+=keyfile,x\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get("keyfile", "unmanaged-devices"); v.Raw != "interface-name:a,interface-name:kube-ipvs0,interface-name:nodelocaldns" || v.Line != 2 {
		t.Errorf("unmanaged-devices = %+v", v)
	}
	if v, _ := c.Get("main", "plugins"); v.Raw != "keyfile,x" {
		t.Errorf("plugins = %+v", v)
	}
}

func TestOverlay(t *testing.T) {
	node := MapFS{EtcConfDir + "/dns.conf": kubesprayDNSConf}
	cand := []byte("[global-dns-domain-*]\nservers=10.66.0.53\n")
	c, err := LoadConfig(Overlay(node, map[string][]byte{NodeDNSConfPath: cand}))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := c.GlobalDNS().Domain("*"); !cmp.Equal(d.Servers, []string{"10.66.0.53"}) || d.ServersFrom.Path != NodeDNSConfPath {
		t.Errorf("with the candidate: %+v", d)
	}
	c, err = LoadConfig(Overlay(node, map[string][]byte{EtcConfDir + "/dns.conf": nil}))
	if err != nil {
		t.Fatal(err)
	}
	if g := c.GlobalDNS(); g != nil {
		t.Errorf("with dns.conf removed: %+v", g)
	}
	// A candidate in a directory that does not exist yet.
	if _, err := LoadConfig(Overlay(MapFS{}, map[string][]byte{NodeDNSConfPath: cand})); err != nil {
		t.Fatal(err)
	}
}

func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte(kubesprayDNSConf), []byte("[global-dns-domain-*]\nservers=10.66.0.53\n[global-dns]\nsearches=\n"), []byte("[.intern.global-dns-domain-*]\nservers=1.1.1.1\n"))
	f.Add([]byte("[main]\nplugins+=a\n"), []byte("[.config]\nenable=nm-version:1.42\n"), []byte("x"))
	f.Fuzz(func(t *testing.T, a, b, intern []byte) {
		node := MapFS{EtcConfDir + "/dns.conf": string(a), NodeDNSConfPath: string(b), InternConfPath: string(intern)}
		c, err := LoadConfig(node)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		g := c.GlobalDNS()
		if g == nil {
			return
		}
		for _, d := range g.Domains {
			if len(d.Servers) == 0 || d.ServersFrom.Path == "" {
				t.Fatalf("domain %+v without servers or source", d)
			}
		}
		if len(g.Domains) > 0 && !g.Overrides() {
			t.Fatal("domains without *")
		}
		for _, o := range g.Options {
			if !validDNSOption(o) {
				t.Fatalf("invalid option %q kept", o)
			}
		}
	})
}
