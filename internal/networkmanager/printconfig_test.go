package networkmanager_test

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/networkmanager"
	"github.com/nodedns/nodedns/internal/testutil/nstest"
)

// TestPrintConfigAgrees compares LoadConfig with the real `NetworkManager --print-config` 1.42 on
// the same node: the files it names in their order, every effective value, and, for files NM
// refuses, its exit 7 and its message.
func TestPrintConfigAgrees(t *testing.T) { nstest.Suites(t, testPrintConfigAgrees) }

func testPrintConfigAgrees(t *testing.T, suite nstest.Suite) {
	nm := nstest.StartNetworkManager(t, nstest.NMOptions{Suite: suite, NoStart: true})
	w := func(server, key string) string {
		return "[global-dns-domain-*]\nservers=" + server + "\n[order]\n" + key + "=" + server + "\n"
	}
	files := map[string]string{
		"/usr/lib/NetworkManager/conf.d/10-lib.conf":  w("10.0.0.1", "lib10"),
		"/usr/lib/NetworkManager/conf.d/90-lib.conf":  w("10.0.0.2", "lib90"),
		"/usr/lib/NetworkManager/conf.d/50-same.conf": w("10.0.0.3", "libsame"),
		"/run/NetworkManager/conf.d/50-same.conf":     w("10.0.0.4", "runsame"),
		"/run/NetworkManager/conf.d/95-run.conf":      w("10.0.0.5", "run95"),
		"/run/NetworkManager/conf.d/40-shadow.conf":   w("10.0.0.6", "run40"),
		"/etc/NetworkManager/conf.d/40-shadow.conf":   w("10.0.0.7", "etc40"),
		"/etc/NetworkManager/conf.d/05-etc.conf":      w("10.0.0.8", "etc05") + "[global-dns]\nsearches = a.example, b.example\\, c\n",
		"/etc/NetworkManager/conf.d/.hidden.conf":     w("10.0.0.9", "hidden"),
		"/etc/NetworkManager/conf.d/noext":            w("10.0.0.10", "noext"),
		"/etc/NetworkManager/conf.d/07-off.conf":      "[.config]\nenable=false\n" + w("10.0.0.12", "off"),
		"/etc/NetworkManager/conf.d/08-dup.conf":      "[order]\ndup=1\ndup=2  \n[global-dns]\noptions=ndots:2\n[order]\ndup2=3\n",
	}
	for p, content := range files {
		nm.WriteFile(t, p, content, 0o644)
	}
	base, err := os.ReadFile(nm.Path(networkmanager.MainConfPath))
	if err != nil {
		t.Fatal(err)
	}
	nm.WriteFile(t, networkmanager.MainConfPath, string(base)+"[order]\nmain=main\n[global-dns-domain-*]\nservers=10.0.0.11\n", 0o644)

	c, err := networkmanager.LoadConfig(nodeFS(nm))
	if err != nil {
		t.Fatal(err)
	}
	out, code := nm.PrintConfig(t)
	if code != 0 {
		t.Fatalf("--print-config exit %d:\n%s", code, out)
	}
	first, rest, _ := strings.Cut(out, "\n")
	const prefix = "# NetworkManager configuration: "
	// 1.42 prints Description's form; 1.58 the same files in the same order as
	// "MAIN, DIR/{a,b}, DIR/c" (measured on 1.58.1).
	if !nm.VersionAtLeast(t, 1, 43) {
		if want := prefix + c.Description(); first != want {
			t.Errorf("description:\n got %s\nwant %s", first, want)
		}
	}
	if got, want := describedFiles(t, strings.TrimPrefix(first, prefix)), describedFiles(t, c.Description()); !slices.Equal(got, want) {
		t.Errorf("files NM names:\n got %q\nwant %q\n(%s)", got, want, first)
	}
	printed, err := networkmanager.ParseKeyFile("print-config", []byte(rest))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range c.Groups() {
		for _, k := range c.Keys(g) {
			v, _ := c.Get(g, k)
			e, ok := printed.Get(g, k)
			if !ok {
				t.Errorf("[%s] %s=%q (%s): NM does not print it", g, k, v.Raw, v.Source)
			} else if e.Value != v.Raw {
				t.Errorf("[%s] %s: NM %q, nodedns %q (%s)", g, k, e.Value, v.Raw, v.Source)
			}
		}
	}
	for _, g := range printed.Groups {
		for _, e := range g.Entries {
			if _, ok := c.Get(g.Name, e.Key); !ok && g.Name != "main" {
				t.Errorf("NM prints [%s] %s=%q; nodedns has no such key", g.Name, e.Key, e.Value)
			}
		}
	}
	t.Logf("--print-config:\n%s", out)

	// Files NM refuses, one at a time.
	for _, p := range []string{"/usr/lib/NetworkManager/conf.d/90-lib.conf", "/run/NetworkManager/conf.d/95-run.conf"} {
		nm.RemoveFile(t, p)
	}
	bad := map[string]string{
		"not a key":      "[global-dns-domain-*]\nservers=10.66.0.53\nthis is not a key\n",
		"semicolon":      "; comment\n[main]\n",
		"no group":       "dns=default\n[main]\n",
		"unclosed group": "[global-dns-domain-*]\nservers=169.254.25.10\n[bad\n",
		"empty group":    "[]\n",
		"key name":       "[g]\na]b=v\n",
		"encoding":       "[g]\nEncoding=latin1\n",
	}
	for name, content := range bad {
		t.Run(name, func(t *testing.T) {
			p := networkmanager.EtcConfDir + "/50-bad.conf"
			nm.WriteFile(t, p, content, 0o644)
			defer nm.RemoveFile(t, p)
			checkRefused(t, nm)
		})
	}
	t.Run("directory", func(t *testing.T) {
		p := nm.Path(networkmanager.EtcConfDir + "/60-dir.conf")
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
		checkRefused(t, nm)
	})
	t.Run("dangling symlink", func(t *testing.T) {
		p := nm.Path(networkmanager.EtcConfDir + "/70-gone.conf")
		if err := os.Symlink("/nonexistent.conf", p); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
		checkRefused(t, nm)
	})
}

func checkRefused(t *testing.T, nm *nstest.NetworkManager) {
	t.Helper()
	_, err := networkmanager.LoadConfig(nodeFS(nm))
	var pe *networkmanager.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("LoadConfig = %v, want a *ParseError", err)
	}
	out, code := nm.PrintConfig(t)
	if want := "Failed to read configuration: " + pe.NMMessage(); code != 7 || strings.TrimRight(out, "\n") != want {
		t.Errorf("--print-config exit %d:\n%s\nnodedns (exit 7 expected):\n%s", code, out, want)
	}
}

// describedFiles reads the paths out of --print-config's description line, in either form:
// 1.42's "MAIN (lib: a, b) (run: c) (etc: d)" or 1.58's "MAIN, LIBDIR/{a,b}, RUNDIR/c, ETCDIR/{d}".
func describedFiles(t *testing.T, line string) []string {
	t.Helper()
	dirs := map[string]string{"lib": networkmanager.SystemConfDir, "run": networkmanager.RunConfDir, "etc": networkmanager.EtcConfDir}
	if m := regexp.MustCompile(`^(\S+)((?: \((?:lib|run|etc): [^)]*\))*)$`).FindStringSubmatch(line); m != nil {
		files := []string{m[1]}
		for _, g := range regexp.MustCompile(`\((lib|run|etc): ([^)]*)\)`).FindAllStringSubmatch(m[2], -1) {
			for _, name := range strings.Split(g[2], ", ") {
				files = append(files, dirs[g[1]]+"/"+name)
			}
		}
		return files
	}
	var files []string
	for _, item := range regexp.MustCompile(`[^,{]+(?:\{[^}]*\})?`).FindAllString(line, -1) {
		item = strings.TrimSpace(item)
		dir, names, ok := strings.Cut(item, "{")
		if !ok {
			files = append(files, item)
			continue
		}
		for _, name := range strings.Split(strings.TrimSuffix(names, "}"), ",") {
			files = append(files, dir+name)
		}
	}
	if len(files) == 0 {
		t.Fatalf("no files in the description %q", line)
	}
	return files
}
