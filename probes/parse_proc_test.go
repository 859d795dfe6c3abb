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
