package mysqlproto

import (
	"fmt"
	"testing"
)

// Vectors of the pre-4.1 scramble as other clients compute it.
func TestScrambleOld(t *testing.T) {
	nonce := []byte{9, 8, 7, 6, 5, 4, 3, 2}
	for _, v := range []struct{ pass, want string }{
		{" pass", "47575c5a435b4251"},
		{"pass ", "47575c5a435b4251"},
		{"123\t456", "575c47505b5b5559"},
		{"C0mpl!ca ted#PASS123", "5d5d554849584a45"},
	} {
		if got := fmt.Sprintf("%x", scrambleOld(nonce, v.pass)); got != v.want {
			t.Errorf("scrambleOld(%q) = %s, want %s", v.pass, got, v.want)
		}
	}
	// Only the first 8 bytes of a longer nonce count.
	long := append(append([]byte(nil), nonce...), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	if fmt.Sprintf("%x", scrambleOld(long, " pass")) != "47575c5a435b4251" {
		t.Error("scrambleOld used more than 8 bytes of the nonce")
	}
}
