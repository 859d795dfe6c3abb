package systemd

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// ParseResolvedConf applies one file's bytes on top of cfg as LoadResolvedConfig does each file (so
// tests and fuzz targets need no files). path names the file in Warnings and DNSSources. A nil cfg
// is left alone.
func ParseResolvedConf(cfg *ResolvedConfig, path string, data []byte) {
	if cfg == nil {
		return
	}
	newConfParser(cfg).file(path, data)
}

var cmpAddr = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func srv(raw string) Server {
	s, err := parseServer(raw)
	if err != nil {
		panic(err)
	}
	return s
}

type confFile struct {
	path string
	data string
}

// TestParseResolvedConf applies files in order, as LoadResolvedConfig does,
// and compares the whole result.
func TestParseResolvedConf(t *testing.T) {
	const (
		main = "/etc/systemd/resolved.conf"
		ks   = "/etc/systemd/resolved.conf.d/kubespray.conf"
		zz   = "/etc/systemd/resolved.conf.d/zz-nodedns.conf"
	)
	tests := []struct {
		name  string
		files []confFile
		want  ResolvedConfig
	}{
		{
			name:  "seed 001 kubespray drop-in",
			files: []confFile{{ks, "[Resolve]\nDNS=169.254.25.10\n"}},
			want: ResolvedConfig{
				DNS:        []Server{{Addr: netip.MustParseAddr("169.254.25.10"), Raw: "169.254.25.10"}},
				DNSSources: []Setting{{ks, 2}},
			},
		},
		{
			name: "empty DNS= resets what earlier files set",
			files: []confFile{
				{main, "[Resolve]\nDNS=192.168.1.1\nFallbackDNS=9.9.9.9\n"},
				{ks, "[Resolve]\nDNS=169.254.25.10\n"},
				{zz, "# managed by nodedns\n[Resolve]\nDNS=\nDNS=192.168.1.1 10.0.0.2\n"},
			},
			want: ResolvedConfig{
				DNS:         []Server{srv("192.168.1.1"), srv("10.0.0.2")},
				FallbackDNS: []Server{srv("9.9.9.9")},
				DNSSources:  []Setting{{zz, 3}, {zz, 4}},
			},
		},
		{
			name:  "several entries per line, duplicates keep the first place",
			files: []confFile{{main, "[Resolve]\nDNS=1.1.1.1 8.8.8.8:53\tDNS=x 1.1.1.1:53 1.1.1.1:853\nDNS=8.8.8.8\n"}},
			want: ResolvedConfig{
				DNS: []Server{srv("1.1.1.1"), srv("8.8.8.8:53")},
				// line 3 added nothing new
				DNSSources: []Setting{{main, 2}},
				Warnings:   []Warning{{main, 2, `failed to add DNS server address "DNS=x", ignoring: invalid address "DNS=x"`}},
			},
		},
		{
			name:  "IPv6 with port, interface and SNI",
			files: []confFile{{main, "[Resolve]\nDNS=[2001:db8::1]:5353 fe80::1%eth0 [2001:db8::2]:853%2#dns.example 9.9.9.9#dns.quad9.net 1.2.3.4:54%lo#a#b ::ffff:1.2.3.4\n"}},
			want: ResolvedConfig{
				DNS: []Server{
					{Addr: netip.MustParseAddr("2001:db8::1"), Port: 5353, Raw: "[2001:db8::1]:5353"},
					{Addr: netip.MustParseAddr("fe80::1"), Iface: "eth0", Raw: "fe80::1%eth0"},
					{Addr: netip.MustParseAddr("2001:db8::2"), Port: 853, Iface: "2", SNI: "dns.example", Raw: "[2001:db8::2]:853%2#dns.example"},
					{Addr: netip.MustParseAddr("9.9.9.9"), SNI: "dns.quad9.net", Raw: "9.9.9.9#dns.quad9.net"},
					{Addr: netip.MustParseAddr("1.2.3.4"), Port: 54, Iface: "lo", SNI: "a#b", Raw: "1.2.3.4:54%lo#a#b"},
					{Addr: netip.MustParseAddr("::ffff:1.2.3.4"), Raw: "::ffff:1.2.3.4"},
				},
				DNSSources: []Setting{{main, 2}},
			},
		},
		{
			name:  "continuation lines, with a comment inside and at EOF",
			files: []confFile{{main, "[Resolve]\nDNS=2.2.2.2 \\\n# a comment inside\n  3.3.3.3\nDomains=a.example \\\n~b.example\\"}},
			want: ResolvedConfig{
				DNS:        []Server{srv("2.2.2.2"), srv("3.3.3.3")},
				Domains:    []string{"a.example", "~b.example"},
				DNSSources: []Setting{{main, 4}},
			},
		},
		{
			name:  "escaped backslash is no continuation",
			files: []confFile{{main, "[Resolve]\nDNS=4.4.4.4\\\\ 5.5.5.5\nDNS=6.6.6.6\n"}},
			want: ResolvedConfig{
				DNS:        []Server{srv("5.5.5.5"), srv("6.6.6.6")},
				DNSSources: []Setting{{main, 2}, {main, 3}},
				Warnings:   []Warning{{main, 2, `failed to add DNS server address "4.4.4.4\\", ignoring: invalid address "4.4.4.4\\"`}},
			},
		},
		{
			name: "garbage lines are warnings with path and line",
			files: []confFile{{main, strings.Join([]string{
				"DNS=7.7.7.7",       // 1 outside a section
				"[Resolve]",         // 2
				"nonsense",          // 3
				"=x",                // 4
				"Bogus=1",           // 5
				"X-Mine=1",          // 6 extension keys are silent
				"DNS=bogus 1.1.1.1", // 7
				"DNS=1.2.3.7:0 [::1] 1.2.3.8# 1.2.3.9% 01.2.3.4 1.2.3.11:65536 0.0.0.0 127.0.0.53", // 8
				"[resolve]",   // 9 case matters
				"DNS=4.4.4.4", // 10 ignored silently
				"[X-Vendor]",  // 11
				"[Resolve]",   // 12
				"DNSStubListener=maybe",
				"DNSStubListener=udp",
				"LLMNR=no",
			}, "\n")}},
			want: ResolvedConfig{
				DNS:             []Server{srv("1.1.1.1")},
				DNSSources:      []Setting{{main, 7}},
				DNSStubListener: "udp",
				Warnings: []Warning{
					{main, 1, "assignment outside of section, ignoring"},
					{main, 3, "missing '=', ignoring line"},
					{main, 4, "missing key name before '=', ignoring line"},
					{main, 5, `unknown key "Bogus" in section [Resolve], ignoring`},
					{main, 7, `failed to add DNS server address "bogus", ignoring: invalid address "bogus"`},
					{main, 8, `failed to add DNS server address "1.2.3.7:0", ignoring: port 0 is not allowed`},
					{main, 8, `failed to add DNS server address "[::1]", ignoring: invalid bracketed IPv6 address`},
					{main, 8, `failed to add DNS server address "1.2.3.8#", ignoring: empty server name after '#'`},
					{main, 8, `failed to add DNS server address "1.2.3.9%", ignoring: invalid interface name ""`},
					{main, 8, `failed to add DNS server address "01.2.3.4", ignoring: invalid address "01.2.3.4"`},
					{main, 8, `failed to add DNS server address "1.2.3.11:65536", ignoring: invalid port "65536"`},
					{main, 8, `DNS server address "0.0.0.0" is dropped by systemd-resolved (unspecified address or its own stub), ignoring`},
					{main, 8, `DNS server address "127.0.0.53" is dropped by systemd-resolved (unspecified address or its own stub), ignoring`},
					{main, 9, `unknown section "resolve", ignoring`},
					{main, 13, `failed to parse DNS stub listener mode "maybe", ignoring`},
				},
			},
		},
		{
			name: "a bad section header stops everything after it",
			files: []confFile{
				{main, "[Resolve]\nDNS=1.1.1.1\n"},
				{ks, "[Resolve]\nDNS=\nDNS=6.6.6.6\n[Broken\nDNS=7.7.7.7\n"},
				{zz, "[Resolve]\nDNS=8.8.8.8\n"},
			},
			want: ResolvedConfig{
				DNS:        []Server{srv("6.6.6.6")},
				DNSSources: []Setting{{ks, 2}, {ks, 3}},
				Warnings:   []Warning{{ks, 4, `invalid section header "[Broken"; systemd-resolved 252 stops reading its configuration here`}},
				Halted:     &Warning{ks, 4, `invalid section header "[Broken"; systemd-resolved 252 stops reading its configuration here`},
			},
		},
		{
			name:  "a line that is not UTF-8 is fatal",
			files: []confFile{{main, "[Resolve]\nDNS=1.1.1.1\nDomains=caf\xe9.example\nDNS=2.2.2.2\n"}},
			want: ResolvedConfig{
				DNS:        []Server{srv("1.1.1.1")},
				DNSSources: []Setting{{main, 2}},
				Warnings:   []Warning{{main, 3, "string is not UTF-8 clean; systemd-resolved 252 stops reading its configuration here"}},
				Halted:     &Warning{main, 3, "string is not UTF-8 clean; systemd-resolved 252 stops reading its configuration here"},
			},
		},
		{
			name:  "bad characters in a section header are fatal",
			files: []confFile{{main, "[Resolve]\nDNS=1.1.1.1\n[Re\"solve]\nDNS=2.2.2.2\n"}},
			want: ResolvedConfig{
				DNS:        []Server{srv("1.1.1.1")},
				DNSSources: []Setting{{main, 2}},
				Warnings:   []Warning{{main, 3, `bad characters in section header "[Re\"solve]"; systemd-resolved 252 stops reading its configuration here`}},
				Halted:     &Warning{main, 3, `bad characters in section header "[Re\"solve]"; systemd-resolved 252 stops reading its configuration here`},
			},
		},
		{
			name:  "domains: routing-only kept as written, duplicates take the last flag",
			files: []confFile{{main, "[Resolve]\nDomains=~cluster.local example.org ~example.org Example.ORG. ~\nDomains=\"a b.example\" * .c.example c..d\n"}},
			want: ResolvedConfig{
				Domains: []string{"~cluster.local", "Example.ORG.", "*", "a b.example"},
				Warnings: []Warning{
					{main, 3, `failed to add search domain ".c.example", ignoring: empty label`},
					{main, 3, `failed to add search domain "c..d", ignoring: empty label`},
				},
			},
		},
		{
			name:  "domains reset",
			files: []confFile{{main, "[Resolve]\nDomains=a.example\n"}, {zz, "[Resolve]\nDomains=\nDomains=~.\n"}},
			want:  ResolvedConfig{Domains: []string{"~."}},
		},
		{
			name:  "stub listener extra",
			files: []confFile{{main, "[Resolve]\nDNSStubListenerExtra=169.254.25.10\nDNSStubListenerExtra=udp:[::1]:5353\nDNSStubListenerExtra=nope\n"}},
			want: ResolvedConfig{
				DNSStubListenerExtra: []string{"169.254.25.10", "udp:[::1]:5353"},
				Warnings:             []Warning{{main, 4, `failed to parse address in DNSStubListenerExtra=nope, ignoring: invalid address "nope"`}},
			},
		},
		{
			name:  "CRLF, BOM and carriage returns",
			files: []confFile{{main, "\xef\xbb\xbf[Resolve]\r\nDNS=1.1.1.1\r\n;comment\rDNS=2.2.2.2"}},
			want: ResolvedConfig{
				DNS:        []Server{srv("1.1.1.1"), srv("2.2.2.2")},
				DNSSources: []Setting{{main, 2}, {main, 4}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := &ResolvedConfig{}
			for _, f := range tt.files {
				ParseResolvedConf(got, f.path, []byte(f.data))
			}
			if diff := cmp.Diff(&tt.want, got, cmpAddr, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ParseResolvedConf mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseResolvedConfNil(t *testing.T) {
	ParseResolvedConf(nil, "x", []byte("[Resolve]\nDNS=1.1.1.1\n")) // must not panic
	cfg := &ResolvedConfig{Halted: &Warning{Path: "a", Line: 1, Msg: "m"}}
	ParseResolvedConf(cfg, "b", []byte("[Resolve]\nDNS=1.1.1.1\n"))
	if len(cfg.DNS) != 0 {
		t.Errorf("a halted config took more servers: %v", cfg.DNS)
	}
}

func TestParseServer(t *testing.T) {
	tests := []struct {
		in      string
		want    Server
		wantErr bool
	}{
		{in: "192.168.1.1", want: Server{Addr: netip.MustParseAddr("192.168.1.1")}},
		{in: "192.168.1.1:5353", want: Server{Addr: netip.MustParseAddr("192.168.1.1"), Port: 5353}},
		{in: "2001:db8::1", want: Server{Addr: netip.MustParseAddr("2001:db8::1")}},
		{in: "[2001:db8::1]:53", want: Server{Addr: netip.MustParseAddr("2001:db8::1"), Port: 53}},
		{in: "[fe80::1]:53%eth0#x", want: Server{Addr: netip.MustParseAddr("fe80::1"), Port: 53, Iface: "eth0", SNI: "x"}},
		// base-0 ports as safe_atou16 parses them (measured on 252)
		{in: "1.2.3.4:0x35", want: Server{Addr: netip.MustParseAddr("1.2.3.4"), Port: 53}},
		{in: "1.2.3.5:053", want: Server{Addr: netip.MustParseAddr("1.2.3.5"), Port: 43}},
		{in: "1.2.3.6:+54", want: Server{Addr: netip.MustParseAddr("1.2.3.6"), Port: 54}},
		{in: "1.2.3.10%010", want: Server{Addr: netip.MustParseAddr("1.2.3.10"), Iface: "010"}},
		{in: "[::1]", wantErr: true},
		{in: "[1.2.3.4]:53", wantErr: true},
		{in: "1.2.3.4:", wantErr: true},
		{in: "1.2.3.4%0", wantErr: true},
		{in: "1.2.3.4%a:b", wantErr: true},
		{in: "1.2.3.4%" + strings.Repeat("a", 128), wantErr: true},
		{in: "fe80::1%", wantErr: true},
		{in: "[:53", wantErr: true},
		{in: "]:53", wantErr: true},
		{in: ":53", wantErr: true},
		{in: "", wantErr: true},
		{in: "example.com", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseServer(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseServer(%q) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseServer(%q): %v", tt.in, err)
			}
			tt.want.Raw = tt.in
			if diff := cmp.Diff(tt.want, got, cmpAddr); diff != "" {
				t.Errorf("parseServer(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestServerString(t *testing.T) {
	for _, in := range []string{"1.2.3.4", "1.2.3.4:5353", "[2001:db8::1]:5353%2#dns.example", "fe80::1%eth0"} {
		if got := srv(in).String(); got != in {
			t.Errorf("Server(%q).String() = %q", in, got)
		}
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in      string
		flags   int
		want    []string
		wantErr bool
	}{
		{in: "  a \t b  ", want: []string{"a", "b"}},
		{in: `a\ b c`, want: []string{"a b", "c"}},
		{in: `"a b" c`, want: []string{`"a`, `b"`, "c"}},
		{in: `"a b" 'c d'e`, flags: exUnquote, want: []string{"a b", "c de"}},
		{in: `"a b`, flags: exUnquote, wantErr: true},
		{in: `a b\`, want: []string{"a"}, wantErr: true},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in, tt.flags)
		if (err != nil) != tt.wantErr {
			t.Errorf("splitWords(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("splitWords(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

// writeTree creates files under root: a value starting with "->" makes a
// symlink, "dir" makes a directory.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		host := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(data, "->"):
			if err := os.Symlink(strings.TrimPrefix(data, "->"), host); err != nil {
				t.Fatal(err)
			}
		case data == "dir":
			if err := os.MkdirAll(host, 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(host, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestLoadResolvedConfig(t *testing.T) {
	const (
		etcD   = "/etc/systemd/resolved.conf.d/"
		runD   = "/run/systemd/resolved.conf.d/"
		localD = "/usr/local/lib/systemd/resolved.conf.d/"
		usrD   = "/usr/lib/systemd/resolved.conf.d/"
		libD   = "/lib/systemd/resolved.conf.d/"
	)
	tests := []struct {
		name   string
		files  map[string]string
		chmod  map[string]os.FileMode
		want   ResolvedConfig
		ignore []string // fields not compared
	}{
		{
			name: "nothing there",
			want: ResolvedConfig{},
		},
		{
			name: "seed 001: kubespray drop-in over the main file",
			files: map[string]string{
				"/etc/systemd/resolved.conf": "[Resolve]\n#DNS=\n",
				etcD + "kubespray.conf":      "[Resolve]\nDNS=169.254.25.10\n",
			},
			want: ResolvedConfig{
				DNS:        []Server{srv("169.254.25.10")},
				DNSSources: []Setting{{etcD + "kubespray.conf", 2}},
				Files:      []string{"/etc/systemd/resolved.conf", etcD + "kubespray.conf"},
			},
		},
		{
			name: "order is by file name across directories, earlier directories mask by name",
			files: map[string]string{
				etcD + "50-b.conf":    "[Resolve]\nDNS=5.0.0.1\n",
				runD + "50-b.conf":    "[Resolve]\nDNS=5.0.0.2\n", // masked by /etc
				runD + "10-a.conf":    "[Resolve]\nDNS=1.0.0.2\n",
				usrD + "10-a.conf":    "[Resolve]\nDNS=1.0.0.4\n", // masked by /run
				localD + "70-c.conf":  "[Resolve]\nDNS=7.0.0.3\n",
				usrD + "00-z.conf":    "[Resolve]\nDNS=0.0.0.4\n",
				libD + "99-lib.conf":  "[Resolve]\nDNS=9.0.0.5\n",
				etcD + "README":       "not a drop-in",
				etcD + ".hidden.conf": "[Resolve]\nDNS=6.6.6.6\n",
				// /usr/lib/systemd/resolved.conf is not read by 252
				"/usr/lib/systemd/resolved.conf": "[Resolve]\nDNS=3.3.3.3\n",
			},
			want: ResolvedConfig{
				DNS: []Server{srv("0.0.0.4"), srv("1.0.0.2"), srv("5.0.0.1"), srv("7.0.0.3"), srv("9.0.0.5")},
				Files: []string{
					usrD + "00-z.conf", runD + "10-a.conf", etcD + "50-b.conf", localD + "70-c.conf", libD + "99-lib.conf",
				},
			},
			ignore: []string{"DNSSources"},
		},
		{
			name: "empty file and /dev/null symlink mask; dangling symlink is skipped",
			files: map[string]string{
				etcD + "kubespray.conf": "",
				usrD + "kubespray.conf": "[Resolve]\nDNS=169.254.25.10\n",
				runD + "vendor.conf":    "->/dev/null",
				usrD + "vendor.conf":    "[Resolve]\nDNS=169.254.20.10\n",
				etcD + "gone.conf":      "->/nonexistent",
				etcD + "z.conf":         "[Resolve]\nDNS=10.0.0.1\n",
			},
			want: ResolvedConfig{
				DNS:        []Server{srv("10.0.0.1")},
				DNSSources: []Setting{{etcD + "z.conf", 2}},
				Files:      []string{etcD + "kubespray.conf", runD + "vendor.conf", etcD + "z.conf"},
			},
		},
		{
			name: "absolute symlinks resolve inside root",
			files: map[string]string{
				"/etc/systemd/resolved.conf.d": "->/srv/conf",
				"/srv/conf/a.conf":             "->/srv/real/a.conf",
				"/srv/real/a.conf":             "[Resolve]\nDNS=10.9.9.9\n",
			},
			want: ResolvedConfig{
				DNS:        []Server{srv("10.9.9.9")},
				DNSSources: []Setting{{etcD + "a.conf", 2}},
				Files:      []string{etcD + "a.conf"},
			},
		},
		{
			name: "an unreadable drop-in stops resolved: later files never apply",
			files: map[string]string{
				etcD + "10-a.conf":           "[Resolve]\nDNS=6.6.6.6\n",
				etcD + "20-secret.conf":      "[Resolve]\nDNS=7.7.7.7\n",
				etcD + "zz-nodedns.conf":     "[Resolve]\nDNS=\nDNS=8.8.8.8\n",
				"/etc/systemd/resolved.conf": "[Resolve]\nDNS=1.1.1.1\n",
			},
			chmod: map[string]os.FileMode{etcD + "20-secret.conf": 0o600},
			want: ResolvedConfig{
				DNS:        []Server{srv("1.1.1.1"), srv("6.6.6.6")},
				DNSSources: []Setting{{"/etc/systemd/resolved.conf", 2}, {etcD + "10-a.conf", 2}},
				Files:      []string{"/etc/systemd/resolved.conf", etcD + "10-a.conf"},
				Warnings: []Warning{
					{etcD + "20-secret.conf", 0, "not readable by the systemd-resolve user (mode 0600); systemd-resolved 252 stops reading its configuration here"},
					{etcD + "zz-nodedns.conf", 0, "not read: systemd-resolved 252 stopped reading its configuration at " + etcD + "20-secret.conf"},
				},
				Halted: &Warning{etcD + "20-secret.conf", 0, "not readable by the systemd-resolve user (mode 0600); systemd-resolved 252 stops reading its configuration here"},
			},
		},
		{
			name: "a directory named like a drop-in stops resolved",
			files: map[string]string{
				etcD + "10-dir.conf": "dir",
				etcD + "20-b.conf":   "[Resolve]\nDNS=8.8.8.8\n",
			},
			want: ResolvedConfig{
				Warnings: []Warning{
					{etcD + "10-dir.conf", 0, "is a directory; systemd-resolved 252 stops reading its configuration here"},
					{etcD + "20-b.conf", 0, "not read: systemd-resolved 252 stopped reading its configuration at " + etcD + "10-dir.conf"},
				},
			},
			ignore: []string{"Halted"},
		},
		{
			name: "a directory resolved cannot list is ignored",
			files: map[string]string{
				runD + "a.conf": "[Resolve]\nDNS=8.8.8.8\n",
				etcD + "b.conf": "[Resolve]\nDNS=9.9.9.9\n",
			},
			chmod: map[string]os.FileMode{runD: 0o700},
			want: ResolvedConfig{
				DNS:        []Server{srv("9.9.9.9")},
				DNSSources: []Setting{{etcD + "b.conf", 2}},
				Files:      []string{etcD + "b.conf"},
				Warnings:   []Warning{{"/run/systemd/resolved.conf.d", 0, "not readable by the systemd-resolve user (mode 0700): systemd-resolved 252 ignores this directory"}},
			},
		},
		{
			name: "files over 1 MiB are skipped",
			files: map[string]string{
				etcD + "big.conf": "[Resolve]\nDNS=8.8.8.8\n" + strings.Repeat("#\n", maxConfFileSize),
				etcD + "ok.conf":  "[Resolve]\nDNS=9.9.9.9\n",
			},
			want: ResolvedConfig{
				DNS:        []Server{srv("9.9.9.9")},
				DNSSources: []Setting{{etcD + "ok.conf", 2}},
				Files:      []string{etcD + "ok.conf"},
				Warnings:   []Warning{{etcD + "big.conf", 0, "skipped: larger than 1048576 bytes"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tt.files)
			for p, mode := range tt.chmod {
				if err := os.Chmod(filepath.Join(root, p), mode); err != nil {
					t.Fatal(err)
				}
			}
			got := LoadResolvedConfig(nodefs.NewReader(root))
			opts := []cmp.Option{cmpAddr, cmpopts.EquateEmpty()}
			if len(tt.ignore) > 0 {
				opts = append(opts, cmpopts.IgnoreFields(ResolvedConfig{}, tt.ignore...))
			}
			if diff := cmp.Diff(&tt.want, got, opts...); diff != "" {
				t.Errorf("LoadResolvedConfig mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadConfInsideRoot: a symlink loop is an error, and ".." in a drop-in's symlink never climbs
// above the node's root.
func TestReadConfInsideRoot(t *testing.T) {
	root := t.TempDir()
	r := nodefs.NewReader(root)
	writeTree(t, root, map[string]string{"/etc/a": "->/etc/b", "/etc/b": "->/etc/a"})
	if _, err := readConf(r, "/etc/a/x"); err == nil || !strings.Contains(err.Error(), "too many levels") {
		t.Errorf("readConf on a symlink loop: %v", err)
	}
	writeTree(t, root, map[string]string{"/etc/up": "->../../../../outside", "/outside": "x"})
	if data, err := readConf(r, "/etc/up"); err != nil || string(data) != "x" {
		t.Errorf("readConf(/etc/up) = %q, %v; want the file inside root", data, err)
	}
}

func FuzzParseResolvedConf(f *testing.F) {
	for _, s := range []string{
		"[Resolve]\nDNS=169.254.25.10\n",
		"[Resolve]\nDNS=\nDNS=1.1.1.1 [2001:db8::1]:5353%eth0#dns.example 9.9.9.9#x\n",
		"[Resolve]\nDomains=~cluster.local \"a b\" * ~ .\nFallbackDNS=8.8.8.8:0x35\n",
		"[Resolve]\nDNS=2.2.2.2 \\\n# c\n 3.3.3.3\\",
		"\xef\xbb\xbf[Resolve]\r\nDNSStubListenerExtra=udp:[::1]:53\r\n[Broken\n",
		"DNS=1\n[X-a]\nb\n=c\n[Resolve]\nDomains=a\\065.b\\\\.c\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := &ResolvedConfig{}
		ParseResolvedConf(cfg, "/f.conf", data)
		ParseResolvedConf(cfg, "/g.conf", data)
		for _, list := range [][]Server{cfg.DNS, cfg.FallbackDNS} {
			for _, s := range list {
				if !s.Addr.IsValid() || s.Addr.Zone() != "" {
					t.Fatalf("server %+v has no valid unzoned address", s)
				}
				if !serverAddrValid(s.Addr) {
					t.Fatalf("server %+v is one resolved drops", s)
				}
				// What we keep must parse back to the same server.
				back, err := parseServer(s.Raw)
				if err != nil || back != s {
					t.Fatalf("server %+v does not round-trip: %+v, %v", s, back, err)
				}
			}
		}
		if len(cfg.DNS) > 0 && len(cfg.DNSSources) == 0 {
			t.Fatalf("DNS %v without sources", cfg.DNS)
		}
		for _, w := range cfg.Warnings {
			if w.Line < 1 || (w.Path != "/f.conf" && w.Path != "/g.conf") {
				t.Fatalf("warning without a file line: %+v", w)
			}
		}
		for _, d := range cfg.Domains {
			if _, err := normalizeDomain(domainName(d)); err != nil {
				t.Fatalf("kept an invalid domain %q: %v", d, err)
			}
		}
	})
}

// TestParseResolvedConfLargeInputs guards against quadratic work on files
// near the 1 MiB limit: long continuations, long server and domain lists.
func TestParseResolvedConfLargeInputs(t *testing.T) {
	var b strings.Builder
	b.WriteString("[Resolve]\nDNS=")
	const n = 40000
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "10.%d.%d.1 ", i/256, i%256)
	}
	b.WriteString("\nDomains=")
	for i := 0; i < n/4; i++ {
		fmt.Fprintf(&b, "d%d.example \\\n", i)
	}
	b.WriteString("\n")
	data := []byte(b.String())
	if len(data) > maxConfFileSize {
		t.Fatalf("test input is %d bytes, over the limit", len(data))
	}
	start := time.Now()
	cfg := &ResolvedConfig{}
	ParseResolvedConf(cfg, "/big.conf", data)
	ParseResolvedConf(cfg, "/big.conf", data) // all duplicates now
	if len(cfg.DNS) != n || len(cfg.Domains) != n/4 || len(cfg.Warnings) != 0 {
		t.Errorf("got %d servers, %d domains, %d warnings; want %d, %d, 0", len(cfg.DNS), len(cfg.Domains), len(cfg.Warnings), n, n/4)
	}
	if d := time.Since(start); d > 20*time.Second { // quadratic work would take minutes
		t.Errorf("parsing took %v", d)
	}
}

func TestIsStub(t *testing.T) {
	for s, want := range map[string]bool{"127.0.0.53": true, "127.0.0.54": true, "::ffff:127.0.0.53": true, "127.0.0.1": false, "169.254.25.10": false, "::1": false} {
		if got := IsStub(netip.MustParseAddr(s)); got != want {
			t.Errorf("IsStub(%s) = %v, want %v", s, got, want)
		}
	}
}

// TestLoadResolvedViews: the configuration without nodedns's drop-in and without /run are the same
// files in the same order minus those, with a DNS= reset in a skipped file undone; only the full
// view carries warnings.
func TestLoadResolvedViews(t *testing.T) {
	const own = "/etc/systemd/resolved.conf.d/zz-nodedns.conf"
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"etc/systemd/resolved.conf":                   "[Resolve]\nDNS=10.0.0.1 bogus\n",
		"etc/systemd/resolved.conf.d/kubespray.conf":  "[Resolve]\nDNS=169.254.25.10\n",
		"run/systemd/resolved.conf.d/50-run.conf":     "[Resolve]\nDNS=10.0.0.9\n",
		"etc/systemd/resolved.conf.d/zz-nodedns.conf": "[Resolve]\nDNS=\nDNS=10.0.0.1\n",
	})
	all, others, persistent := LoadResolvedViews(nodefs.NewReader(root), own)
	raw := func(c *ResolvedConfig) []string {
		var out []string
		for _, s := range c.DNS {
			out = append(out, s.Raw)
		}
		return out
	}
	for _, v := range []struct {
		name     string
		cfg      *ResolvedConfig
		dns      []string
		files    int
		warnings int
	}{
		{"all", all, []string{"10.0.0.1"}, 4, 1},
		{"others", others, []string{"10.0.0.1", "10.0.0.9", "169.254.25.10"}, 3, 0},
		{"persistent", persistent, []string{"10.0.0.1"}, 3, 0},
	} {
		if diff := cmp.Diff(v.dns, raw(v.cfg)); diff != "" {
			t.Errorf("%s: DNS (-want +got):\n%s", v.name, diff)
		}
		if len(v.cfg.Files) != v.files || len(v.cfg.Warnings) != v.warnings {
			t.Errorf("%s: files %v, warnings %v; want %d files, %d warnings", v.name, v.cfg.Files, v.cfg.Warnings, v.files, v.warnings)
		}
	}
}
