package sqlscan

// The digest is FNV-1a (64-bit) over the bytes of the normalised text. Scan
// computes it incrementally as it writes each normalised token, without
// building the text; DigestText computes it from text that Normalize built.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// DigestText returns the digest of already normalised text: for any q,
// DigestText(Normalize(nil, q)) == Scan(q).Digest. It is 0 only for empty
// text (a non-empty text whose hash is 0 gets 1).
func DigestText(norm []byte) uint64 {
	if len(norm) == 0 {
		return 0
	}
	h := uint64(fnvOffset64)
	for _, c := range norm {
		h = (h ^ uint64(c)) * fnvPrime64
	}
	return nonZero(h)
}

func nonZero(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}
