package nodefs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodedns/nodedns/internal/testutil/tied"
)

// TestReadConfigFileJudgesWhatItReads: the owner and mode are judged on the file that is read. An
// unprivileged user (uid 65534) flips a symlink in a directory it owns between root's config and its
// own, as fast as it can; every read returns root's config or refuses the other, never the other's
// bytes. (Judging a stat of the path, then opening the path again, let the other config through in
// 3 to 28 of a few hundred reads.)
func TestReadConfigFileJudgesWhatItReads(t *testing.T) {
	if os.Getenv("NODEDNS_PRIVILEGED") != "1" || os.Geteuid() != 0 {
		t.Skip("privileged test: set NODEDNS_PRIVILEGED=1 and run as root (.ci/run does)")
	}
	const nobody = 65534
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	rootCfg := filepath.Join(base, "root.yaml")
	if err := os.WriteFile(rootCfg, []byte("from: root\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	attacker := filepath.Join(base, "attacker")
	if err := os.Mkdir(attacker, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(attacker, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(attacker, "theirs.yaml")
	if err := os.WriteFile(theirs, []byte("from: attacker\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(attacker, "config.yaml")
	if err := os.Symlink(rootCfg, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	// The attacker's loop, as uid 65534: each flip is an atomic rename of a fresh symlink.
	loop := exec.Command("sh", "-c", `cd "$1" && while :; do ln -sfn "$2" a.tmp && mv -Tf a.tmp config.yaml; ln -sfn "$3" b.tmp && mv -Tf b.tmp config.yaml; done`,
		"attacker", attacker, rootCfg, theirs)
	loop.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}, Setpgid: true}
	// An endless loop: tied, it dies with the test however the test ends.
	if err := tied.Start(loop); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-loop.Process.Pid, syscall.SIGKILL)
		_ = loop.Wait()
	}()

	var fromRoot, refused int
	for i := 0; i < 5000; i++ {
		data, err := ReadConfigFile(link)
		switch {
		case err == nil && string(data) == "from: root\n":
			fromRoot++
		case err == nil:
			t.Fatalf("read %d returned another user's config: %q", i, data)
		case strings.Contains(err.Error(), "owned by uid 65534"):
			refused++
		case os.IsNotExist(err):
			// between ln and mv nothing is missing (rename is atomic), but say so if it happens
			t.Logf("read %d: %v", i, err)
		default:
			t.Fatalf("read %d: %v", i, err)
		}
	}
	t.Logf("5000 reads under a flipping symlink: %d root's config, %d refused", fromRoot, refused)
	if fromRoot == 0 || refused == 0 {
		t.Errorf("the symlink did not flip during the reads (%d root's, %d refused): the test proved nothing", fromRoot, refused)
	}
}
