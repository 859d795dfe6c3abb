package kubelet

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     Config
		wantErr  string
	}{
		{
			name: "kubespray",
			in:   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDomain: cluster.local\nclusterDNS:\n- 169.254.25.10\nresolvConf: \"/run/systemd/resolve/resolv.conf\"\nmaxPods: 110\n",
			want: Config{Path: "k", Exists: true, ResolvConf: "/run/systemd/resolve/resolv.conf", ResolvConfSet: true, ResolvConfFrom: "k",
				ClusterDNS: []netip.Addr{netip.MustParseAddr("169.254.25.10")}, ClusterDomain: "cluster.local"},
		},
		{name: "kubelet default resolvConf", in: "kind: KubeletConfiguration\n", want: Config{Path: "k", Exists: true, ResolvConf: "/etc/resolv.conf"}},
		{name: "resolvConf disabled", in: "resolvConf: \"\"\n", want: Config{Path: "k", Exists: true, ResolvConf: "", ResolvConfSet: true, ResolvConfFrom: "k"}},
		{name: "bad clusterDNS", in: "clusterDNS: [coredns]\n", wantErr: `k:1: clusterDNS[0]: "coredns" is not an IP address`},
		{name: "bad clusterDNS line", in: "kind: KubeletConfiguration\nclusterDNS:\n- 169.254.25.10\n- 169.254.99.x\n", wantErr: `k:4: clusterDNS[1]: "169.254.99.x" is not an IP address`},
		{name: "wrong kind", in: "kind: Pod\n", wantErr: `k:1: kind is "Pod"`},
		{name: "not yaml", in: "clusterDNS: [\n", wantErr: "k:1: YAML: did not find expected node content"},
		{name: "yaml error line", in: "kind: KubeletConfiguration\nclusterDNS:\n- 169.254.99.99\n  resolvConf: /etc/resolv.conf\n", wantErr: "k:4: YAML: "},
		{name: "type error line", in: "kind: KubeletConfiguration\n\nresolvConf: [a, b]\n", wantErr: "k:3: YAML: cannot unmarshal"},
		{name: "clusterDNS not a list", in: "clusterDNS: 169.254.25.10\n", wantErr: "k:1: clusterDNS is not a list"},
		{name: "not a mapping", in: "- a\n", wantErr: "k:1: not a YAML mapping"},
		{name: "alias", in: "x: &a [169.254.25.10]\nclusterDNS: *a\n", want: Config{Path: "k", Exists: true, ResolvConf: "/etc/resolv.conf", ClusterDNS: []netip.Addr{netip.MustParseAddr("169.254.25.10")}}},
		{name: "empty", in: "", want: Config{Path: "k", Exists: true, ResolvConf: "/etc/resolv.conf"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in), "k")
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

func FuzzParse(f *testing.F) {
	f.Add([]byte("kind: KubeletConfiguration\nclusterDNS:\n- 169.254.25.10\nresolvConf: /etc/resolv.conf\n"))
	f.Add([]byte("clusterDNS: [1, {a: b}]\nresolvConf: [x]\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := Parse(data, "/var/lib/kubelet/config.yaml")
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
