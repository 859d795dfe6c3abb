package node

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/config"
	"github.com/nodedns/nodedns/internal/nodefs"
)

func TestParseKubelet(t *testing.T) {
	tests := []struct {
		name, in string
		want     Kubelet
		wantErr  string
	}{
		{
			name: "kubespray",
			in:   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDomain: cluster.local\nclusterDNS:\n- 169.254.25.10\nresolvConf: \"/run/systemd/resolve/resolv.conf\"\nmaxPods: 110\n",
			want: Kubelet{Path: "k", Exists: true, ResolvConf: "/run/systemd/resolve/resolv.conf", ResolvConfSet: true,
				ClusterDNS: []netip.Addr{netip.MustParseAddr("169.254.25.10")}, ClusterDomain: "cluster.local"},
		},
		{name: "kubelet default resolvConf", in: "kind: KubeletConfiguration\n", want: Kubelet{Path: "k", Exists: true, ResolvConf: "/etc/resolv.conf"}},
		{name: "resolvConf disabled", in: "resolvConf: \"\"\n", want: Kubelet{Path: "k", Exists: true, ResolvConf: "", ResolvConfSet: true}},
		{name: "bad clusterDNS", in: "clusterDNS: [coredns]\n", wantErr: `k:1: clusterDNS[0]: "coredns" is not an IP address`},
		{name: "bad clusterDNS line", in: "kind: KubeletConfiguration\nclusterDNS:\n- 169.254.25.10\n- 169.254.99.x\n", wantErr: `k:4: clusterDNS[1]: "169.254.99.x" is not an IP address`},
		{name: "wrong kind", in: "kind: Pod\n", wantErr: `k:1: kind is "Pod"`},
		{name: "not yaml", in: "clusterDNS: [\n", wantErr: "k:1: YAML: did not find expected node content"},
		{name: "yaml error line", in: "kind: KubeletConfiguration\nclusterDNS:\n- 169.254.99.99\n  resolvConf: /etc/resolv.conf\n", wantErr: "k:4: YAML: "},
		{name: "type error line", in: "kind: KubeletConfiguration\n\nresolvConf: [a, b]\n", wantErr: "k:3: YAML: cannot unmarshal"},
		{name: "clusterDNS not a list", in: "clusterDNS: 169.254.25.10\n", wantErr: "k:1: clusterDNS is not a list"},
		{name: "not a mapping", in: "- a\n", wantErr: "k:1: not a YAML mapping"},
		{name: "alias", in: "x: &a [169.254.25.10]\nclusterDNS: *a\n", want: Kubelet{Path: "k", Exists: true, ResolvConf: "/etc/resolv.conf", ClusterDNS: []netip.Addr{netip.MustParseAddr("169.254.25.10")}}},
		{name: "empty", in: "", want: Kubelet{Path: "k", Exists: true, ResolvConf: "/etc/resolv.conf"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKubelet([]byte(tc.in), "k")
			if tc.wantErr != "" {
				if err == nil || len(err.Error()) < len(tc.wantErr) || err.Error()[:len(tc.wantErr)] != tc.wantErr {
					t.Fatalf("err = %v, want prefix %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseKubelet(f *testing.F) {
	f.Add([]byte("kind: KubeletConfiguration\nclusterDNS:\n- 169.254.25.10\nresolvConf: /etc/resolv.conf\n"))
	f.Add([]byte("clusterDNS: [1, {a: b}]\nresolvConf: [x]\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKubelet(data, "/var/lib/kubelet/config.yaml")
		if err != nil {
			return
		}
		for _, a := range k.ClusterDNS {
			if !a.IsValid() {
				t.Fatalf("invalid clusterDNS address from %q", data)
			}
		}
	})
}

func TestUnitValues(t *testing.T) {
	unit := "[Unit]\nBefore=a.service\n# Before=commented.service\nBefore=kubelet.service b.service\n[Service]\nBefore=not-unit.service\n[Unit]\nAfter=x\n"
	if diff := cmp.Diff([]string{"a.service", "kubelet.service", "b.service"}, unitValues([]byte(unit), "Unit", "Before")); diff != "" {
		t.Error(diff)
	}
	// An empty assignment resets the list, as in systemd.
	if got := unitValues([]byte("[Unit]\nBefore=a\nBefore=\nBefore=b\n"), "Unit", "Before"); !cmp.Equal(got, []string{"b"}) {
		t.Errorf("reset: %v", got)
	}
}

func FuzzUnitValues(f *testing.F) {
	f.Add([]byte("[Unit]\nBefore=kubelet.service\n"))
	f.Add([]byte("[Unit\nBefore\n=\n[]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range unitValues(data, "Unit", "Before") {
			if v == "" {
				t.Fatal("empty value")
			}
		}
	})
}

// TestObserveUnitInsideRoot: the enable symlink is absolute, as systemctl makes it, and must be
// followed inside the root, not on the host.
func TestObserveUnitInsideRoot(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "lib/systemd/system"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "etc/systemd/system/multi-user.target.wants"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "etc/systemd/system/nodedns.service.d"), 0o755))
	must(os.WriteFile(filepath.Join(root, "lib/systemd/system/nodedns.service"), []byte("[Unit]\nBefore=kubelet.service\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "etc/systemd/system/nodedns.service.d/10-local.conf"), []byte("[Unit]\nBefore=containerd.service\n"), 0o644))
	must(os.Symlink("/lib/systemd/system/nodedns.service", filepath.Join(root, "etc/systemd/system/multi-user.target.wants/nodedns.service")))
	s := Observe(nodefs.NewReader(root), config.Default(), time.Now())
	want := Unit{Path: "/lib/systemd/system/nodedns.service", Enabled: true, WantedBy: []string{"multi-user.target"}, Before: []string{"kubelet.service", "containerd.service"}}
	if diff := cmp.Diff(want, s.Unit); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
