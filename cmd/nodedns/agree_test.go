package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodedns/nodedns/internal/networkmanager"
)

// fixtureTrees are every node tree in the repository that check and plan run on.
var fixtureTrees = []string{
	"testdata/seeds/001", "testdata/seeds/002", "testdata/seeds/003",
	"testdata/kubespray/dhclient", "testdata/kubespray/dhclient-loop-only",
	"testdata/kubespray/networkmanager", "testdata/kubespray/resolved",
	"../../examples/kubespray-host-resolvconf",
}

// TestCheckAndPlanAgreeOnEveryTree (docs/contract.md "Check and plan agree"): a check never says ok
// about what the plan is about to change. Whatever plan removes from the host's search list (in
// /etc/resolv.conf, or through NetworkManager's override) resolvconf.search flags; whatever
// nameserver it removes, resolvconf.loop flags.
func TestCheckAndPlanAgreeOnEveryTree(t *testing.T) {
	for _, tree := range fixtureTrees {
		t.Run(strings.TrimPrefix(tree, "testdata/"), func(t *testing.T) {
			root := t.TempDir()
			copyDir(t, tree, root)
			rep, _ := checkReport(t, root)
			status := map[string]string{}
			for _, c := range rep.Checks {
				status[c.ID] = string(c.Status) + ": " + c.Message
			}
			r := nodedns(t, "--root", root, "plan", "-o", "json", "--full")
			var plan struct {
				Changes []struct {
					Path   string `json:"path"`
					Target string `json:"target"`
					Diff   string `json:"diff"`
				} `json:"changes"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil {
				t.Fatalf("plan -o json: %v\n%s", err, r.stdout)
			}
			for _, c := range plan.Changes {
				var removedSearch, removedNS, nmSearches []string
				for _, line := range strings.Split(c.Diff, "\n") {
					if !strings.HasPrefix(line, "-") || strings.HasPrefix(line, "---") {
						continue
					}
					f := strings.Fields(strings.TrimPrefix(line, "-"))
					if len(f) < 2 {
						continue
					}
					switch f[0] {
					case "search", "domain":
						removedSearch = append(removedSearch, f[1:]...)
					case "nameserver":
						removedNS = append(removedNS, f[1])
					}
				}
				if c.Path == networkmanager.NodeDNSConfPath {
					for _, line := range strings.Split(c.Diff, "\n") {
						if strings.HasPrefix(line, "+searches=") {
							nmSearches = append(nmSearches, line)
						}
					}
				}
				isResolv := c.Path == "/etc/resolv.conf" || c.Target == "/etc/resolv.conf"
				if isResolv && len(removedSearch) > 0 && strings.HasPrefix(status["resolvconf.search"], "ok") {
					t.Errorf("plan removes search domains %v from %s, but check says resolvconf.search %s", removedSearch, c.Path, status["resolvconf.search"])
				}
				if isResolv && len(removedNS) > 0 && strings.HasPrefix(status["resolvconf.loop"], "ok") {
					t.Errorf("plan removes nameservers %v from %s, but check says resolvconf.loop %s", removedNS, c.Path, status["resolvconf.loop"])
				}
				if len(nmSearches) > 0 && nmHasSearch(t, root) && strings.HasPrefix(status["resolvconf.search"], "ok") {
					t.Errorf("plan sets %v in NetworkManager's override, but check says resolvconf.search %s", nmSearches, status["resolvconf.search"])
				}
			}
		})
	}
}

// nmHasSearch reports whether the tree's /etc/resolv.conf has a search list (what NetworkManager's
// override would empty).
func nmHasSearch(t *testing.T, root string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "etc/resolv.conf"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && (f[0] == "search" || f[0] == "domain") {
			return true
		}
	}
	return false
}
