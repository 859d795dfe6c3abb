package resolvconf

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKubelet(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want KubeletView
	}{
		{
			name: "seed 001: resolved's uplink file as kubelet's resolvConf",
			in:   "# This is /run/systemd/resolve/resolv.conf managed by man:systemd-resolved(8).\n\nnameserver 169.254.25.10\nnameserver 192.168.1.1\nsearch example.org\n",
			want: KubeletView{Nameservers: []string{"169.254.25.10", "192.168.1.1"}, Search: []string{"example.org"}},
		},
		{
			name: "seed 002: domain ignored, trailing dots stripped",
			in:   "domain cluster.local\nsearch cluster.local default.svc.cluster.local. svc.cluster.local. .\nnameserver 169.254.25.10\n",
			want: KubeletView{Nameservers: []string{"169.254.25.10"}, Search: []string{"cluster.local", "default.svc.cluster.local", "svc.cluster.local"}},
		},
		{
			name: "indented lines count, semicolon lines do not",
			in:   "  nameserver 169.254.25.10\n; nameserver 10.0.0.9\n\tsearch a.example\n",
			want: KubeletView{Nameservers: []string{"169.254.25.10"}, Search: []string{"a.example"}},
		},
		{
			name: "empty search line clears the list",
			in:   "search a.example\nsearch\n",
			want: KubeletView{},
		},
		{
			name: "hostname copied as text, crlf trimmed",
			in:   "nameserver dns.example\r\nnameserver\r\nnameserver 10.0.0.1 extra\r\n",
			want: KubeletView{Nameservers: []string{"dns.example", "10.0.0.1"}},
		},
		{
			name: "options merged by name, later wins",
			in:   "options ndots:5 edns0\noptions ndots:2 trust-ad edns0\n",
			want: KubeletView{Options: []string{"ndots:2", "edns0", "trust-ad"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustParse(t, tt.in)
			if diff := cmp.Diff(tt.want, f.Kubelet()); diff != "" {
				t.Errorf("Kubelet() (-want +got):\n%s", diff)
			}
		})
	}
}
