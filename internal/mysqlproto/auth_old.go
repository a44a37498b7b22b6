package mysqlproto

// The pre-4.1 "old password" scramble (mysql_old_password), which MariaDB
// still offers to accounts with a 16-digit hash when secure_auth is OFF.
// No library Vigil depends on exports it (go-sql-driver/mysql keeps its
// copy unexported), so it is written here from the algorithm the server
// implements (sql/password.c, scramble_323).
//
// It is weak (a 62-bit hash, no salt in the stored value): Vigil uses it
// only to log in to a server that asks for it.

// oldPasswordHash is hash_password of sql/password.c: spaces and tabs do
// not count.
func oldPasswordHash(password []byte) (h [2]uint32) {
	nr, nr2, add := uint32(1345345333), uint32(0x12345671), uint32(7)
	for _, c := range password {
		if c == ' ' || c == '\t' {
			continue
		}
		tmp := uint32(c)
		nr ^= (((nr & 63) + add) * tmp) + (nr << 8)
		nr2 += (nr2 << 8) ^ nr
		add += tmp
	}
	return [2]uint32{nr & (1<<31 - 1), nr2 & (1<<31 - 1)}
}

// oldRand is my_rnd of the server.
type oldRand struct{ seed1, seed2 uint32 }

const oldRandMax = 0x3FFFFFFF

func (r *oldRand) next() byte {
	r.seed1 = (r.seed1*3 + r.seed2) % oldRandMax
	r.seed2 = (r.seed1 + r.seed2 + 33) % oldRandMax
	return byte(uint64(r.seed1) * 31 / oldRandMax)
}

// scrambleOld returns the 8-byte mysql_old_password answer to the first
// 8 bytes of nonce (the response sent is it and a NUL).
func scrambleOld(nonce []byte, password string) []byte {
	if len(nonce) > 8 {
		nonce = nonce[:8]
	}
	hp, hn := oldPasswordHash([]byte(password)), oldPasswordHash(nonce)
	r := oldRand{(hp[0] ^ hn[0]) % oldRandMax, (hp[1] ^ hn[1]) % oldRandMax}
	out := make([]byte, 8)
	for i := range out {
		out[i] = r.next() + 64
	}
	mask := r.next()
	for i := range out {
		out[i] ^= mask
	}
	return out
}
