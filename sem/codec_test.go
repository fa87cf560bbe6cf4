package sem

import (
	"testing"

	"github.com/batonhq/baton/internal/jsonrec/jsonrectest"
)

// The codecs written from the records' fields write and read every one of
// them as encoding/json does.
func TestCodecs(t *testing.T) {
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Config]{
		Encode: (*Config).encodeFast,
		Decode: func(c *Config, b []byte) bool { return c.decodeFast(b, 0) },
		Known:  configKnown,
	})
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Unit]{
		Encode: (*Unit).encodeFast,
		Decode: func(u *Unit, b []byte) bool { return u.decodeFast(b, 0) },
		Known:  unitKnown,
	})
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Claim]{
		Encode: (*Claim).encodeFast,
		Decode: func(c *Claim, b []byte) bool { return c.decodeFast(b, 0) },
		Known:  claimKnown,
	})
}
