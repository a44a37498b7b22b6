package e2e

import (
	"os/exec"
	"syscall"
	"testing"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
)

func nativeScramble(nonce []byte, pass string) []byte {
	return gomysql.CalcNativePassword(nonce, []byte(pass))
}

// raiseNoFile lifts this process's open-file limit to at least n (up to
// the hard limit).
func raiseNoFile(t testing.TB, n uint64) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	if r.Cur >= n {
		return
	}
	r.Cur = min(n, r.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	if r.Cur < n {
		t.Logf("open-file limit is %d (hard), below %d", r.Cur, n)
	}
}

func execCombined(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
