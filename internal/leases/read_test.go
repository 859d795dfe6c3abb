package leases

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/golden"

	"github.com/google/go-cmp/cmp"
	"github.com/nodedns/nodedns/internal/nodefs"
)

// copyRoot copies testdata/root (a small node: networkd, dhclient, dhclient6
// and NetworkManager leases, sys/class/net/*/ifindex) into a fresh root.
func copyRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata/root")); err != nil {
		t.Fatal(err)
	}
	return root
}

// writeFile writes a node file under root, creating its directories.
func writeFile(t *testing.T, root, nodePath string, data []byte) {
	t.Helper()
	p := filepath.Join(root, nodePath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// leaseView is what the golden file records of a lease, with the two derived
// answers nodedns uses.
type leaseView struct {
	Lease
	Current bool     `json:"current"`
	Domains []string `json:"domains"`
}

type problemView struct {
	Path string
	Err  string
}

func TestReadGolden(t *testing.T) {
	root := copyRoot(t)
	ls, probs := Load(nodefs.NewReader(root))

	var view struct {
		Leases   []leaseView
		Problems []problemView
	}
	for _, l := range ls {
		view.Leases = append(view.Leases, leaseView{l, l.Current(now), l.Domains()})
	}
	for _, p := range probs {
		view.Problems = append(view.Problems, problemView{p.Path, p.Msg})
	}
	got, err := json.MarshalIndent(view, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden.Check(t, "testdata/read.golden", got)
}

// TestLoad checks, independently of the golden file, the rules Load
// implements.
func TestLoad(t *testing.T) {
	root := copyRoot(t)
	ls, probs := Load(nodefs.NewReader(root))

	type summary struct {
		Path      string
		Line      int
		Client    Client
		Interface string
		IfIndex   int
		Address   string
		Current   bool
	}
	var got []summary
	for _, l := range ls {
		a := ""
		if l.Address.IsValid() {
			a = l.Address.String()
		}
		got = append(got, summary{l.Path, l.Line, l.Client, l.Interface, l.IfIndex, a, l.Current(now)})
	}
	want := []summary{
		// networkd: index 2 is eth0 in sys/class/net; index 9 is no known
		// link, and its lease still counts.
		{"/run/systemd/netif/leases/2", 0, Networkd, "eth0", 2, "192.168.50.123/24", true},
		{"/run/systemd/netif/leases/9", 0, Networkd, "", 9, "10.20.0.5/16", true},
		// NetworkManager, dhclient plugin: expires at 08:01, still current at 08:00.
		{"/var/lib/NetworkManager/dhclient-0f6c2d4e-1a2b-4c3d-8e9f-a0b1c2d3e4f5-br-lan.lease", 2, NetworkManager, "br-lan", 0, "10.1.1.50/24", true},
		// NetworkManager, internal (nettools) client: only ADDRESS.
		{"/var/lib/NetworkManager/internal-5b0d1a8e-7c43-3e6e-9a1b-2f0c4d5e6a7b-eth2.lease", 0, NetworkManager, "eth2", 0, "10.0.0.42/32", true},
		// dhclient: the expired eth1 lease (line 17) and the last eth0
		// lease (line 29); the first eth0 lease (line 2) lost to it.
		{"/var/lib/dhcp/dhclient.leases", 17, Dhclient, "eth1", 0, "172.16.5.20/20", false},
		{"/var/lib/dhcp/dhclient.leases", 29, Dhclient, "eth0", 0, "192.168.50.123/24", true},
		{"/var/lib/dhcp/dhclient6.eth0.leases", 2, Dhclient, "eth0", 0, "2001:db8:50::123/128", true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load leases mismatch (-want +got):\n%s", diff)
	}

	// The truncated dhclient file is skipped whole and reported.
	var gotProbs []problemView
	for _, p := range probs {
		gotProbs = append(gotProbs, problemView{p.Path, p.Msg})
	}
	wantProbs := []problemView{{
		"/var/lib/dhclient/dhclient-ens5.leases",
		"/var/lib/dhclient/dhclient-ens5.leases:1: unexpected end of file: lease block not closed",
	}}
	if diff := cmp.Diff(wantProbs, gotProbs); diff != "" {
		t.Errorf("Load problems mismatch (-want +got):\n%s", diff)
	}

	// Every lease file counts for the DHCP search domains, the expired
	// eth1 lease included.
	var domains []string
	for _, l := range ls {
		domains = append(domains, l.Domains()...)
	}
	for _, d := range []string{"example.org", "corp.example", "lab.example", "ci.example.net", "v6.example.org", "home.example"} {
		if !strings.Contains(" "+strings.Join(domains, " ")+" ", " "+d+" ") {
			t.Errorf("domain %q missing from %q", d, domains)
		}
	}
	if strings.Contains(strings.Join(domains, " "), "old.example") {
		t.Errorf("domains %q include old.example from a lease a later one replaced", domains)
	}
}

func TestLoadProblems(t *testing.T) {
	big := bytes.Repeat([]byte("#"), MaxFileSize+1)
	exact := append([]byte("lease { interface \"eth0\"; }\n"), bytes.Repeat([]byte("#"), MaxFileSize-28)...)
	if len(exact) != MaxFileSize {
		t.Fatalf("exact is %d bytes", len(exact))
	}
	good := []byte("# This is private data. Do not parse.\nADDRESS=10.0.0.5\nNETMASK=255.255.255.0\n")

	tests := []struct {
		name      string
		setup     func(t *testing.T, root string)
		wantPaths []string // Path of every lease Load returns
		wantProbs []problemView
	}{
		{
			name:  "empty root",
			setup: func(t *testing.T, root string) {},
		},
		{
			name: "oversize file refused, others still read",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "/var/lib/dhcp/big.leases", big)
				writeFile(t, root, "/run/systemd/netif/leases/2", good)
			},
			wantPaths: []string{"/run/systemd/netif/leases/2"},
			wantProbs: []problemView{{"/var/lib/dhcp/big.leases", "read /var/lib/dhcp/big.leases: 1048577 bytes, over the 1 MiB limit of a lease file"}},
		},
		{
			name: "a file of exactly 1 MiB is read",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "/var/lib/dhclient/exact.leases", exact)
			},
			wantPaths: []string{"/var/lib/dhclient/exact.leases"},
		},
		{
			name: "garbage and binary files reported with file and line",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "/run/systemd/netif/leases/2", []byte("ADDRESS=10.0.0.5\nDNS=garbage\n"))
				writeFile(t, root, "/run/systemd/netif/leases/3", good)
				writeFile(t, root, "/var/lib/NetworkManager/internal-x-eth0.lease", []byte("ADDRESS=\xff\x01\x02"))
			},
			wantPaths: []string{"/run/systemd/netif/leases/3"},
			wantProbs: []problemView{
				{"/run/systemd/netif/leases/2", `/run/systemd/netif/leases/2:2: DNS: invalid address "garbage"`},
				{"/var/lib/NetworkManager/internal-x-eth0.lease", "/var/lib/NetworkManager/internal-x-eth0.lease:1: binary data (not UTF-8)"},
			},
		},
		{
			// parse_env_file: a line without '=' is no assignment, and reading stops at a NUL.
			name: "garbage networkd ignores is no problem",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "/run/systemd/netif/leases/2", []byte("ADDRESS=10.0.0.5\ngarbage\n"))
				writeFile(t, root, "/var/lib/NetworkManager/internal-x-eth0.lease", []byte("\x00\x01\x02"))
			},
			wantPaths: []string{"/run/systemd/netif/leases/2", "/var/lib/NetworkManager/internal-x-eth0.lease"},
		},
		{
			name: "a FIFO is refused without blocking",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "/var/lib/dhcp/keep.leases", nil)
				if err := syscall.Mkfifo(filepath.Join(root, "/var/lib/dhcp/fifo.leases"), 0o644); err != nil {
					t.Skipf("mkfifo: %v", err)
				}
			},
			wantProbs: []problemView{{"/var/lib/dhcp/fifo.leases", "read /var/lib/dhcp/fifo.leases: not a regular file but a named pipe"}},
		},
		{
			name: "skipped: other names, hidden temp files, directories",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "/run/systemd/netif/leases/.#2Ab12Cd", []byte("junk"))
				writeFile(t, root, "/run/systemd/netif/leases/eth0", []byte("junk"))
				writeFile(t, root, "/run/systemd/netif/leases/02", []byte("junk"))
				writeFile(t, root, "/var/lib/dhcp/dhclient.conf", []byte("junk"))
				writeFile(t, root, "/var/lib/dhcp/dhclient.leases~", []byte("junk"))
				writeFile(t, root, "/var/lib/NetworkManager/NetworkManager.state", []byte("junk"))
				writeFile(t, root, "/var/lib/NetworkManager/timestamps", []byte("junk"))
				if err := os.MkdirAll(filepath.Join(root, "/var/lib/dhcp/dir.leases"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "a lease directory that is a file",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "/var/lib/dhclient", []byte("junk"))
			},
			wantProbs: []problemView{{"/var/lib/dhclient", "list /var/lib/dhclient: not a directory"}},
		},
		{
			name: "symlinked lease file is followed",
			setup: func(t *testing.T, root string) {
				writeFile(t, root, "/var/lib/dhcp/real", []byte(lease4(`interface "eth0";`)))
				if err := os.Symlink("real", filepath.Join(root, "/var/lib/dhcp/dhclient.eth0.leases")); err != nil {
					t.Fatal(err)
				}
			},
			wantPaths: []string{"/var/lib/dhcp/dhclient.eth0.leases"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			tt.setup(t, root)
			ls, probs := Load(nodefs.NewReader(root))
			var paths []string
			for _, l := range ls {
				paths = append(paths, l.Path)
			}
			if diff := cmp.Diff(tt.wantPaths, paths); diff != "" {
				t.Errorf("lease paths mismatch (-want +got):\n%s", diff)
			}
			var gotProbs []problemView
			for _, p := range probs {
				gotProbs = append(gotProbs, problemView{p.Path, p.Msg})
				if strings.Contains(p.Msg, root) {
					t.Errorf("problem %q names the root %s, not the node path", p.Msg, root)
				}
			}
			if diff := cmp.Diff(tt.wantProbs, gotProbs); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadLastLeasePerInterface: dhclient's last lease per interface wins,
// DHCPv4 and DHCPv6 separately, and leases without an interface count as one
// more "interface".
func TestLoadLastLeasePerInterface(t *testing.T) {
	root := t.TempDir()
	file := strings.Join([]string{
		`lease { interface "eth0"; fixed-address 10.0.0.1; }`,                  // 1: replaced by line 3
		`lease6 { interface "eth0"; option dhcp6.name-servers 2001:db8::53; }`, // 2: kept (v6)
		`lease { interface "eth0"; fixed-address 10.0.0.2; }`,                  // 3: kept
		`lease { fixed-address 10.0.0.3; }`,                                    // 4: replaced by line 5
		`lease { fixed-address 10.0.0.4; }`,                                    // 5: kept
		`lease { interface "eth1"; fixed-address 10.0.1.1; }`,                  // 6: kept
	}, "\n")
	writeFile(t, root, "/var/lib/dhcp/dhclient.leases", []byte(file))
	ls, probs := Load(nodefs.NewReader(root))
	if len(probs) != 0 {
		t.Fatalf("problems: %v", probs)
	}
	var lines []int
	for _, l := range ls {
		lines = append(lines, l.Line)
	}
	if diff := cmp.Diff([]int{2, 3, 5, 6}, lines); diff != "" {
		t.Errorf("kept lease lines mismatch (-want +got):\n%s", diff)
	}
}

func TestNMInterface(t *testing.T) {
	tests := []struct{ name, want string }{
		{"internal-5b0d1a8e-7c43-3e6e-9a1b-2f0c4d5e6a7b-eth0.lease", "eth0"},
		{"dhclient-5b0d1a8e-7c43-3e6e-9a1b-2f0c4d5e6a7b-br-lan.lease", "br-lan"},
		{"dhclient6-5b0d1a8e-7c43-3e6e-9a1b-2f0c4d5e6a7b-enp0s3.lease", "enp0s3"},
		{"internal-5b0d1a8e-7c43-3e6e-9a1b-2f0c4d5e6a7b-.lease", ""},
		{"internal-not-a-uuid-eth0.lease", ""},
		{"internal-5b0d1a8e-7c43-3e6e-9a1b-2f0c4d5e6a7z-eth0.lease", ""},
		{"lease.lease", ""},
	}
	for _, tt := range tests {
		if got := nmInterface(tt.name); got != tt.want {
			t.Errorf("nmInterface(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestLooksDhclient(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"", false},
		{"# This is private data. Do not parse.\nADDRESS=10.0.0.1\n", false},
		{"\n# x\n  lease {\n", true},
		{"lease{", true},
		{"lease6 {", true},
		{"default-duid \"\\000\";\nlease {", true},
		{"LEASE=1\n", false},
		{"leases=1\n", false},
	}
	for _, tt := range tests {
		if got := looksDhclient([]byte(tt.in)); got != tt.want {
			t.Errorf("looksDhclient(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestWatches: the daemon watches every directory Load and LoadDhclientConf read, for the names
// they read there, and a lease counts as written once it parses.
func TestWatches(t *testing.T) {
	type seen struct {
		dir   string
		match []string
	}
	names := []string{"2", "eth0.leases", "internal-x-eth0.lease", "dhclient.conf", "x.conf"}
	var got []seen
	for _, w := range Watches() {
		s := seen{dir: w.Dir}
		for _, n := range names {
			if w.Match(n) {
				s.match = append(s.match, n)
			}
		}
		got = append(got, s)
	}
	want := []seen{
		{NetworkdLeaseDir, []string{"2"}},
		{"/var/lib/dhcp", []string{"eth0.leases"}},
		{"/var/lib/dhclient", []string{"eth0.leases"}},
		{NetworkManagerLeaseDir, []string{"internal-x-eth0.lease"}},
		{"/etc/dhcp", []string{"dhclient.conf"}},
		{"/etc", []string{"dhclient.conf"}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(seen{})); diff != "" {
		t.Errorf("Watches (-want +got):\n%s", diff)
	}
	ws := Watches()
	if err := ws[0].Complete([]byte("ADDRESS=10.0.0.5\n")); err != nil {
		t.Errorf("a networkd lease is not complete: %v", err)
	}
	if err := ws[1].Complete([]byte("lease {\n  interface \"eth0\";\n")); err == nil {
		t.Error("a dhclient lease cut in the middle of its block is complete")
	}
}
