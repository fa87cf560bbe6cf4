package rate

import (
	"testing"

	"github.com/batonhq/baton/internal/jsonrec/jsonrectest"
)

// The codec written from the record's fields writes and reads every one
// of them as encoding/json does.
func TestCodecs(t *testing.T) {
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Limiter]{
		Encode: (*Limiter).encodeFast,
		Decode: func(l *Limiter, b []byte) bool { return l.decodeFast(b, 0) },
		Known:  limiterKnown,
	})
}
