package networkmanager_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestFactsPrintConfigWritesIntern: `NetworkManager --print-config` loads the configuration as NM
// does, and NM 1.42.4 then rewrites NetworkManager-intern.conf: with a conf.d that sets global DNS
// it drops a global DNS set over D-Bus from the file, while the running NM keeps using it. A
// validation run must therefore get a copy of the intern file (--intern-config), never the real
// one.
func TestFactsPrintConfigWritesIntern(t *testing.T) {
	nstest.Suites(t, testFactsPrintConfigWritesIntern)
}

func testFactsPrintConfigWritesIntern(t *testing.T, suite nstest.Suite) {
	nm := nstest.StartNetworkManager(t, nstest.NMOptions{Suite: suite})
	c := dialNM(t, nm)
	set := &networkmanager.GlobalDNS{Searches: []string{"corp.example"},
		Domains: []networkmanager.GlobalDNSDomain{{Name: "*", Servers: []string{"169.254.25.10", "10.66.0.53"}}}}
	if err := c.SetGlobalDNS(context.Background(), set); err != nil {
		t.Fatal(err)
	}
	internPath := nm.Path(networkmanager.InternConfPath)
	intern := mustRead(t, internPath)
	cfg, err := networkmanager.LoadConfig(nodeFS(nm))
	if err != nil || cfg.InternGlobalDNS() == nil {
		t.Fatalf("the D-Bus global DNS is not in the intern file (%v):\n%s", err, intern)
	}

	if out, code := nm.PrintConfig(t); code != 0 || mustRead(t, internPath) != intern {
		t.Fatalf("--print-config of the node as it is: exit %d, intern file changed:\n%s", code, out)
	}

	// A candidate conf.d that sets global DNS, as nodedns validates zz-nodedns.conf.
	dir := filepath.Join(nm.Node.Dir(), "conf.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zz-nodedns.conf"), []byte("[global-dns-domain-*]\nservers=10.66.0.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(nm.Node.Dir(), "intern-copy.conf")
	if err := os.WriteFile(copyPath, []byte(intern), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := nm.PrintConfig(t, "--config-dir="+dir, "--intern-config="+copyPath); code != 0 {
		t.Fatalf("--print-config with a copy of the intern file: exit %d\n%s", code, out)
	}
	if got := mustRead(t, internPath); got != intern {
		t.Errorf("--print-config with --intern-config changed the real intern file:\n%s", got)
	}
	if got := mustRead(t, copyPath); got == intern {
		t.Errorf("--print-config left the copy as it was: the fact below may no longer hold")
	}

	if out, code := nm.PrintConfig(t, "--config-dir="+dir); code != 0 {
		t.Fatalf("--print-config: exit %d\n%s", code, out)
	}
	cfg, err = networkmanager.LoadConfig(nodeFS(nm))
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.InternGlobalDNS(); g != nil {
		t.Errorf("--print-config kept the D-Bus global DNS in the real intern file: %+v", g)
	}
	// NM itself still runs with it.
	if got := globalServers(t, c); !cmp.Equal(got, []string{"169.254.25.10", "10.66.0.53"}) {
		t.Errorf("GlobalDnsConfiguration after --print-config: %v", got)
	}
}
