package systemd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// writeTree writes node files under a fresh root; a value starting with "->" makes a symlink.
func writeDelegateTree(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, data := range files {
		host := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(data, "->"); ok {
			if err := os.Symlink(target, host); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(host, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	etcDelegates = "/etc/systemd/dns-delegate.d"
	runDelegates = "/run/systemd/dns-delegate.d"
	libDelegates = "/usr/lib/systemd/dns-delegate.d"
	kubespray    = "[Delegate]\nDNS=169.254.25.10\nDomains=~.\nDefaultRoute=yes\n"
)

func TestLoadDNSDelegates(t *testing.T) {
	type want struct {
		id      string
		path    string
		dns     []string
		sources []string
		domains []string
		route   string
	}
	tests := []struct {
		name     string
		files    map[string]string
		want     []want
		masked   []string
		warnings []string
	}{
		{
			name:  "kubespray's delegate in /etc",
			files: map[string]string{etcDelegates + "/kubespray.dns-delegate": kubespray},
			want: []want{{id: "kubespray", path: etcDelegates + "/kubespray.dns-delegate", dns: []string{"169.254.25.10"},
				sources: []string{etcDelegates + "/kubespray.dns-delegate:2"}, domains: []string{"~."}, route: "yes"}},
		},
		{
			name: "a same-named file in /etc masks /run and /usr/lib; other names are read from every directory, in name order",
			files: map[string]string{
				libDelegates + "/a.dns-delegate": "[Delegate]\nDNS=169.254.25.10\n",
				runDelegates + "/a.dns-delegate": "[Delegate]\nDNS=10.0.0.9\n",
				etcDelegates + "/a.dns-delegate": "[Delegate]\nDNS=192.0.2.1\n",
				libDelegates + "/b.dns-delegate": "[Delegate]\nDNS=10.96.0.10:53%eth0#cluster.local\n",
				runDelegates + "/c.dns-delegate": "[Delegate]\nDNS=[fd00::a]:5353\n",
			},
			want: []want{
				{id: "a", path: etcDelegates + "/a.dns-delegate", dns: []string{"192.0.2.1"}, sources: []string{etcDelegates + "/a.dns-delegate:2"}},
				{id: "b", path: libDelegates + "/b.dns-delegate", dns: []string{"10.96.0.10:53%eth0#cluster.local"}, sources: []string{libDelegates + "/b.dns-delegate:2"}},
				{id: "c", path: runDelegates + "/c.dns-delegate", dns: []string{"[fd00::a]:5353"}, sources: []string{runDelegates + "/c.dns-delegate:2"}},
			},
		},
		{
			name: "a /dev/null symlink or an empty file masks the delegate",
			files: map[string]string{
				libDelegates + "/kubespray.dns-delegate": kubespray,
				etcDelegates + "/kubespray.dns-delegate": "->/dev/null",
				libDelegates + "/other.dns-delegate":     kubespray,
				runDelegates + "/other.dns-delegate":     "",
			},
			masked: []string{etcDelegates + "/kubespray.dns-delegate", runDelegates + "/other.dns-delegate"},
		},
		{
			name: "drop-ins from every directory, in name order, on top of the main file; an empty DNS= resets",
			files: map[string]string{
				libDelegates + "/k.dns-delegate":          "[Delegate]\nDNS=192.0.2.1\n",
				libDelegates + "/k.dns-delegate.d/b.conf": "[Delegate]\nDNS=\nDNS=192.0.2.2 169.254.25.10\n",
				etcDelegates + "/k.dns-delegate.d/a.conf": "[Delegate]\nDNS=192.0.2.3\n",
				runDelegates + "/k.dns-delegate.d/c.conf": "[Delegate]\nDomains=example.org ~cluster.local\n",
			},
			want: []want{{id: "k", path: libDelegates + "/k.dns-delegate",
				dns:     []string{"192.0.2.2", "169.254.25.10"},
				sources: []string{libDelegates + "/k.dns-delegate.d/b.conf:3", libDelegates + "/k.dns-delegate.d/b.conf:3"},
				domains: []string{"example.org", "~cluster.local"}}},
		},
		{
			// Measured with resolved 262: "DNS=192.0.2.1 192.0.2.1:53 169.254.25.10" serves 192.0.2.1
			// and 169.254.25.10.
			name: "stubs and unspecified addresses are dropped; a duplicate keeps its place and the line goes on; bad words are skipped",
			files: map[string]string{etcDelegates + "/x.dns-delegate": "[Delegate]\n" +
				"DNS=127.0.0.53 0.0.0.0 bogus 192.0.2.1 192.0.2.1:53 169.254.25.10\n" +
				"DNS=169.254.20.10\nFirewallMark=7\n"},
			want: []want{{id: "x", path: etcDelegates + "/x.dns-delegate", dns: []string{"192.0.2.1", "169.254.25.10", "169.254.20.10"},
				sources: []string{etcDelegates + "/x.dns-delegate:2", etcDelegates + "/x.dns-delegate:2", etcDelegates + "/x.dns-delegate:3"}}},
			warnings: []string{etcDelegates + "/x.dns-delegate:2: failed to parse DNS server string \"bogus\""},
		},
		{
			name:     "a bad section header: resolved does not load the delegate",
			files:    map[string]string{etcDelegates + "/bad.dns-delegate": "[Delegate\nDNS=169.254.25.10\n"},
			warnings: []string{etcDelegates + "/bad.dns-delegate:1: invalid section header"},
		},
		{
			name:  "a continued line and a comment inside it",
			files: map[string]string{etcDelegates + "/c.dns-delegate": "[Delegate]\nDNS=192.0.2.1 \\\n# comment\n169.254.25.10\n"},
			want: []want{{id: "c", path: etcDelegates + "/c.dns-delegate", dns: []string{"192.0.2.1", "169.254.25.10"},
				sources: []string{etcDelegates + "/c.dns-delegate:4", etcDelegates + "/c.dns-delegate:4"}}},
		},
		{
			name:  "other sections and keys are not the delegate's",
			files: map[string]string{etcDelegates + "/o.dns-delegate": "[Resolve]\nDNS=169.254.25.10\n[Delegate]\nFirstHop=1\n"},
			want:  []want{{id: "o", path: etcDelegates + "/o.dns-delegate"}},
			warnings: []string{etcDelegates + "/o.dns-delegate:1: unknown section \"Resolve\"",
				etcDelegates + "/o.dns-delegate:4: unknown key \"FirstHop\""},
		},
		{
			name:     "a name with a quote is refused",
			files:    map[string]string{etcDelegates + "/we'ird.dns-delegate": kubespray},
			warnings: []string{etcDelegates + "/we'ird.dns-delegate: not loaded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LoadDNSDelegates(nodefs.NewReader(writeDelegateTree(t, tt.files)))
			var gotW []want
			for _, d := range got.Delegates {
				w := want{id: d.ID, path: d.Path, domains: d.Domains, route: d.DefaultRoute}
				for i, s := range d.DNS {
					w.dns = append(w.dns, s.String())
					w.sources = append(w.sources, d.DNSSources[i].String())
				}
				gotW = append(gotW, w)
			}
			if diff := cmp.Diff(tt.want, gotW, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("delegates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.masked, got.Masked); diff != "" {
				t.Errorf("masked (-want +got):\n%s", diff)
			}
			if len(got.Warnings) != len(tt.warnings) {
				t.Errorf("warnings %v, want %d: %v", got.Warnings, len(tt.warnings), tt.warnings)
			}
			for i, w := range tt.warnings {
				if i < len(got.Warnings) && !strings.HasPrefix(got.Warnings[i].String(), w) {
					t.Errorf("warning %d = %q, want prefix %q", i, got.Warnings[i], w)
				}
			}
		})
	}
}

func TestRemoveDelegateServers(t *testing.T) {
	loop := func(s Server) bool { return s.Addr.String() == "169.254.25.10" || s.Addr.String() == "10.96.0.10" }
	tests := []struct {
		name  string
		in    string
		lines []int
		want  string
		err   string
	}{
		{name: "only loop: the line becomes a comment", in: "# kubespray\n[Delegate]\nDNS=169.254.25.10\nDomains=~.\n", lines: []int{3},
			want: "# kubespray\n[Delegate]\n# DNS=169.254.25.10 (loop address removed by nodedns)\nDomains=~.\n"},
		{name: "the other servers stay, in order, any spelling of the loop goes", in: "[Delegate]\r\n  DNS=192.0.2.1 169.254.25.10:53 10.96.0.10%2#x 192.0.2.2\r\n", lines: []int{2},
			want: "[Delegate]\r\n  DNS=192.0.2.1 192.0.2.2\r\n"},
		{name: "no final newline", in: "[Delegate]\nDNS=169.254.25.10 192.0.2.9", lines: []int{2}, want: "[Delegate]\nDNS=192.0.2.9"},
		{name: "a continued line is refused", in: "[Delegate]\nDNS=192.0.2.1 \\\n169.254.25.10\n", lines: []int{3}, err: "line 3 is not a one-line DNS= assignment"},
		{name: "a line that is not DNS= is refused", in: "[Delegate]\nDomains=~.\n", lines: []int{2}, err: "line 2 is not"},
		{name: "a line past the end is refused", in: "[Delegate]\n", lines: []int{5}, err: "past the end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := map[int]bool{}
			for _, l := range tt.lines {
				lines[l] = true
			}
			got, err := RemoveDelegateServers([]byte(tt.in), lines, loop)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			d := &DNSDelegate{}
			ParseDNSDelegate(d, "x", got)
			for _, s := range d.DNS {
				if loop(s) {
					t.Errorf("rewritten file still lists %s", s)
				}
			}
		})
	}
}

func TestInstalledVersion(t *testing.T) {
	for _, tt := range []struct {
		file string
		want int
	}{
		{"/usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-252.so", 252},
		{"/usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-262.so", 262},
		{"/usr/lib64/systemd/libsystemd-shared-256.11-1.fc41.so", 256},
		{"/usr/lib/aarch64-linux-gnu/systemd/libsystemd-shared-258.so", 258},
		{"/lib/systemd/libsystemd-shared-247.so", 247},
		{"/usr/lib/systemd/libsystemd-core-258.so", 0},
	} {
		if got := InstalledVersion(nodefs.NewReader(writeDelegateTree(t, map[string]string{tt.file: ""}))); got != tt.want {
			t.Errorf("%s: version %d, want %d", tt.file, got, tt.want)
		}
	}
}

func TestDelegateOverridePath(t *testing.T) {
	for in, want := range map[string]string{
		libDelegates + "/k.dns-delegate":          etcDelegates + "/k.dns-delegate",
		runDelegates + "/k.dns-delegate.d/a.conf": etcDelegates + "/k.dns-delegate.d/a.conf",
		etcDelegates + "/k.dns-delegate":          etcDelegates + "/k.dns-delegate",
		"/etc/systemd/resolved.conf":              "",
	} {
		if got, _ := DelegateOverridePath(in); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

func FuzzParseDNSDelegate(f *testing.F) {
	f.Add([]byte(kubespray))
	f.Add([]byte("[Delegate]\nDNS=192.0.2.1 \\\n# c\n169.254.25.10:53%eth0#x [fd00::1]:853\nDNS=\nDomains=~. a.b\nDefaultRoute=no\n[X-Y]\nz=1\n"))
	f.Add([]byte("\xef\xbb\xbf[Delegate]\r\nDNS=169.254.25.10\x00DNS=10.96.0.10"))
	const p = "/etc/systemd/dns-delegate.d/f.dns-delegate"
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &DNSDelegate{ID: "f", Path: p}
		ws, _ := ParseDNSDelegate(d, p, data)
		for _, w := range ws {
			if w.Path != p || w.Line < 1 {
				t.Errorf("warning without file:line: %+v", w)
			}
		}
		if len(d.DNS) != len(d.DNSSources) {
			t.Fatalf("%d servers, %d sources", len(d.DNS), len(d.DNSSources))
		}
		lines := map[int]bool{}
		for i, s := range d.DNS {
			if !serverAddrValid(s.Addr) {
				t.Errorf("invalid server kept: %v", s)
			}
			if d.DNSSources[i].Path != p || d.DNSSources[i].Line < 1 {
				t.Errorf("server %v without file:line", s)
			}
			lines[d.DNSSources[i].Line] = true
		}
		// Removing every server from the lines that set them leaves a file that sets none of them,
		// or is refused.
		out, err := RemoveDelegateServers(data, lines, func(Server) bool { return true })
		if err != nil {
			return
		}
		d2 := &DNSDelegate{}
		ParseDNSDelegate(d2, p, out)
		for _, s := range d2.DNS {
			for _, s0 := range d.DNS {
				if s.Addr == s0.Addr && s.Port == s0.Port {
					t.Errorf("server %v still set after removal:\n%q\n->\n%q", s, data, out)
				}
			}
		}
	})
}

// TestLoadDelegates: delegates are read on systemd 258 and later and when the version is unknown,
// never on an older systemd; their watches cover the drop-in directory of each delegate found, and
// the library that names the version whatever was found.
func TestLoadDelegates(t *testing.T) {
	const delegate = "/etc/systemd/dns-delegate.d/k.dns-delegate"
	for _, tt := range []struct {
		lib     string
		version int
		read    bool
	}{
		{"/usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-257.so", 257, false},
		{"/usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-258.so", 258, true},
		{"", 0, true},
	} {
		files := map[string]string{delegate: "[Delegate]\nDNS=10.0.0.9\n"}
		if tt.lib != "" {
			files[tt.lib] = ""
		}
		d, v := LoadDelegates(nodefs.NewReader(writeDelegateTree(t, files)))
		if v != tt.version || (d != nil) != tt.read {
			t.Errorf("%q: version %d, delegates %+v; want %d, read %v", tt.lib, v, d, tt.version, tt.read)
			continue
		}
		dropIns, lib := false, false
		for _, w := range d.Watches() {
			dropIns = dropIns || w.Dir == DNSDelegateDropInDir(etcDelegates, "k")
			lib = lib || (w.Dir == "/usr/lib/x86_64-linux-gnu/systemd" && w.Match("libsystemd-shared-258.so"))
		}
		if dropIns != tt.read || !lib {
			t.Errorf("%q: watches the delegate's drop-ins %v (want %v), the library %v", tt.lib, dropIns, tt.read, lib)
		}
	}
}
