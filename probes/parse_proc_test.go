package probes

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const procNetUDP = `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  1: 0A19FEA9:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 0
  2: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4243 2 0000000000000000 0
`

func TestParseProcNet(t *testing.T) {
	got := ParseProcNet([]byte(procNetUDP))
	want := []ProcNetEntry{
		{Addr: cache, Port: 53, State: 7, Inode: "4242"},
		{Addr: netip.MustParseAddr("127.0.0.1"), Port: 53, State: 7, Inode: "4243"},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func FuzzParseProcNet(f *testing.F) {
	f.Add([]byte(procNetUDP))
	f.Add([]byte("h\n 1: 00000000000000000000000001000000:0035 0 0A 0 0 0 0 0 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) { ParseProcNet(data) })
}

// TestParseProcNetTable reads one kind of line per row. The udp6 and tcp lines are as Linux 6.18
// prints them for sockets bound in a scratch network namespace here.
func TestParseProcNetTable(t *testing.T) {
	const udp6Header = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n"
	tests := []struct {
		name, table string
		want        []ProcNetEntry
	}{
		{name: "the header alone", table: udp6Header},
		{
			name:  "udp6: each 32-bit word in host order",
			table: udp6Header + "13603: 000000FD000000000000000002000000:0035 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 306145 2 00000000ea489845 0\n",
			want:  []ProcNetEntry{{Addr: netip.MustParseAddr("fd00::2"), Port: 53, State: 7, Inode: "306145"}},
		},
		{
			name:  "udp6: an IPv4-mapped address is unmapped",
			table: udp6Header + "13603: 0000000000000000FFFF00000A19FEA9:0035 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 306146 2 000000004402863d 0\n",
			want:  []ProcNetEntry{{Addr: cache, Port: 53, State: 7, Inode: "306146"}},
		},
		{
			name:  "tcp: a listening socket",
			table: "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0A19FEA9:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 306147 1 0000000044b5fc23 100 0 0 10 0\n",
			want:  []ProcNetEntry{{Addr: cache, Port: 53, State: 0x0A, Inode: "306147"}},
		},
		{
			name: "lines it cannot read are skipped",
			table: procNetUDP +
				"  3: 0A19FEA9:0035 00000000:0000 07\n" + // too few fields
				"  4: 0A19FEZZ:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 4244 2 0 0\n" + // not hex
				"  5: 0A19FEA9FF:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 4245 2 0 0\n" + // 5 bytes
				"  6: 0A19FEA9 00000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 4246 2 0 0 0\n" + // no port
				"  7: 0A19FEA9:10035 00000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 4247 2 0 0\n" + // port too big
				"\n",
			want: []ProcNetEntry{
				{Addr: cache, Port: 53, State: 7, Inode: "4242"},
				{Addr: netip.MustParseAddr("127.0.0.1"), Port: 53, State: 7, Inode: "4243"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseProcNet([]byte(tc.table))
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}
